#!/usr/bin/env bash
# One complete A/X/B gate on 2 H200s through the `local` executor (issue 5's GPU gate):
# health gate (criteria h200-x2), then A X B of the bundled trainer at full LTX-2 width
# (recipe ltx2-bench-h200: d 4096, 4290 video / 1024 text tokens, 8 blocks, local batch 8),
# candidate parallel.modules_per_group=2 vs control 1. Run on the device machine from the
# repo root with the wheels of .whl/ (sqlalchemy, alembic, pydantic(-settings), submitit)
# installed to /tmp/site; writes the exported gate (JSON), status and logs to $OUT.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export AXBGATE_DATA_DIR=/tmp/axb PYTHONUNBUFFERED=1
python3 -m orchestrator.app.cli gate --title "H200x2 LTX-2 full width 8 blocks: modules_per_group 2 vs 1" \
  --recipe ltx2-bench-h200 --gpus-per-node 2 \
  --control-override parallel.modules_per_group=1 --candidate-override parallel.modules_per_group=2 \
  --warmup-steps 10 --measured-steps 20 --run-timeout-s 300 --criteria h200-x2 --json \
  > "$OUT/gate_h200x2.json"
G=/tmp/axb/gates/000001
cp $G/status.json $G/health.log "$OUT/"
(cd $G/runs && tar czf "$OUT/runs.tgz" .)
