#!/usr/bin/env bash
# slurm_up.sh -- bring up a REAL single-node Slurm cluster (Debian 12 packages, Slurm 22.05)
# with accounting (slurmdbd + the local MariaDB), for CI and local development. Run as root.
#
#   scripts/slurm_up.sh            install (if needed), configure, start, wait until usable
#   scripts/slurm_up.sh --check    exit 0 iff the cluster is up and usable; changes nothing
#   scripts/slurm_down.sh          stop the daemons (configuration and state are kept)
#
# Idempotent: when everything is already up with the current configuration it only checks
# and exits. A daemon running with an older configuration (its config hash, recorded at start,
# differs from the files now written) is restarted; a daemon that died is started again.
#
# What it sets up (fixed locations; this is a CI machine):
#   /etc/slurm/slurm.conf, /etc/slurm/slurmdbd.conf (0600, owned by SlurmUser=slurm)
#   /etc/munge/munge.key, /var/log/slurm/*.log, /var/lib/slurm/{slurmctld,slurmd}
#   cluster "axbgate", node = this host (NodeAddr=127.0.0.1), partition "debug" (Default=YES,
#   MaxTime=7 days), MariaDB database slurm_acct_db / user slurm on 127.0.0.1:3306,
#   /etc/slurm/axbgate-slurm.env (AXBGATE_SLURM=1, cluster/partition names) once it is usable.
# Tests detect Slurm with `sbatch` on PATH and `scontrol ping` reporting UP (or --check).
#
# Environment knobs: SLURM_UP_TIMEOUT (seconds per wait, default 90),
#   AXBGATE_SLURM_DB_PASS (MariaDB password of the slurm user, default "axbgate-slurm").
#
# Timings measured on the CI machine kind (Debian 12, 2 cores, MariaDB running), 2026-11-30:
#   from scratch (no slurm/munge packages, no config/state/db; apt-get update + install of
#     the 5 packages ~5 s of it):                           ~8 s
#   from stopped daemons (after slurm_down.sh):             ~2.5-3 s
#   already up (nothing to do, only checks):                ~0.7-1 s
#   (slurm_down.sh: ~8 s; each daemon takes ~2 s to exit on SIGTERM)
set -euo pipefail

CLUSTER=axbgate
PARTITION=debug
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm
RUN_DIR=/run/axbgate-slurm           # pid files + config hashes of the running daemons
SLURM_USER=slurm
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=${AXBGATE_SLURM_DB_PASS:-axbgate-slurm}
TIMEOUT=${SLURM_UP_TIMEOUT:-90}
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd)
ENV_FILE=$CONF_DIR/axbgate-slurm.env

log() { printf '[slurm_up %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

dump_logs() {
    local f
    for f in "$LOG_DIR"/slurmdbd.log "$LOG_DIR"/slurmctld.log "$LOG_DIR"/slurmd.log \
             /var/log/munge/munged.log; do
        [[ -f $f ]] || continue
        printf '\n===== tail -n 40 %s =====\n' "$f" >&2
        tail -n 40 "$f" >&2 || true
    done
    if command -v sinfo >/dev/null; then
        printf '\n===== sinfo -N -l =====\n' >&2; timeout 10 sinfo -N -l >&2 || true
        printf '\n===== scontrol show node =====\n' >&2; timeout 10 scontrol show node >&2 || true
    fi
}

die() { log "ERROR: $*"; dump_logs; exit 1; }

# wait_for DESCRIPTION COMMAND...: poll COMMAND (quietly) until it succeeds or TIMEOUT passes.
wait_for() {
    local what=$1; shift
    local deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "timed out after ${TIMEOUT}s waiting for: $what"
        sleep 0.5
    done
}

# ---------------------------------------------------------------------------------------------
# --check: read-only probe
# ---------------------------------------------------------------------------------------------
node_state() { timeout 10 sinfo -h -N -o '%T' 2>/dev/null | head -n1; }
ctld_up() { timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }
node_usable() {
    # idle/mixed/allocated/completing are usable; down, drained, unknown, not_responding are not
    local s; s=$(node_state)
    [[ $s =~ ^(idle|mixed|allocated|completing)$ ]]
}
dbd_up() { timeout 10 sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; }

if [[ ${1:-} == --check ]]; then
    command -v sbatch >/dev/null && ctld_up && node_usable && dbd_up && exit 0
    exit 1
fi
[[ $# -eq 0 ]] || { echo "usage: $0 [--check]" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "slurm_up.sh must run as root" >&2; exit 2; }

mkdir -p "$RUN_DIR"
# Serialize concurrent invocations (several sessions/CI jobs may call this at once).
exec 9>"$RUN_DIR/lock"
flock -w 300 9 || die "could not take $RUN_DIR/lock within 300 s"

# ---------------------------------------------------------------------------------------------
# 1. packages
# ---------------------------------------------------------------------------------------------
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
missing=()
for p in "${PACKAGES[@]}"; do pkg_installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
fi

# ---------------------------------------------------------------------------------------------
# 2. users, directories, munge key
# ---------------------------------------------------------------------------------------------
getent group "$SLURM_USER" >/dev/null || groupadd --system "$SLURM_USER"
id -u "$SLURM_USER" >/dev/null 2>&1 || useradd --system --gid "$SLURM_USER" \
    --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin "$SLURM_USER"
id -u munge >/dev/null 2>&1 || die "user munge missing after installing munge"

install -d -m 0755 "$CONF_DIR"
install -d -m 0755 -o "$SLURM_USER" -g "$SLURM_USER" "$LOG_DIR" "$STATE_DIR" \
    "$STATE_DIR/slurmctld"
install -d -m 0755 "$STATE_DIR/slurmd"
install -d -m 0700 -o munge -g munge /etc/munge /var/lib/munge /var/log/munge
install -d -m 0755 -o munge -g munge /run/munge

if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating munge key"
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile=/etc/munge/munge.key --force
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key

# ---------------------------------------------------------------------------------------------
# 3. MariaDB database + user for slurmdbd
# ---------------------------------------------------------------------------------------------
mysql_root() { mysql --protocol=TCP -h 127.0.0.1 -P 3306 -uroot "$@"; }
if ! mysql_root -e 'SELECT 1' >/dev/null 2>&1; then
    # Not expected on the CI kind (MariaDB already runs there); handle a bare machine anyway.
    log "MariaDB not reachable on 127.0.0.1:3306; installing/starting it"
    if ! pkg_installed mariadb-server; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq --no-install-recommends mariadb-server \
            >/dev/null || die "could not install mariadb-server"
    fi
    /etc/init.d/mariadb start >/dev/null 2>&1 || true
    wait_for "MariaDB on 127.0.0.1:3306" mysql_root -e 'SELECT 1'
fi
mysql_root <<SQL || die "could not create the accounting database/user in MariaDB"
CREATE DATABASE IF NOT EXISTS \`$DB_NAME\`;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO '$DB_USER'@'localhost';
GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO '$DB_USER'@'127.0.0.1';
SQL

# ---------------------------------------------------------------------------------------------
# 4. configuration files (written only when their content changes)
# ---------------------------------------------------------------------------------------------
HOST=$(hostname -s)
# `slurmd -C` prints the node's hardware, e.g.
#   NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=23990
#   UpTime=0-01:02:03
NODE_LINE=$(slurmd -C 2>/dev/null | grep '^NodeName=' | head -n1) || true
[[ -n $NODE_LINE ]] || die "slurmd -C printed no NodeName line"
NODE_NAME=$(sed -E 's/^NodeName=([^ ]+).*/\1/' <<<"$NODE_LINE")

new_slurm_conf=$(cat <<EOF
# Generated by scripts/slurm_up.sh -- do not edit by hand (it is rewritten on every run).
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=$SLURM_USER
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
EnforcePartLimits=ALL
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
Waittime=0
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG_DIR/jobcomp.log
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE_NAME Default=YES MaxTime=7-00:00:00 State=UP
EOF
)

new_dbd_conf=$(cat <<EOF
# Generated by scripts/slurm_up.sh -- do not edit by hand (it is rewritten on every run).
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=$SLURM_USER
PidFile=$RUN_DIR/slurmdbd.pid
LogFile=$LOG_DIR/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
EOF
)

# write_if_changed PATH MODE OWNER CONTENT
write_if_changed() {
    local path=$1 mode=$2 owner=$3 content=$4
    if [[ ! -f $path ]] || [[ $(cat "$path") != "$content" ]]; then
        log "writing $path"
        local tmp; tmp=$(mktemp "$path.XXXXXX")
        printf '%s\n' "$content" >"$tmp"
        chmod "$mode" "$tmp"; chown "$owner" "$tmp"
        mv -f "$tmp" "$path"
    fi
    chmod "$mode" "$path"; chown "$owner" "$path"
}
write_if_changed "$CONF_DIR/slurm.conf" 0644 root:root "$new_slurm_conf"
write_if_changed "$CONF_DIR/slurmdbd.conf" 0600 "$SLURM_USER:$SLURM_USER" "$new_dbd_conf"

# Hashes of what each daemon reads; recorded at start, compared on later runs.
# (The munge key matters to every daemon through munged, so it is in munged's hash only;
#  restarting munged alone is enough when the key changes.)
hash_of() { cat "$@" | sha256sum | cut -c1-64; }
declare -A WANT_HASH=(
    [munged]=$(hash_of /etc/munge/munge.key)
    [slurmdbd]=$(hash_of "$CONF_DIR/slurmdbd.conf")
    [slurmctld]=$(hash_of "$CONF_DIR/slurm.conf")
    [slurmd]=$(hash_of "$CONF_DIR/slurm.conf")
)

# ---------------------------------------------------------------------------------------------
# 5. daemons
# ---------------------------------------------------------------------------------------------
pidfile_of() {
    case $1 in
        munged) echo /run/munge/munged.pid ;;
        *) echo "$RUN_DIR/$1.pid" ;;
    esac
}

# running_pid NAME: print the pid of the running daemon NAME (from its pid file, checked
# against /proc/PID/comm), or nothing.
running_pid() {
    local name=$1 pf pid
    pf=$(pidfile_of "$name")
    if [[ -s $pf ]]; then
        pid=$(<"$pf")
        if [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/comm ]] \
            && [[ $(</proc/$pid/comm) == "$name" ]]; then
            echo "$pid"; return 0
        fi
    fi
    # Started by something else (no/stale pid file)? Look it up by exact executable name.
    # (Daemons of the trays cluster, scripts/slurm_trays.sh, carry "-f /etc/slurm-trays/...".)
    pid=$(for p in $(pgrep -x "$name"); do
              grep -qa slurm-trays "/proc/$p/cmdline" 2>/dev/null || echo "$p"
          done | head -n1) || true
    [[ -n $pid ]] && echo "$pid"
    return 0
}

stop_daemon() {
    local name=$1 pid i
    pid=$(running_pid "$name")
    [[ -n $pid ]] || return 0
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        [[ -d /proc/$pid ]] || break
        sleep 0.1
    done
    if [[ -d /proc/$pid ]]; then
        log "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$(pidfile_of "$name")" "$RUN_DIR/$name.hash"
}

start_daemon() {
    local name=$1
    log "starting $name"
    # 9>&- : the daemons must not inherit the flock fd, or they hold the lock for ever.
    # </dev/null and the log redirection: nothing of the caller's terminal/pipes is kept.
    case $name in
        munged)   runuser -u munge -- /usr/sbin/munged ;;
        slurmdbd) /usr/sbin/slurmdbd ;;
        slurmctld) /usr/sbin/slurmctld ;;
        slurmd)   /usr/sbin/slurmd ;;
    esac 9>&- </dev/null >>"$LOG_DIR/daemon-start.log" 2>&1 \
        || die "$name failed to start (see $LOG_DIR/daemon-start.log)"
    printf '%s\n' "${WANT_HASH[$name]}" >"$RUN_DIR/$name.hash"
}

# ensure_daemon NAME: start NAME if not running; restart it if its config changed since start.
ensure_daemon() {
    local name=$1 pid have
    pid=$(running_pid "$name")
    if [[ -n $pid ]]; then
        have=$(cat "$RUN_DIR/$name.hash" 2>/dev/null || true)
        if [[ $have == "${WANT_HASH[$name]}" ]]; then
            return 0
        fi
        log "$name (pid $pid) runs with a different/unknown configuration; restarting it"
        stop_daemon "$name"
    fi
    start_daemon "$name"
}

munge_ok() { munge -n | unmunge; }

# A new munge key invalidates every credential the slurm daemons hold: restart all of them.
if [[ -n $(running_pid munged) ]] \
    && [[ $(cat "$RUN_DIR/munged.hash" 2>/dev/null || true) != "${WANT_HASH[munged]}" ]]; then
    for d in slurmd slurmctld slurmdbd; do stop_daemon "$d"; done
fi
ensure_daemon munged
wait_for "munged (munge -n | unmunge)" munge_ok

ensure_daemon slurmdbd
wait_for "slurmdbd to answer sacctmgr" timeout 10 sacctmgr -n -P list cluster

if ! dbd_up; then
    log "registering cluster $CLUSTER in slurmdbd"
    sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
fi

ensure_daemon slurmctld
wait_for "slurmctld (scontrol ping -> UP)" ctld_up

ensure_daemon slurmd

# The node must come up idle (or busy with jobs). A node left DOWN/DRAIN by an earlier
# restart (e.g. "Node unexpectedly rebooted") is resumed once.
deadline=$((SECONDS + TIMEOUT))
resumed=0
while :; do
    if node_usable; then break; fi
    st=$(node_state)
    if [[ $st =~ (down|drain|fail) ]] && ((resumed == 0)) && [[ -n $(running_pid slurmd) ]]; then
        log "node $NODE_NAME is '$st'; resuming it"
        scontrol update NodeName="$NODE_NAME" State=RESUME >/dev/null 2>&1 || true
        resumed=1
    fi
    ((SECONDS < deadline)) || die "timed out after ${TIMEOUT}s waiting for node $NODE_NAME to be idle (state: '${st:-?}')"
    sleep 0.5
done

cat >"$ENV_FILE.tmp" <<EOF
# Written by scripts/slurm_up.sh when the cluster was last verified up.
AXBGATE_SLURM=1
AXBGATE_SLURM_CLUSTER=$CLUSTER
AXBGATE_SLURM_PARTITION=$PARTITION
AXBGATE_SLURM_NODE=$NODE_NAME
EOF
mv -f "$ENV_FILE.tmp" "$ENV_FILE"

log "Slurm cluster '$CLUSTER' is up: node $NODE_NAME $(node_state), partition $PARTITION, accounting via slurmdbd"
