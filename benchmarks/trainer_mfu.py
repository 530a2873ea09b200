"""Trainer MFU on H200: compiled-block ceiling, then the FSDP2 trainer on 1 and 2 GPUs.

One invocation does every measurement of the issue-3 GPU benchmark:

1. ``ceiling``: one LTX-2 block at full width (same code as the trainer), bf16
   parameters, no FSDP, ``torch.compile``-d, forward + backward on one GPU,
   timed with CUDA events (median of 20 after warmup), for each SDPA backend.
   Its TFLOP/s (DESIGN.md section 2 FLOPs of one block) is the ceiling the
   trainer is compared with. A plain 8192^3 bf16 matmul rate is printed too.
2. ``torchrun --nproc_per_node 1`` and ``2`` of ``python -m trainer train --recipe
   ltx2-bench-h200`` with the recipe's attention backend (cuDNN), parsing ``AXBGATE_RESULT``; each
   run also profiles 2 extra steps and writes the torch.profiler table.

Logs go to ``--out`` (``$OUT`` on the device machine); the table is printed last.

Usage: ``python3 benchmarks/trainer_mfu.py --out DIR [--recipe NAME]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK = 989e12  # H200 SXM dense BF16, FLOP/s (trainer.metrics table)


def ceiling(recipe_name: str, backends: list[str]) -> dict:
    """Time the compiled block fwd+bwd for each backend; returns TFLOP/s per backend."""
    import torch

    from trainer.checkpoint import init_weights
    from trainer.config import load_recipe
    from trainer.flops import flops_per_sample
    from trainer.model import LTX2Block, rope_cos_sin

    out = {}
    dev = torch.device("cuda", 0)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        a @ b
    e.record()
    torch.cuda.synchronize()
    out["matmul_8192_tflops"] = 2 * 8192**3 * 20 / (s.elapsed_time(e) / 1e3) / 1e12
    del a, b
    for backend in backends:
        recipe = load_recipe(recipe_name, [f"model.attention_backend=\"{backend}\""])
        m, dcfg = recipe.model, recipe.data
        bsz = recipe.train.local_batch_size
        flops = flops_per_sample(recipe) // m.num_layers * bsz
        try:
            # Dynamo does not guard on the SDPA backend flags, and the on-disk
            # FX-graph / AOTAutograd caches do not key on them either: without a
            # reset and with caches on, the second backend silently reuses the
            # first backend's compiled graph (seen on 2026-11-30: compile 0.4 s).
            torch._dynamo.reset()
            torch._inductor.config.fx_graph_cache = False
            if hasattr(torch._functorch.config, "enable_autograd_cache"):
                torch._functorch.config.enable_autograd_cache = False
            torch.manual_seed(0)
            block = LTX2Block(m).to(dev)
            init_weights(block, 0.02, 0)
            block = block.to(torch.bfloat16)
            cblock = torch.compile(block, fullgraph=True)
            d, n, t = m.hidden_dim, dcfg.num_video_tokens, dcfg.num_text_tokens
            x = torch.randn(bsz, n, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
            text = torch.randn(bsz, t, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
            temb = (0.1 * torch.randn(bsz, 1, 6 * d, device=dev, dtype=torch.bfloat16)).requires_grad_()
            cos, sin = (v.to(torch.bfloat16) for v in rope_cos_sin(m, dcfg, dev))
            gy = torch.randn(bsz, n, d, device=dev, dtype=torch.bfloat16)
            compile_s, times = _time_block(block, cblock, backend, (x, text, temb, cos, sin), gy)
            med = statistics.median(times)
            out[backend] = {"median_s": med, "tflops": flops / med / 1e12,
                            "mfu_pct": flops / med / PEAK * 100, "compile_s": compile_s,
                            "batch": bsz, "block_flops": flops}
            del block, cblock, x, text, temb, gy
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - a failing backend is reported, not fatal
            out[backend] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    return out


def _time_block(block, cblock, backend: str, inputs: tuple, gy) -> tuple[float, list[float]]:
    """Compile (first call), warm up 5, then time 20 fwd+bwd with CUDA events.

    Returns:
        ``(first-call seconds incl. compile, list of 20 step seconds)``.
    """
    import torch

    from trainer.model import sdpa_context

    def step():
        with sdpa_context(backend):
            y = cblock(*inputs)
        y.backward(gy)
        for p in block.parameters():
            p.grad = None
        for t in inputs:
            t.grad = None

    t0 = time.time()
    step()
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    for _ in range(5):
        step()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return compile_s, times


def _run(cmd: list[str], log: Path, timeout: int) -> tuple[int, str]:
    t0 = time.time()
    try:
        env = {**os.environ, "TORCH_LOGS": os.environ.get("TORCH_LOGS", "recompiles")}
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                             env=env, check=False)
        text, code = res.stdout + "\n--- stderr ---\n" + res.stderr, res.returncode
    except subprocess.TimeoutExpired as exc:
        text = f"TIMEOUT after {timeout}s\n{exc.stdout or ''}\n--- stderr ---\n{exc.stderr or ''}"
        code = 124
    log.write_text(f"$ {' '.join(cmd)}\n# wall {time.time() - t0:.1f}s rc={code}\n{text}")
    return code, text


def _result(text: str) -> dict:
    for line in text.splitlines():
        if "AXBGATE_RESULT " in line:
            return json.loads(line.split("AXBGATE_RESULT ", 1)[1])
    return {}


def main() -> int:
    """Run every phase and print the table."""
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--recipe", default="ltx2-bench-h200")
    p.add_argument("--phase", default="all", choices=["all", "ceiling"])
    p.add_argument("--backends", default="cudnn,flash", help="ceiling SDPA backends")
    p.add_argument("--backend", default=None,
                   help="trainer SDPA backend (default: the recipe's)")
    p.add_argument("--extra", default="", help="space-separated trainer overrides")
    p.add_argument("--variant", action="append", default=[],
                   help="extra 2-GPU run: space-separated overrides (repeatable)")
    p.add_argument("--timeout", type=int, default=170, help="seconds per phase")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.phase == "ceiling":
        print(json.dumps(ceiling(args.recipe, args.backends.split(","))))
        return 0
    code, text = _run([sys.executable, __file__, "--phase", "ceiling", "--out", str(out),
                       "--recipe", args.recipe, "--backends", args.backends],
                      out / "ceiling.log", args.timeout)
    ceil = json.loads(text.splitlines()[0]) if code == 0 else {}
    ok = {k: v for k, v in ceil.items() if isinstance(v, dict) and "tflops" in v}
    from trainer.config import load_recipe

    best = args.backend or load_recipe(args.recipe).model.attention_backend
    rows = []
    runs = [(1, "", ""), (2, "", "")] + [(2, v, f"_v{i}") for i, v in enumerate(args.variant)]
    for n, variant, tag in runs:
        cmd = ["torchrun", "--standalone", f"--nproc_per_node={n}", "-m", "trainer", "train",
               "--recipe", args.recipe, f"model.attention_backend=\"{best}\"",
               f"measure.profile_dir=\"{out}/prof{n}{tag}\"", *args.extra.split(),
               *variant.split()]
        code, text = _run(cmd, out / f"train_{n}gpu{tag}.log", args.timeout)
        rows.append((f"{n} GPU {variant}".strip(), code, _result(text)))
    print("== ceiling (compiled block, bf16 params, no FSDP, 1 GPU) ==")
    print(json.dumps(ceil, indent=1))
    for n in (1, 2):
        prof = out / f"prof{n}" / "profile_rank0.txt"
        if prof.exists() and n == 2:
            print(f"== profile, {n} GPU(s), rank 0, 2 steps (top rows) ==")
            print("\n".join(prof.read_text().splitlines()[:34]))
    ceil_tf = ok[best]["tflops"] if best in ok else float("nan")
    print(f"== table (backend {best}; peak {PEAK / 1e12:.0f} TFLOP/s dense BF16) ==")
    print(f"{'config':<28}{'median_s':>10}{'MFU%':>8}{'TFLOP/s/GPU':>13}{'x ceiling':>11}"
          f"{'peak_alloc_GiB':>16}")
    for name, r in ok.items():
        print(f"{'ceiling block ' + name:<28}{r['median_s']:>10.4f}{r['mfu_pct']:>8.2f}"
              f"{r['tflops']:>13.1f}{r['tflops'] / ceil_tf:>11.3f}{'-':>16}")
    for n, code, r in rows:
        if not r or r.get("status") != "ok" or r.get("mfu_pct") is None:
            print(f"{f'trainer {n}':<28} FAILED rc={code} {r.get('error', '')[:200]}")
            continue
        tf = r["mfu_pct"] / 100 * PEAK / 1e12
        print(f"{f'trainer {n}':<28}{r['median_step_s']:>10.4f}{r['mfu_pct']:>8.2f}"
              f"{tf:>13.1f}{tf / ceil_tf:>11.3f}{r['peak_allocated_bytes'] / 2**30:>16.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
