#!/usr/bin/env bash
# Start what the integration tests need; idempotent. Needs root on a Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# PostgreSQL (trust auth on 127.0.0.1:5432).
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  for _ in $(seq 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
# iproute2 for the network-namespace tests of the launch preamble.
if ! command -v ip >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2
fi
# Debian Chromium for the browser test of the web ledger.
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
fi
# A real single-node Slurm cluster with accounting (slurmdbd + MariaDB).
if [ -x scripts/slurm_up.sh ] || [ -f scripts/slurm_up.sh ]; then
  bash scripts/slurm_up.sh
fi
# The two-node "trays" cluster (network namespaces; SLURM_CONF=/etc/slurm-trays/slurm.conf).
if [ -f scripts/slurm_trays.sh ]; then
  bash scripts/slurm_trays.sh
fi
