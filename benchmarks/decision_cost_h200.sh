#!/usr/bin/env bash
# Issue 23 on 1xH200: gates at the defaults (sequential v3, the cost model's window, the
# recipe's steady warmup over 3 steps) for an A/A pair, a calibrated 1% delay and the real
# change train.fused_adamw=off, each with its verdict, runs, GPU-seconds and the timeline of
# where the allocation's time went; and where a run's fixed cost + warmup go
# (benchmarks/startup_profile.py). Run on 2026-12-02 (benchmarks/gpu_batch_h200.sh), output in
# benchmarks/results/decision_cost_h200x1_2026-12-02/
# Usage on the device machine, repo root, .whl/ carried (see gate_cost_h200.sh):
#   bash benchmarks/decision_cost_h200.sh PART...   PART = delaycheck | profile | aa | slow1pct | adamw | all
# (PROFILE_ONLY=cold,warm-cprofile limits the startup_profile variants)
# One call fits two parts within the 600 s limit; the compile cache is shared across parts of
# a call (/tmp/axb-cache), so the first run of a call pays the cold compile. CPU dry run:
#   PY=.venv/bin/python RECIPE=cpu-demo TOPO="--ntasks-per-node 1 --no-health" \
#   EXTRA="--auto-window --max-window-seconds 2" OUT=/tmp/o bash benchmarks/decision_cost_h200.sh aa
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
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
common=(--recipe "${RECIPE:-ltx2-bench-h200}" ${TOPO:---gpus-per-node 1 --criteria h200-x1} --run-timeout-s 400 --json)
gate() {  # NAME ARGS...
  local name=$1; shift
  local t0=$(date +%s)
  $PY -m orchestrator.app.cli gate --title "$name" "${common[@]}" ${EXTRA:-} "$@" > "$OUT/$name.json" \
    || echo "gate $name exited $?"
  local id=$($PY -c "import json;print(json.load(open('$OUT/$name.json'))['id'])")
  local g=/tmp/axb/gates/$(printf %06d "$id")
  cp "$g/status.json" "$OUT/$name.status.json"
  (cd "$g/runs" && tar czf "$OUT/$name.runs.tgz" ./*.log ./*.json)
  echo "gate $name id=$id wall=$(( $(date +%s) - t0 ))s"
}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit --format=csv || true
case "$parts" in *" delaycheck "*)  # is measure.delay_fraction=0.01 a 1% slowdown? (warms the cache)
  timeout 200 $PY benchmarks/delay_check.py --recipe "${RECIPE:-ltx2-bench-h200}" --fraction 0.01 \
    --pairs 2 --warmup 3 --steps 10 2>&1 | tee "$OUT/delay_check.txt" || echo "delay_check failed" ;;
esac
case "$parts" in *" aa "*|*" all "*) gate aa-v3 ;; esac
case "$parts" in *" slow1pct "*|*" all "*)
  gate slow1pct-v3 --candidate-override measure.delay_fraction=0.01 ;;
esac
case "$parts" in *" adamw "*|*" all "*)
  gate fused-adamw-off-v3 --candidate-override train.fused_adamw=off ;;
esac
case "$parts" in *" profile "*|*" all "*)
  $PY benchmarks/startup_profile.py --recipe "${RECIPE:-ltx2-bench-h200}" --steps 8 ${PROFILE_ONLY:+--only "$PROFILE_ONLY"} \
    --out "$OUT/startup_profile.json" 2>&1 | tee "$OUT/startup_profile.txt" || echo "startup_profile failed" ;;
esac
$PY - <<'PY'
import glob, json, os
out = os.environ.get("OUT", "/tmp/out")
print(f"{'gate':22s} {'verdict':12s} {'runs':>4s} {'pattern':16s} {'window':>6s} {'alloc s':>8s} "
      f"{'GPU-s':>7s} {'health':>6s} {'fixed+warm/run':>14s}")
for path in sorted(glob.glob(os.path.join(out, "*-v3.json"))):
    g = json.load(open(path))
    s = json.load(open(path.replace(".json", ".status.json")))
    primary = next((v for v in g.get("verdicts", []) if v.get("is_primary")), {})
    o = g.get("overhead") or {}
    runs = [t for t in s.get("timeline", []) if t.get("phase") == "run"]
    per = [(t.get("wall_s") or 0) - (t.get("measured_s") or 0) for t in runs[1:]]
    win = (s.get("window") or {}).get("measured_steps")
    print(f"{os.path.basename(path)[:-5]:22s} {primary.get('verdict', '?'):12s} {len(runs):4d} "
          f"{''.join(t['role'] for t in runs):16s} {str(win):>6s} "
          f"{o.get('allocation_wall_s') or 0:8.1f} {o.get('accelerator_s') or 0:7.1f} "
          f"{o.get('health_s') or 0:6.1f} {sum(per) / max(len(per), 1):14.2f}")
    print("   ", primary.get("numbers", {}).get("reason", "")[:300])
PY
