#!/usr/bin/env bash
# slurm_trays.sh -- a SECOND real Slurm cluster, "trays", with two nodes on this one machine,
# for the multi-node tests and demos (issue 15; facts in shared/SLURM_CI.md "Two trays").
# Run as root, after scripts/slurm_up.sh (it uses that script's munged and slurmdbd).
#
#   scripts/slurm_trays.sh           set up (if needed) and start; wait until both nodes idle
#   scripts/slurm_trays.sh --check   exit 0 iff the trays cluster is up and usable
#   scripts/slurm_trays.sh --down    stop its daemons and remove its network (config kept)
#
# Idempotent: when everything is up with the current configuration it only checks.
#
# Layout (fixed; the single-node cluster of slurm_up.sh is left alone):
#   /etc/slurm-trays/slurm.conf        select it with SLURM_CONF=/etc/slurm-trays/slurm.conf
#   /etc/slurm-trays/hosts.trayN       the /etc/hosts each node sees (own name -> 127.0.1.1,
#                                      as on a default Debian install; the other tray's IP)
#   /etc/slurm-trays/axbgate-trays.env written once the cluster is verified usable
#   /var/log/slurm-trays, /var/lib/slurm-trays, /run/axbgate-slurm-trays (pid files)
#   cluster "trays" (accounting through slurm_up.sh's slurmdbd on 127.0.0.1:6819),
#   partition "trays" (Default), slurmctld on 10.213.15.1:6827, slurmd port 6828; partition
#   "trays-urgent" (higher PriorityTier, PreemptMode=CANCEL) preempts jobs of "trays".
# Network: bridge axbtrays0 (10.213.15.1/24) on the host; per node a named network namespace
#   axbtrayN with a veth pair: host side axbtNh (on the bridge), node side "trayeth0"
#   (10.213.15.1N/24; the same name on every node, as on a real cluster). Each slurmd runs
#   in that network namespace plus its own UTS namespace (hostname trayN) and mount
#   namespace (its hosts file bind-mounted on /etc/hosts), entered with nsenter/unshare,
#   not `ip netns exec` (which remounts /sys and breaks slurmd's cgroup check).
# Timings (2 cores, 2026-12-01): from scratch ~3 s; already up (checks only) ~0.5 s.
set -euo pipefail

CLUSTER=trays
PARTITION=trays
CONF_DIR=/etc/slurm-trays
CONF=$CONF_DIR/slurm.conf
LOG_DIR=/var/log/slurm-trays
STATE_DIR=/var/lib/slurm-trays
RUN_DIR=/run/axbgate-slurm-trays
SLURM_USER=slurm
BRIDGE=axbtrays0
SUBNET=10.213.15
NODES=(tray1 tray2)
NODE_IF=trayeth0
CTLD_PORT=6827
SLURMD_PORT=6828
TIMEOUT=${SLURM_UP_TIMEOUT:-90}
ENV_FILE=$CONF_DIR/axbgate-trays.env
export SLURM_CONF=$CONF

log() { printf '[slurm_trays %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    log "ERROR: $*"
    local f
    for f in "$LOG_DIR"/*.log; do
        [[ -f $f ]] || continue
        printf '\n===== tail -n 30 %s =====\n' "$f" >&2; tail -n 30 "$f" >&2 || true
    done
    exit 1
}
wait_for() {
    local what=$1; shift
    local deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "timed out after ${TIMEOUT}s waiting for: $what"
        sleep 0.3
    done
}

ctld_up() { timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }
nodes_usable() {
    local states
    states=$(timeout 10 sinfo -h -N -p "$PARTITION" -o '%N %T' 2>/dev/null) || return 1
    local n
    for n in "${NODES[@]}"; do
        grep -Eq "^$n (idle|mixed|allocated|completing)\$" <<<"$states" || return 1
    done
}
dbd_has_cluster() {
    timeout 10 sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"
}

# pid_alive NAME: the pid in RUN_DIR/NAME.pid if that process still runs (by pid file only:
# the single-node cluster runs daemons of the same names).
pid_alive() {
    local pf=$RUN_DIR/$1.pid pid
    [[ -s $pf ]] || return 1
    pid=$(<"$pf")
    [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/cmdline ]] \
        && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$CONF" && echo "$pid"
}

stop_pid() {
    local name=$1 pid i
    pid=$(pid_alive "$name") || return 0
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
    [[ -d /proc/$pid ]] && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$RUN_DIR/$name.pid" "$RUN_DIR/$name.hash"
}

if [[ ${1:-} == --check ]]; then
    command -v sbatch >/dev/null && [[ -f $CONF ]] && ctld_up && nodes_usable && exit 0
    exit 1
fi
[[ $(id -u) -eq 0 ]] || { echo "slurm_trays.sh must run as root" >&2; exit 2; }
mkdir -p "$RUN_DIR"
exec 9>"$RUN_DIR/lock"
flock -w 300 9 || die "could not take $RUN_DIR/lock within 300 s"

if [[ ${1:-} == --down ]]; then
    for n in "${NODES[@]}"; do stop_pid "slurmd-$n"; done
    stop_pid slurmctld
    for i in "${!NODES[@]}"; do
        ip netns del "axbtray$((i + 1))" 2>/dev/null || true   # /run/netns itself stays
        ip link del "axbt$((i + 1))h" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    log "trays cluster stopped"
    exit 0
fi
[[ $# -eq 0 ]] || { echo "usage: $0 [--check|--down]" >&2; exit 2; }

command -v slurmctld >/dev/null && command -v ip >/dev/null && command -v nsenter >/dev/null \
    || die "needs slurm (run scripts/slurm_up.sh first), iproute2 and util-linux"
munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || die "munged is not running (scripts/slurm_up.sh starts it)"

# ---- 1. network: bridge + one namespace and veth pair per node ---------------------------
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
fi
ip addr replace "$SUBNET.1/24" dev "$BRIDGE"
# Bridged traffic between the trays never goes through iptables (br_netfilter may be loaded
# and a FORWARD policy of DROP, e.g. from a docker daemon, would cut the trays apart).
ip link set "$BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0 2>/dev/null || true
ip link set "$BRIDGE" up
for i in "${!NODES[@]}"; do
    ns=axbtray$((i + 1)); host_if=axbt$((i + 1))h; addr=$SUBNET.1$((i + 1))
    [[ -e /run/netns/$ns ]] || ip netns add "$ns"
    if ! ip link show "$host_if" >/dev/null 2>&1; then
        ip -n "$ns" link del "$NODE_IF" 2>/dev/null || true
        ip link add "$host_if" type veth peer name "$NODE_IF" netns "$ns"
    fi
    ip link set "$host_if" master "$BRIDGE" up
    ip -n "$ns" addr replace "$addr/24" dev "$NODE_IF"
    ip -n "$ns" link set "$NODE_IF" up
    ip -n "$ns" link set lo up
done

# ---- 2. configuration -------------------------------------------------------------------
install -d -m 0755 "$CONF_DIR"
install -d -m 0755 -o "$SLURM_USER" -g "$SLURM_USER" "$LOG_DIR" "$STATE_DIR" "$STATE_DIR/slurmctld"
for n in "${NODES[@]}"; do install -d -m 0755 "$STATE_DIR/slurmd-$n"; done

# The node hardware line of this machine, renamed per tray (each tray claims all CPUs).
HW=$(slurmd -C 2>/dev/null | grep '^NodeName=' | head -n1 | sed -E 's/^NodeName=[^ ]+ //; s/RealMemory=[0-9]+/RealMemory=2000/')
[[ -n $HW ]] || die "slurmd -C printed no NodeName line"
node_lines=""
for i in "${!NODES[@]}"; do
    node_lines+="NodeName=${NODES[$i]} NodeAddr=$SUBNET.1$((i + 1)) $HW State=UNKNOWN"$'\n'
done
want_conf=$(cat <<EOF
# Generated by scripts/slurm_trays.sh -- do not edit by hand (rewritten on every run).
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)($SUBNET.1)
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
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd-%n
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd-%n.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG_DIR/jobcomp.log
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
${node_lines}PartitionName=$PARTITION Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=7-00:00:00 State=UP PriorityTier=1
PartitionName=$PARTITION-urgent Nodes=$(IFS=,; echo "${NODES[*]}") MaxTime=1:00:00 State=UP PriorityTier=2
EOF
)
if [[ ! -f $CONF ]] || [[ $(cat "$CONF") != "$want_conf" ]]; then
    log "writing $CONF"
    printf '%s\n' "$want_conf" >"$CONF.tmp" && mv -f "$CONF.tmp" "$CONF"
fi
for i in "${!NODES[@]}"; do
    n=${NODES[$i]}; other=$((1 - i))
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n%s\t%s\n' \
        "$n" "$SUBNET.1$((other + 1))" "${NODES[$other]}" >"$CONF_DIR/hosts.$n"
done
conf_hash=$(sha256sum "$CONF" | cut -c1-64)

# ---- 3. daemons ---------------------------------------------------------------------------
dbd_has_cluster || { log "registering cluster $CLUSTER in slurmdbd"; sacctmgr -i add cluster "$CLUSTER" >/dev/null \
    || die "sacctmgr add cluster $CLUSTER failed (is slurm_up.sh's slurmdbd up?)"; }

ensure() {   # ensure NAME START-COMMAND...
    local name=$1; shift
    if pid_alive "$name" >/dev/null; then
        [[ $(cat "$RUN_DIR/$name.hash" 2>/dev/null) == "$conf_hash" ]] && return 0
        log "$name runs with another configuration; restarting it"
        stop_pid "$name"
    fi
    log "starting $name"
    "$@" 9>&- </dev/null >>"$LOG_DIR/daemon-start.log" 2>&1 || die "$name failed to start"
    echo "$conf_hash" >"$RUN_DIR/$name.hash"
}
ensure slurmctld /usr/sbin/slurmctld -f "$CONF"
wait_for "trays slurmctld (scontrol ping -> UP)" ctld_up
for i in "${!NODES[@]}"; do
    n=${NODES[$i]}
    # net namespace by nsenter; then fresh UTS + mount namespaces: hostname and /etc/hosts.
    ensure "slurmd-$n" nsenter --net="/run/netns/axbtray$((i + 1))" -- \
        unshare --uts --mount --propagation private -- /bin/sh -c \
        'hostname "$1" && mount --bind "$2" /etc/hosts && exec /usr/sbin/slurmd -f "$3" -N "$1"' \
        sh "$n" "$CONF_DIR/hosts.$n" "$CONF"
done

deadline=$((SECONDS + TIMEOUT)); resumed=0
until nodes_usable; do
    if ((resumed == 0)) && ((SECONDS > deadline - TIMEOUT + 5)); then
        scontrol update NodeName="$(IFS=,; echo "${NODES[*]}")" State=RESUME >/dev/null 2>&1 || true
        resumed=1
    fi
    ((SECONDS < deadline)) || die "timed out waiting for ${NODES[*]} to be idle: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
    sleep 0.3
done
cat >"$ENV_FILE.tmp" <<EOF
# Written by scripts/slurm_trays.sh when the trays cluster was last verified up.
SLURM_CONF=$CONF
AXBGATE_TRAYS_PARTITION=$PARTITION
AXBGATE_TRAYS_NODES=$(IFS=,; echo "${NODES[*]}")
AXBGATE_TRAYS_IFNAME=$NODE_IF
AXBGATE_TRAYS_NETNS=$(printf 'axbtray%s,' $(seq 1 ${#NODES[@]}) | sed 's/,$//')
EOF
mv -f "$ENV_FILE.tmp" "$ENV_FILE"
log "trays cluster up: $(sinfo -h -N -p "$PARTITION" -o '%N=%T' | tr '\n' ' ')(SLURM_CONF=$CONF)"
