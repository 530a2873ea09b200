#!/usr/bin/env bash
# docker_build.sh PREFIX -- build the compose images FROM the local Debian base (no registry
# needed) into the daemon at $DOCKER_HOST (scripts/docker_up.sh), with a layer cache that
# survives the daemon (used by tests/integration/test_compose.py):
#
#   axbgate:latest      the Dockerfile, BASE_IMAGE=local/debian:bookworm, AXBGATE_PREFIX=PREFIX
#   axbgate-db:latest   docker/db/Dockerfile, BASE_IMAGE=local/debian:bookworm
#
# The slow layers (apt packages, Python dependencies: minutes) are the Dockerfile's `deps`
# stage and the db image; both are saved to $DOCKER_UP_CACHE/images-<prefix hash>.tar
# when they change and loaded into the next daemon as --cache-from sources, so a warm run
# rebuilds only the sources layer. The host's local certificate authorities
# (/usr/local/share/ca-certificates, e.g. a TLS-intercepting egress proxy) are passed as
# EXTRA_CA_CERTS so that pip inside the build trusts what the host trusts.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:?usage: docker_build.sh PREFIX}
: "${DOCKER_HOST:?set DOCKER_HOST (scripts/docker_up.sh prints it)}"
CACHE=${DOCKER_UP_CACHE:-/var/cache/axbgate-docker}
DOCKER=/usr/bin/docker
BASE=local/debian:bookworm
TAR=$CACHE/images-$(printf '%s' "$PREFIX" | sha256sum | cut -c1-12).tar
log() { printf '[docker_build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ca=""
for f in /usr/local/share/ca-certificates/*.crt; do [[ -f $f ]] && ca+="$(cat "$f")"$'\n'; done
args=(--network host --build-arg "BASE_IMAGE=$BASE" --build-arg "AXBGATE_PREFIX=$PREFIX"
      --build-arg "EXTRA_CA_CERTS=$ca" --cache-from axbgate-deps:cache)
id_of() { $DOCKER image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }

if [[ -s $TAR ]]; then
    log "loading cached layers from $TAR"
    $DOCKER load -q -i "$TAR" >/dev/null || log "could not load $TAR (ignored: full build)"
fi
before="$(id_of axbgate-deps:cache) $(id_of axbgate-db:cache)"
build() {  # quiet unless it fails
    local out; out=$(mktemp)
    if ! $DOCKER build "$@" >"$out" 2>&1; then tail -n 40 "$out" >&2; rm -f "$out"; return 1; fi
    rm -f "$out"
}
log "building axbgate-deps:cache, axbgate:latest, axbgate-db:latest"
build "${args[@]}" --target deps -t axbgate-deps:cache .
build "${args[@]}" -t axbgate:latest .
build --network host --build-arg "BASE_IMAGE=$BASE" --cache-from axbgate-db:cache \
    -t axbgate-db:latest -t axbgate-db:cache docker/db
after="$(id_of axbgate-deps:cache) $(id_of axbgate-db:cache)"
if [[ $before != "$after" ]]; then
    log "saving the deps and db layers to $TAR"
    mkdir -p "$CACHE"
    $DOCKER save -o "$TAR.tmp.$$" axbgate-deps:cache axbgate-db:cache && mv -f "$TAR.tmp.$$" "$TAR"
fi
log "built: axbgate:latest $(id_of axbgate:latest | cut -c8-19), axbgate-db:latest $(id_of axbgate-db:latest | cut -c8-19)"
