#!/usr/bin/env bash
# docker_up.sh DIR -- start a PRIVATE Docker daemon under DIR for the compose test (root).
#
#   scripts/docker_up.sh /var/tmp/axbgate-docker.X    start it; prints DOCKER_HOST=unix://...
#   scripts/docker_down.sh /var/tmp/axbgate-docker.X  stop it and remove DIR entirely
#
# Nothing of a system Docker is used or touched: the daemon has its own socket
# (DIR/docker.sock), pid file, exec-root (DIR/exec), data-root (DIR/data), containerd and
# log (DIR/dockerd.log); no iptables rules and no default bridge (--iptables=false
# --bridge=none: compose's own network still works, published ports go through
# docker-proxy). No registry is reachable on CI machines, so the Debian bookworm base image
# (local/debian:bookworm) is made with debootstrap once, cached as a tarball under
# $DOCKER_UP_CACHE (default /var/cache/axbgate-docker), and imported into the new
# daemon on every start. Packages (docker.io, docker-compose, debootstrap) are installed
# with apt when missing. Facts and timings: shared/CONTAINERS.md, README "Shared deployment".
#
# Storage driver: overlay2 when the kernel has overlayfs and DIR's filesystem takes it,
# else vfs (every layer copied in full: slow and large, but works everywhere).
set -euo pipefail

DIR=${1:?usage: docker_up.sh DIR}
CACHE=${DOCKER_UP_CACHE:-/var/cache/axbgate-docker}
BASE_IMAGE=local/debian:bookworm
MIRROR=${DOCKER_UP_MIRROR:-http://deb.debian.org/debian}
TIMEOUT=${DOCKER_UP_TIMEOUT:-60}

log() { printf '[docker_up %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; [[ -f $DIR/dockerd.log ]] && tail -n 30 "$DIR/dockerd.log" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "docker_up.sh must run as root" >&2; exit 2; }

# 1. packages (Debian bookworm: dockerd 20.10, docker-compose 1.29, debootstrap)
need=()
command -v dockerd >/dev/null || need+=(docker.io)
[[ -x /usr/bin/docker-compose ]] || need+=(docker-compose)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
    log "installing: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
        || die "apt-get install ${need[*]} failed"
fi
DOCKER=/usr/bin/docker   # Debian's client, same version as the daemon

# 2. the base image's root filesystem, made once (debootstrap minbase, ~25 s, ~200 MB)
mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock -w 600 9 || die "could not lock $CACHE/lock"
BASE_TAR=$CACHE/debian-bookworm-minbase.tar
BASE_IMG_TAR=$CACHE/debian-bookworm-image.tar
if [[ ! -s $BASE_TAR && ! -s $BASE_IMG_TAR ]]; then
    log "debootstrap bookworm (minbase) from $MIRROR"
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    nice -n 10 debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || { rm -rf "$root"; die "debootstrap failed (see $CACHE/debootstrap.log)"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$BASE_TAR.tmp" . && mv -f "$BASE_TAR.tmp" "$BASE_TAR"
    rm -rf "$root"
fi
flock -u 9

# 3. the daemon
mkdir -p "$DIR/data" "$DIR/exec"
SOCK=$DIR/docker.sock
driver=vfs
if grep -qw overlay /proc/filesystems; then
    # overlayfs refuses some upper filesystems (overlay itself, some network filesystems).
    probe=$(mktemp -d "$DIR/ovl.XXXXXX")
    mkdir -p "$probe"/{l,u,w,m}
    if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
        umount "$probe/m"; driver=overlay2
    fi
    rm -rf "$probe"
fi
if [[ -S $SOCK ]] && $DOCKER -H "unix://$SOCK" info >/dev/null 2>&1; then
    log "dockerd already answers on $SOCK"
else
    log "starting dockerd (storage driver $driver) under $DIR"
    # 9>&-: the daemon must not keep the cache lock's descriptor.
    # nice: image builds run in the daemon's children; keep them behind interactive work.
    setsid nice -n "${DOCKERD_NICE:-10}" dockerd --host "unix://$SOCK" --pidfile "$DIR/dockerd.pid" \
        --data-root "$DIR/data" --exec-root "$DIR/exec" --storage-driver "$driver" \
        --iptables=false --ip6tables=false --bridge=none --ip-masq=false \
        --userland-proxy=true --log-level warn \
        9>&- </dev/null >"$DIR/dockerd.log" 2>&1 &
    deadline=$((SECONDS + TIMEOUT))
    until $DOCKER -H "unix://$SOCK" info >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "dockerd did not answer on $SOCK within ${TIMEOUT}s"
        sleep 0.3
    done
fi

# 4. the base image. Imported once and kept as a `docker save` archive, so that it has the
# same image id in every daemon (a fresh `docker import` makes a new id each time, which
# would invalidate every cached layer built on it: scripts/docker_build.sh).
if ! $DOCKER -H "unix://$SOCK" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    flock -w 600 9 || die "could not lock $CACHE/lock"
    if [[ -s $BASE_IMG_TAR ]]; then
        $DOCKER -H "unix://$SOCK" load -q -i "$BASE_IMG_TAR" >/dev/null || die "docker load $BASE_IMG_TAR failed"
    else
        log "importing $BASE_IMAGE"
        $DOCKER -H "unix://$SOCK" import "$BASE_TAR" "$BASE_IMAGE" >/dev/null || die "docker import failed"
        $DOCKER -H "unix://$SOCK" save -o "$BASE_IMG_TAR.tmp" "$BASE_IMAGE" \
            && mv -f "$BASE_IMG_TAR.tmp" "$BASE_IMG_TAR"
    fi
    flock -u 9
fi
log "ready: DOCKER_HOST=unix://$SOCK ($driver)"
echo "DOCKER_HOST=unix://$SOCK"
