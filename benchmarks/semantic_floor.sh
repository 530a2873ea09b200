#!/usr/bin/env bash
# Issue 19 on 2 GPUs: the semantic floor of the full-width recipe. Runs the bundled trainer's
# ltx2-bench-h200 recipe (d 4096, 4290 video / 1024 text tokens, 8 blocks, bf16 compute, fp32
# masters, regional compile) as A and B (same configuration), then two candidates: split
# (unpacked) QKV projections (same math) and one block dropped (7 blocks). Order A B X X, so the
# floor is printed even if the lease ends before the candidates. Prints the
# A-vs-B loss and grad-norm spread per step (the floor the semantic gate judges a candidate
# against), the probe digests, and each candidate's largest deviation next to the floor.
# Run on the device machine from the repo root, pydantic wheels in .whl/ (the trainer's recipe
# schema); only torch + the trainer run there, not the orchestrator.
#   usage: bash benchmarks/semantic_floor.sh [WARMUP MEASURED]   (RECIPE=tiny for a CPU dry run)
set -uo pipefail
WARMUP=${1:-5}; MEASURED=${2:-15}; RECIPE=${RECIPE:-ltx2-bench-h200}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
W=${OUT:-/tmp}/semantic_floor; mkdir -p "$W"
NPROC=$(python3 -c "import torch; print(max(1, torch.cuda.device_count()))")
run() {  # name, overrides...
  local name=$1; shift
  local t0=$SECONDS
  python3 -m torch.distributed.run --nproc_per_node="$NPROC" -m trainer train --recipe "$RECIPE" \
    measure.warmup_steps="$WARMUP" measure.measured_steps="$MEASURED" "$@" > "$W/$name.log" 2> "$W/$name.err"
  echo "run $name rc=$? $((SECONDS - t0)) s"
}
cat > "$W/table.py" <<'PY'
import glob, json, os, sys
w = sys.argv[1]
def sem(name):
    for line in open(os.path.join(w, name + ".log")):
        for prefix in ("AXBGATE_SEMANTICS ", "AXBGATE_RESULT "):
            if line.startswith(prefix):
                yield prefix.strip(), json.loads(line[len(prefix):])
runs = {os.path.basename(p)[:-4]: dict(sem(os.path.basename(p)[:-4])) for p in sorted(glob.glob(w + "/*.log"))}
print("=" * 20, "runs so far:", ", ".join(runs))
a, b = runs["0-A"].get("AXBGATE_SEMANTICS"), runs["3-B"].get("AXBGATE_SEMANTICS")
for name, r in runs.items():
    res = r.get("AXBGATE_RESULT", {})
    print(f"{name}: status {res.get('status')} median {res.get('median_step_s')} s, MFU {res.get('mfu_pct')} %"
          + (f", error {res.get('error')}" if res.get("error") else ""))
if not (a and b):
    sys.exit("A or B printed no AXBGATE_SEMANTICS")
rel = lambda x, y: 0.0 if x == y else abs(x - y) / abs((x + y) / 2)
print(f"\nA vs B per step (global batch {a['global_batch_size']}, {a['tokens_per_step']} tokens/step,"
      f" precision {a['precision']}):")
print("| step | loss A | loss B | rel diff | grad norm A | grad norm B | rel diff |")
for i, (la, lb, ga, gb) in enumerate(zip(a["loss"], b["loss"], a["grad_norm"], b["grad_norm"])):
    print(f"| {a['series_first_step'] + i} | {la:.9g} | {lb:.9g} | {rel(la, lb):.3e} | {ga:.9g} | {gb:.9g} | {rel(ga, gb):.3e} |")
floor = {q: max(rel(x, y) for x, y in zip(a[q], b[q])) for q in ("loss", "grad_norm")}
bitwise = a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"]
pa, pb = (a.get("probe") or {}).get("tensors", {}), (b.get("probe") or {}).get("tensors", {})
same = sorted(k for k in pa if pa[k].get("sha256") == pb.get(k, {}).get("sha256"))
print(f"\nfloor (max over {len(a['loss'])} steps of |A-B|/mean): loss {floor['loss']:.3e}, grad norm "
      f"{floor['grad_norm']:.3e}; series bitwise equal: {bitwise}; probe at step "
      f"{(a.get('probe') or {}).get('step')}: {len(same)} of {len(pa)} tensors bitwise equal")
print("dtype coverage A: params", a["dtypes"]["param_dtypes"], "fp32 coverage", a["dtypes"]["fp32_coverage"])
# the semantic gate's tolerance: max(3 x floor, allowance of the compute dtype) (SemanticPolicy)
allow = {"float32": 1e-4, "bfloat16": 4e-3}.get(a["precision"].get("param_dtype"), 1e-3)
tol = {q: max(3 * floor[q], allow) for q in floor}
print(f"tolerance max(3 x floor, {allow:g}): loss {tol['loss']:.3e}, grad norm {tol['grad_norm']:.3e}")
print("\n| candidate | max loss dev (rel to A/B mean) | first step over tolerance | max grad-norm dev | first step over tolerance |")
for name in ("1-X-split-qkv", "2-X-drop-block"):
    x = runs.get(name, {}).get("AXBGATE_SEMANTICS")
    if not x:
        print(f"| {name} | no semantics record ||||"); continue
    cells = []
    for q in ("loss", "grad_norm"):
        devs = [abs(v - (p + r) / 2) / abs((p + r) / 2) for v, p, r in zip(x[q], a[q], b[q])]
        over = next((a["series_first_step"] + i for i, d in enumerate(devs) if d > tol[q]), None)
        cells += [f"{max(devs):.3e}", "-" if over is None else str(over)]
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
# A and B first, so the floor is printed even if the candidates do not finish in the lease.
run 0-A
run 3-B
python3 "$W/table.py" "$W"
run 1-X-split-qkv model.packed_qkv=false
run 2-X-drop-block model.num_layers=$(($(python3 -c "from trainer import load_recipe; print(load_recipe('$RECIPE').model.num_layers)") - 1))
python3 "$W/table.py" "$W"
