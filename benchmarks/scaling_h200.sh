#!/usr/bin/env bash
# Issue 8's measurements in their 2-GPU versions (the 4/8-GPU kinds were not lent):
# health-gate busbw at 1 Mi and 16 Mi bf16 elements (128 Mi is in health_h200_*.txt), and
# the trainer at full LTX-2 width on 2 H200s: local batch 1, 2, 8; modules_per_group 2;
# BF16 vs FP32 reduce. Run on the device machine from the repo root (wheels in .whl/).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
W=/tmp/scaling; mkdir -p $W
for tag in 1mi 16mi; do
  python3 -m health --json --criteria benchmarks/criteria/h200-x2-$tag.toml > $W/health_$tag.log 2>&1
  echo "health $tag rc=$?"
done
run() {  # name, overrides...
  local name=$1; shift
  python3 -m torch.distributed.run --nproc_per_node=2 -m trainer train --recipe ltx2-bench-h200 \
    measure.warmup_steps=5 measure.measured_steps=15 "$@" > $W/train_$name.log 2>&1
  echo "train $name rc=$?"
}
run b8 train.local_batch_size=8
run b1 train.local_batch_size=1
run b2 train.local_batch_size=2
run b8_mpg2 train.local_batch_size=8 parallel.modules_per_group=2
run b8_bf16reduce train.local_batch_size=8 parallel.reduce_dtype=bfloat16
python3 - "$W" <<'PY'
import glob, json, os, sys
w = sys.argv[1]
print("| health size | op | slowest-rank busbw GB/s | p50 ms |")
for tag in ("1mi", "16mi"):
    for line in open(f"{w}/health_{tag}.log"):
        if line.startswith("AXBGATE_HEALTH") and '"busbw_' in line:
            r = json.loads(line.split(" ", 1)[1]); m = r["measured"]
            print(f"| {tag} | {r['check'][6:]} | {m.get('slowest_rank_bus_gbps')} | {m.get('p50_ms')} |")
print("| trainer (2x H200, 5+15 steps) | median s | MFU % | samples/s | peak alloc GiB |")
for path in sorted(glob.glob(f"{w}/train_*.log")):
    res = [json.loads(l.split("AXBGATE_RESULT ", 1)[1]) for l in open(path) if "AXBGATE_RESULT " in l]
    name = os.path.basename(path)[6:-4]
    if not res or res[-1].get("status") != "ok":
        print(f"| {name} | failed: {res[-1].get('error') if res else 'no result'} |||"); continue
    r = res[-1]
    print(f"| {name} | {r['median_step_s']:.4f} | {r['mfu_pct']:.2f} | {r['samples_per_s']:.2f} | {r['peak_allocated_bytes']/2**30:.1f} |")
PY
tar czf "$OUT/scaling_logs.tgz" -C $W .
