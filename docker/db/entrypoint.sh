#!/bin/sh
# Entry point of the axbgate db image. With the official postgres image underneath it hands
# over to that image's docker-entrypoint.sh. On plain Debian it initialises PGDATA on first
# start (superuser POSTGRES_USER with POSTGRES_PASSWORD, database POSTGRES_DB, password
# (SCRAM) authentication over TCP, trust on the container's local socket only) and then runs
# PostgreSQL as the postgres account.
set -eu
if command -v docker-entrypoint.sh >/dev/null 2>&1; then
    exec docker-entrypoint.sh "$@"
fi
if [ "${1:-}" != postgres ]; then
    exec "$@"
fi
shift
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
PGDATA=${PGDATA:-/var/lib/postgresql/data}
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 0700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    chown postgres "$pwfile"
    as_pg "$bin/initdb" -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$db" != postgres ]; then
        # Single-user mode runs as the bootstrap superuser; no server, no port yet.
        echo "CREATE DATABASE \"$db\";" | as_pg "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "axbgate-db: initialised $PGDATA (user $user, database $db)"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups \
    "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
