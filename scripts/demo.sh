#!/usr/bin/env bash
# README's first command: set up, then run a real A/X/B gate end to end on the embedded
# default (SQLite ledger + local executor): the CPU health gate, then control A, candidate
# X, control B of the bundled FSDP2 LTX-2 trainer's cpu-demo recipe, then the verdict,
# stored in the ledger.
#
# Sized for a 2-core machine: ONE rank with one intra-op thread (OMP_NUM_THREADS=1), so
# the other core is free for the driver and the ranks never fight over cores; the
# controls run with full activation checkpointing and the candidate without it, a real
# change of about a quarter of the step time (AC recomputes every block's forward in the
# backward pass), so the gate has something to decide.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${AXBGATE_DEMO_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
exec .venv/bin/axbgate gate \
  --title "cpu-demo LTX-2: activation checkpointing off vs on" \
  --recipe cpu-demo \
  --ntasks-per-node 1 \
  --control-env OMP_NUM_THREADS=1 --candidate-env OMP_NUM_THREADS=1 \
  --control-override parallel.activation_checkpointing=full \
  --candidate-override parallel.activation_checkpointing=none \
  "$@"
# Warmup and window come from the recipe's [measure] (3 steps, then a 3 s window).
