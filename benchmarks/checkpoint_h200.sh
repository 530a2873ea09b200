#!/usr/bin/env bash
# The ltx2-bench-h200 recipe started from a Diffusers-layout checkpoint on one H200 (issue 27).
#   write: `python -m trainer write-checkpoint` writes a save_pretrained-compatible folder for the
#          recipe's model (d 4096, 8 blocks; audio and audio-video tensors included; float32,
#          5 GB shards + index + config.json, ~13.7 GB) holding the recipe's OWN init drawn on the
#          GPU, so a run loading it starts from bit-identical weights (no diffusers needed: the
#          names come from trainer/diffusers_layout.py, checked against Diffusers 0.42.1 in CI).
#   smoke: one run from the folder (fixed 2 + 5 steps), its host peak RSS and the load time.
#   gate:  an A/X/B gate, control = random init, candidate = checkpoint.load_safetensors=FOLDER,
#          sequential policy, steady warmup, 20 s windows, up to 8 runs: step time unchanged
#          within noise is a neutral/accept verdict; the semantic verdict should find the same
#          training (same weights, same data).
# Usage on the device machine, from the repo root, with .whl/ carried (as gate_cost_h200.sh):
#   bash benchmarks/checkpoint_h200.sh [write] [smoke] [gate]      (default: all three)
# Writes the gate's JSON export, status.json, run logs (tgz), the smoke log and SUMMARY.txt to $OUT;
# deletes the checkpoint folder at the end (KEEP=1 keeps it).
# CPU dry run from the venv (tiny recipe, no health gate, 2 s windows):
#   PY=.venv/bin/python RECIPE=tiny TOPO="--ntasks-per-node 1 --no-health" WINDOW_S=2 \
#   OUT=/tmp/ck-dry bash benchmarks/checkpoint_h200.sh
set -euo pipefail
parts=" ${*:-write smoke gate} "
PY=${PY:-python3}
OUT=${OUT:?set OUT to an output folder}
mkdir -p "$OUT"
RECIPE=${RECIPE:-ltx2-bench-h200}
CKPT=${CKPT:-/tmp/axbgate-ltx2-diffusers}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl 2>&1 | tail -1 || true
fi
export PYTHONPATH=/tmp/site:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export AXBGATE_DATA_DIR=${AXBGATE_DATA_DIR:-/tmp/axb} PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/axb-cache/inductor TRITON_CACHE_DIR=/tmp/axb-cache/triton
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit --format=csv 2>/dev/null || true
$PY -c 'import torch; print("torch", torch.__version__, "cuda devices", torch.cuda.device_count())'
df -h /tmp | tail -1
case "$parts" in *" write "*)
  rm -rf "$CKPT"
  $PY -m trainer write-checkpoint --recipe "$RECIPE" --out "$CKPT" --dtype float32 \
    --max-shard-gb "${SHARD_GB:-5}" | tee "$OUT/write.json"
  ls -l "$CKPT" | tee "$OUT/write_ls.txt" ;;
esac
case "$parts" in *" smoke "*)
  # One run from the folder; ru_maxrss of the child = its host peak RSS.
  $PY - "$RECIPE" "$CKPT" "$OUT/smoke.log" <<'PY'
import json, resource, subprocess, sys, time
recipe, ckpt, log = sys.argv[1:]
cmd = [sys.executable, "-m", "trainer", "train", "--recipe", recipe,
       f"checkpoint.load_safetensors={ckpt}", "measure.warmup_mode=fixed",
       "measure.warmup_steps=2", "measure.measured_steps=5", "measure.measured_seconds=none"]
t0 = time.time()
res = subprocess.run(cmd, capture_output=True, text=True)
open(log, "w").write(res.stdout + res.stderr)
recs = {}
for line in res.stdout.splitlines():
    if line.startswith("AXBGATE_"):
        k, body = line.split(" ", 1)
        recs[k] = json.loads(body)
tl, result = recs.get("AXBGATE_TIMELINE", {}), recs.get("AXBGATE_RESULT", {})
notes = [l for l in res.stderr.splitlines() if "skipped" in l or "loaded" in l]
print("smoke: exit", res.returncode, "status", result.get("status"), "median_step_s",
      result.get("median_step_s"), "wall_s", round(time.time() - t0, 1))
if tl:
    print("smoke: materialize -> weights ready (load) s",
          round(tl["weights_ready_unix"] - tl["model_materialized_unix"], 2))
print("smoke: host peak RSS GB", round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9, 3))
print("\n".join("smoke: " + n.split(": ", 1)[-1] for n in notes))
PY
  ;;
esac
case "$parts" in *" gate "*)
  t0=$(date +%s)
  $PY -m orchestrator.app.cli gate --title checkpoint-load --recipe "$RECIPE" \
    ${TOPO:---gpus-per-node 1 --criteria h200-x1} --run-timeout-s 400 --json \
    --warmup-mode steady --warmup-steps 2 --max-warmup-steps 20 \
    --measured-seconds "${WINDOW_S:-20}" --max-extend 3 \
    --candidate-override "checkpoint.load_safetensors=$CKPT" > "$OUT/gate.json" \
    || echo "gate exited $?"
  id=$($PY -c "import json,sys;print(json.load(open(sys.argv[1]))['id'])" "$OUT/gate.json")
  g=$AXBGATE_DATA_DIR/gates/$(printf %06d "$id")
  cp "$g/status.json" "$OUT/gate.status.json"
  (cd "$g/runs" && tar czf "$OUT/gate.runs.tgz" .)
  echo "gate id=$id wall=$(( $(date +%s) - t0 ))s"
  $PY - "$OUT/gate.json" <<'PY' | tee "$OUT/SUMMARY.txt"
import json, sys
g = json.load(open(sys.argv[1]))
print(f"gate {g['id']} {g['status']} pattern {g.get('run_pattern')}  candidate: "
      f"{g['candidate_spec'].get('recipe_overrides')}")
build = {r["order"]: r for r in g.get("overhead", {}).get("per_run", [])}
print(f"{'order':>5} {'role':>4} {'median_step_s':>13} {'model_build_s':>13} {'first_step_s':>12}")
for r in sorted(g["runs"], key=lambda r: r["order"]):
    o = build.get(r["order"], {})
    print(f"{r['order']:>5} {r['role']:>4} {r['median_step_s'] or float('nan'):>13.5f} "
          f"{o.get('model_build_s', float('nan')):>13.2f} {o.get('first_step_s', float('nan')):>12.2f}")
for v in g["verdicts"]:
    n = v["numbers"]
    ci = "" if n.get("ci_low_pct") is None else f" CI [{n['ci_low_pct']:+.3f}, {n['ci_high_pct']:+.3f}] %"
    print(f"verdict {v['policy']:<10} {'(primary)' if v['is_primary'] else '         '} "
          f"{v['verdict']:<12} candidate {n.get('delta_pct', float('nan')):+.3f} %{ci}")
for s in g.get("semantic_verdicts", []):
    print(f"semantic verdict {s['decision']}: {s['numbers'].get('reason')}")
PY
  ;;
esac
if [ -z "${KEEP:-}" ]; then rm -rf "$CKPT"; fi
