#!/usr/bin/env bash
# Gates of a real Hugging Face Trainer job on 1xH200 through axbgate_record.hf.AxbgateCallback
# (issue 26): GPT-2 small built from a config (benchmarks/hf_gate_job.py, no download), bf16,
# local batch 8 x 1024 tokens, the default sequential policy, a steady warmup and a short
# time window read by the callback from the AXBGATE_* variables the driver sets.
#   ckpt: candidate turns on gradient checkpointing (a real slowdown) -> expected reject
#   aa:   A/A, both sides the same -> expected neutral
#   sdpa: control eager attention, candidate SDPA (a real speed-up) -> expected accept
# Usage on the device machine, from the repo root, with .whl/ carried:
#   bash benchmarks/integration_h200.sh [ckpt aa sdpa | all]     (default: ckpt aa)
# Writes each gate's JSON, status.json and run logs (tgz) to $OUT and prints a table.
# CPU dry run from the venv (tiny model, 1 s window, no health gate):
#   PY=.venv/bin/python HF_MODEL=tiny TOPO="--ntasks-per-node 1 --no-health" WINDOW_S=1 \
#   OUT=/tmp/o bash benchmarks/integration_h200.sh ckpt
set -euo pipefail
parts=" ${*:-ckpt aa} "
PY=${PY:-python3}
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl 2>&1 | tail -1 || true
fi
export PYTHONPATH=/tmp/site:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export AXBGATE_DATA_DIR=${AXBGATE_DATA_DIR:-/tmp/axb-hf} PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
MODEL=${HF_MODEL:-gpt2-small}
PYEXE=$($PY -c "import sys; print(sys.executable)")  # the runs start it by absolute path
job=$(printf '["%s", "%s/benchmarks/hf_gate_job.py"]' "$PYEXE" "$PWD")
common=(--command "$job" ${TOPO:---gpus-per-node 1 --criteria h200-x1} --run-timeout-s 300 --json
        --warmup-mode steady --warmup-steps 3 --max-warmup-steps 30 --measured-steps 10
        --measured-seconds "${WINDOW_S:-5}" --control-env "HF_MODEL=$MODEL" --candidate-env "HF_MODEL=$MODEL"
        --control-env "HF_OUT_DIR=/tmp/hf-gate-out" --candidate-env "HF_OUT_DIR=/tmp/hf-gate-out")
gate() {  # NAME ARGS...
  local name=$1; shift
  local t0=$(date +%s)
  $PY -m orchestrator.app.cli gate --title "hf $name" "${common[@]}" "$@" > "$OUT/$name.json" \
    || echo "gate $name exited $?"
  local id=$($PY -c "import json;print(json.load(open('$OUT/$name.json'))['id'])")
  local g=$AXBGATE_DATA_DIR/gates/$(printf %06d "$id")
  cp "$g/status.json" "$OUT/$name.status.json"
  (cd "$g/runs" && tar czf "$OUT/$name.runs.tgz" .)
  echo "gate $name id=$id wall=$(( $(date +%s) - t0 ))s"
}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit --format=csv || true
$PY -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.cuda.device_count(), "transformers", transformers.__version__)'
case "$parts" in *" ckpt "*|*" all "*) gate ckpt --candidate-env HF_GRAD_CKPT=1 ;; esac
case "$parts" in *" aa "*|*" all "*) gate aa ;; esac
case "$parts" in *" sdpa "*|*" all "*) gate sdpa --control-env HF_ATTN=eager --candidate-env HF_ATTN=sdpa ;; esac
$PY - <<'PY'
import glob, json, os
out = os.environ["OUT"]
print(f"\n{'gate':<6} {'status':<10} {'runs':>4} {'primary':<13} {'drift':<12} {'delta %':>8} "
      f"{'interval %':>18} {'A med ms':>9} {'X med ms':>9} {'GPU-s':>7}")
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    if path.endswith(".status.json"):
        continue
    g = json.load(open(path))
    name = os.path.basename(path)[:-5]
    verdicts = {v["policy"]: v for v in g.get("verdicts", [])}
    primary = next((v for v in g.get("verdicts", []) if v.get("is_primary")), {})
    num = primary.get("numbers", {})
    lo, hi = num.get("ci_low_pct"), num.get("ci_high_pct")
    ci = f"[{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else "-"
    meds = {r["role"]: r["median_step_s"] for r in g.get("runs", []) if r.get("median_step_s")}
    over = g.get("overhead") or {}
    gpu_s = over.get("accelerator_s") or over.get("rank_s")
    delta = num.get("delta_pct")
    print(f"{name:<6} {g['status']:<10} {len(g.get('runs', [])):>4} {primary.get('verdict', '-'):<13} "
          f"{verdicts.get('drift', {}).get('verdict', '-'):<12} "
          f"{(f'{delta:+.2f}' if delta is not None else '-'):>8} {ci:>18} "
          f"{meds.get('A', 0) * 1e3:>9.2f} {meds.get('X', 0) * 1e3:>9.2f} "
          f"{(f'{gpu_s:.0f}' if gpu_s else '-'):>7}")
    if g["status"] != "succeeded":
        print("   reason:", g.get("status_reason"))
PY
