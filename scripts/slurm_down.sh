#!/usr/bin/env bash
# slurm_down.sh -- stop the single-node Slurm cluster started by scripts/slurm_up.sh.
# Stops slurmd, slurmctld, slurmdbd, then munged (reverse start order). Configuration,
# controller state, the accounting database and logs are kept, so slurm_up.sh brings the
# cluster back in a few seconds. Idempotent: stopping a stopped cluster is a no-op.
#
#   scripts/slurm_down.sh            stop all four daemons
#   scripts/slurm_down.sh --keep-munge   leave munged running
set -euo pipefail

RUN_DIR=/run/axbgate-slurm
KEEP_MUNGE=0
case ${1:-} in
    "") ;;
    --keep-munge) KEEP_MUNGE=1 ;;
    *) echo "usage: $0 [--keep-munge]" >&2; exit 2 ;;
esac
[[ $(id -u) -eq 0 ]] || { echo "slurm_down.sh must run as root" >&2; exit 2; }

log() { printf '[slurm_down %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$RUN_DIR"
# Do not race a concurrent slurm_up.sh (same lock). Daemons started by an older slurm_up.sh
# could have inherited the lock fd, so do not wait for ever: proceed after 60 s.
exec 9>"$RUN_DIR/lock"
flock -w 60 9 || log "warning: $RUN_DIR/lock still held after 60 s; stopping anyway"

pidfile_of() {
    case $1 in
        munged) echo /run/munge/munged.pid ;;
        *) echo "$RUN_DIR/$1.pid" ;;
    esac
}

# pids_of NAME: the daemon's pid from its pid file (checked against /proc/PID/comm), plus any
# other process whose executable name is exactly NAME (e.g. started without our pid file).
pids_of() {
    local name=$1 pf pid
    pf=$(pidfile_of "$name")
    {
        if [[ -s $pf ]]; then
            pid=$(<"$pf")
            if [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/comm ]] \
                && [[ $(</proc/$pid/comm) == "$name" ]]; then
                echo "$pid"
            fi
        fi
        pgrep -x "$name" || true
    } | sort -u
}

stop_daemon() {
    local name=$1 pid i pids
    pids=$(pids_of "$name")
    if [[ -z $pids ]]; then
        rm -f "$(pidfile_of "$name")" "$RUN_DIR/$name.hash"
        return 0
    fi
    for pid in $pids; do
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $pids; do
        for ((i = 0; i < 150; i++)); do
            [[ -d /proc/$pid ]] || break
            sleep 0.1
        done
        if [[ -d /proc/$pid ]]; then
            log "$name (pid $pid) still alive after 15 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    rm -f "$(pidfile_of "$name")" "$RUN_DIR/$name.hash"
}

stop_daemon slurmd
stop_daemon slurmctld
stop_daemon slurmdbd
((KEEP_MUNGE)) || stop_daemon munged
rm -f /etc/slurm/axbgate-slurm.env
log "Slurm daemons stopped"
