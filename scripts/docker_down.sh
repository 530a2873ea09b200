#!/usr/bin/env bash
# docker_down.sh DIR -- stop the private Docker daemon that docker_up.sh started under DIR and
# remove DIR: no daemon, containerd, container, network, mount or data-root is left behind.
# Safe to run twice and on a half-started DIR. The image cache (DOCKER_UP_CACHE) stays.
set -uo pipefail

DIR=${1:?usage: docker_down.sh DIR}
DIR=$(realpath -m "$DIR")
SOCK=$DIR/docker.sock
DOCKER=/usr/bin/docker
log() { printf '[docker_down %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
[[ -d $DIR ]] || exit 0

# The host-side interfaces of this daemon's bridge networks (br-<id>), removed with the
# networks; listed now in case the daemon cannot remove them any more.
bridges=""
if [[ -S $SOCK ]]; then
    bridges=$(timeout 20 $DOCKER -H "unix://$SOCK" network ls -q --no-trunc --filter driver=bridge 2>/dev/null \
        | cut -c1-12 | sed 's/^/br-/') || true
fi

# Containers first (dockerd would stop them one by one with a 10 s grace each).
if [[ -S $SOCK ]] && ids=$(timeout 20 $DOCKER -H "unix://$SOCK" ps -aq 2>/dev/null) && [[ -n $ids ]]; then
    # shellcheck disable=SC2086
    timeout 60 $DOCKER -H "unix://$SOCK" rm -f -v $ids >/dev/null 2>&1 || true
fi

# wait_gone PID SECONDS: wait until PID has exited.
wait_gone() {
    local pid=$1 i
    for ((i = 0; i < $2 * 10; i++)); do [[ -d /proc/$pid ]] || return 0; sleep 0.1; done
    return 1
}

pid=$(cat "$DIR/dockerd.pid" 2>/dev/null || true)
if [[ $pid =~ ^[0-9]+$ ]] && [[ -d /proc/$pid ]] && [[ $(cat /proc/$pid/comm) == dockerd ]]; then
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    wait_gone "$pid" 30 || { log "dockerd ignored SIGTERM for 30 s; SIGKILL"; kill -KILL "$pid"; wait_gone "$pid" 5; }
    log "dockerd stopped"
fi

# Anything still running from DIR (the daemon's containerd, shims after a SIGKILL): only
# processes whose command line names DIR, i.e. started by this daemon.
for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    if [[ $cmd == *"$DIR/"* ]]; then
        log "killing leftover ${p#/proc/}: ${cmd:0:120}"
        kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
done

for b in $bridges; do
    [[ -e /sys/class/net/$b ]] && { log "removing leftover interface $b"; ip link delete "$b" 2>/dev/null || true; }
done

# Mounts under DIR (overlay layers, shm, network namespaces), deepest first.
awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
done
rm -rf "$DIR" || { log "could not remove $DIR"; exit 1; }
log "removed $DIR"
