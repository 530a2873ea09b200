#!/usr/bin/env bash
# README's first command: set up, then run a real A/X/B gate end to end on the embedded
# default (SQLite ledger + local executor): the CPU health gate (gloo, 2 ranks), then
# control A, candidate X (packed QKV projections), control B of the bundled FSDP2 LTX-2
# trainer's tiny recipe, then the verdict, stored in the ledger.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/axbgate gate \
  --title "tiny LTX-2: packed QKV vs split" \
  --recipe tiny \
  --candidate-override model.packed_qkv=true \
  --warmup-steps 3 --measured-steps 12 \
  "$@"
