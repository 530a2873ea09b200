#!/usr/bin/env bash
# Gate cost and verdict validation on 2 H200s (issues 12, 14, 19), through the `local`
# executor at full LTX-2 width (recipe ltx2-bench-h200: d 4096, 4290 video / 1024 text
# tokens, 8 blocks, local batch 8), compile cache shared across gates (warm after the first).
# Usage on the device machine, from the repo root, with .whl/ carried:
#   bash benchmarks/gate_cost_h200.sh PART...   (PART = campaign | aa | slow1pct | all | fixed | default)
# Writes each gate's JSON export, status.json and run logs (tgz) to $OUT.
# On one GPU: TOPO="--gpus-per-node 1 --criteria h200-x1". CPU dry run from the venv:
#   PY=.venv/bin/python RECIPE=tiny TOPO="--ntasks-per-node 1 --no-health" WINDOW_S=2 OUT=/tmp/o \
#   bash benchmarks/gate_cost_h200.sh fixed
set -euo pipefail
parts=" ${*:-all} "
PY=${PY:-python3}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl 2>&1 | tail -1 || true
fi
export PYTHONPATH=/tmp/site:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export AXBGATE_DATA_DIR=/tmp/axb PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/axb-cache/inductor TRITON_CACHE_DIR=/tmp/axb-cache/triton
# RECIPE/TOPO/WINDOW_S let the same script be tried on CPU first (RECIPE=tiny TOPO="--ntasks-per-node 1 --no-health" WINDOW_S=2).
common=(--recipe "${RECIPE:-ltx2-bench-h200}" ${TOPO:---gpus-per-node 2 --criteria h200-x2} --run-timeout-s 400 --json)
new=(--warmup-mode steady --warmup-steps 2 --max-warmup-steps 20 --measured-seconds "${WINDOW_S:-40}" --max-extend 3)
gate() {  # NAME ARGS...
  local name=$1; shift
  local t0=$(date +%s)
  $PY -m orchestrator.app.cli gate --title "$name" "${common[@]}" "$@" > "$OUT/$name.json" \
    || echo "gate $name exited $?"
  local id=$($PY -c "import json;print(json.load(open('$OUT/$name.json'))['id'])")
  local g=/tmp/axb/gates/$(printf %06d "$id")
  cp "$g/status.json" "$OUT/$name.status.json"
  (cd "$g/runs" && tar czf "$OUT/$name.runs.tgz" .)
  echo "gate $name id=$id wall=$(( $(date +%s) - t0 ))s"
}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit --format=csv || true
$PY -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count())'
case "$parts" in *" campaign "*|*" all "*)
  # The campaign's way: torchrun per run, fixed 10 + 20 steps, drift rule; candidate 1% slower.
  gate campaign-fixed-1pct --warmup-mode fixed --warmup-steps 10 --measured-steps 20 --no-fork-server --policy drift \
    --candidate-override measure.delay_fraction=0.01 ;;
esac
case "$parts" in *" aa "*|*" all "*)
  gate aa-default "${new[@]}" ;;
esac
case "$parts" in *" slow1pct "*|*" all "*)
  gate slow1pct-default "${new[@]}" --candidate-override measure.delay_fraction=0.01 ;;
esac
case "$parts" in *" default "*)
  # The recipe's own measurement defaults (no warmup or window flag: steady warmup, 60 s window
  # for ltx2-bench-h200), candidate slowed by a calibrated 1 %, one A X B under drift.
  gate default-1pct --policy drift --max-extend 0 --candidate-override measure.delay_fraction=0.01 ;;
esac
case "$parts" in *" fixed "*)
  # Per-run fixed cost and the share of the allocation not measuring at a 60 s window:
  # A X B under drift (no extension), steady warmup, fork server with pre-imports.
  gate fixed-window60 --warmup-mode steady --warmup-steps 2 --max-warmup-steps 20 \
    --measured-seconds "${FIXED_WINDOW_S:-60}" --policy drift --max-extend 0 ;;
esac
$PY - <<'PY'
import json, os, glob
for path in sorted(glob.glob(os.path.join(os.environ["OUT"], "*.status.json"))):
    s = json.load(open(path))
    runs = [t for t in s.get("timeline", []) if t.get("phase") == "run"]
    keys = ("fixed_s", "startup_s", "teardown_s", "launcher_s", "imports_s", "process_group_s",
            "model_build_s", "first_step_s", "warmup_s", "measured_s", "wall_s")
    print(os.path.basename(path), s.get("state"), s.get("roles"))
    for t in runs:
        print("  run", t["order"], t["role"], " ".join(f"{k}={t[k]:.2f}" for k in keys if k in t))
PY
