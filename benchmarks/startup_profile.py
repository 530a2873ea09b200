"""Where a bundled-trainer run's fixed cost and warmup go (issue 23, "cheaper runs").

Each variant is ONE fresh process that imports torch and the trainer, builds the recipe's
FSDP2 model and runs ``--steps`` optimizer steps, timing every phase with a device
synchronisation at its end: imports, process group, model build (meta init, shard,
materialise, init weights, optimizer), the first step split into forward / backward /
clip + optimizer, every later step, and the process teardown (measured by the parent from
the child's last timestamp to its exit). The compile caches are a folder per variant group:
``cold`` fills it, ``warm`` runs on it, ``megacache-load`` starts from an EMPTY folder and
loads the ``torch.compiler.save_cache_artifacts()`` bundle the ``cold`` process wrote
("compile artifacts loaded once per allocation"), ``precompile-*`` set
``torch._dynamo.config.caching_precompile`` (guard-serialised Dynamo output, when the torch
build has it), ``warm-threads1`` is ``warm`` with ``TORCHINDUCTOR_COMPILE_THREADS=1`` (no
compile worker pool), ``nocompile`` runs the recipe with ``parallel.compile=false``, ``warm-cprofile`` is ``warm``
with the first step under cProfile (the 60 costliest calls by cumulative time, in the JSON).

Usage (repo root, GPU machine)::

    python3 benchmarks/startup_profile.py --recipe ltx2-bench-h200 --out /tmp/sp.json
    python3 benchmarks/startup_profile.py --recipe tiny --steps 4   # CPU dry run

Prints one table row per variant and writes every process's JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_T0 = time.time()


def _worker(args: argparse.Namespace) -> None:
    marks: dict[str, float] = {"start": float(os.environ.get("SP_LAUNCH", _T0)), "main": _T0}
    import torch

    marks["import_torch"] = time.time()
    import torch._dynamo.config as dcfg

    if args.precompile:
        if not hasattr(dcfg, "caching_precompile"):
            print(json.dumps({"variant": args.variant, "error": "no caching_precompile"}))
            return
        dcfg.caching_precompile = True
    if args.megacache_load:
        with open(args.megacache_load, "rb") as fh:
            torch.compiler.load_cache_artifacts(fh.read())
        marks["megacache_loaded"] = time.time()
    import torch.distributed as dist

    from trainer.config import load_recipe
    from trainer.data import RepeatedBatches
    from trainer.model import flow_matching_loss
    from trainer.train import build, init_distributed

    marks["import_trainer"] = time.time()
    recipe = load_recipe(args.recipe, args.overrides)
    d = init_distributed(recipe)
    marks["process_group"] = time.time()
    sub: dict[str, float] = {}
    model, optimizer = build(recipe, d, sub)
    cuda = d.device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(d.device)

    sync()
    marks.update({f"build_{k}": v for k, v in sub.items()})
    marks["model_built"] = time.time()
    batches = iter(RepeatedBatches(recipe, d.rank, d.device))
    micro = next(batches)
    sync()
    marks["batches"] = time.time()
    steps: list[dict[str, float]] = []
    profiler = None
    for i in range(args.steps):
        if i == 0 and args.cprofile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        t_a = time.perf_counter()
        loss = flow_matching_loss(model, micro[0])
        sync()
        t_b = time.perf_counter()
        loss.backward()
        sync()
        t_c = time.perf_counter()
        params = [p for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm([p.grad for p in params], 2.0, foreach=True)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        torch.nn.utils.clip_grads_with_norm_(params, 1.0, norm, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _ = float(loss.item()), float(norm.item())
        sync()
        t_d = time.perf_counter()
        steps.append({"fwd_s": t_b - t_a, "bwd_s": t_c - t_b, "opt_s": t_d - t_c,
                      "step_s": t_d - t_a})
        if i == 0:
            marks["first_step_end"] = time.time()
            if profiler is not None:
                import io
                import pstats

                profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(60)
                first_profile = text.getvalue()[-12000:]
            from torch._dynamo.utils import compile_times, counters

            first_compile = compile_times(repr="str")
            inductor_counters = {k: dict(v) for k, v in counters.items()
                                 if k in ("inductor", "aot_autograd", "stats")}
    marks["steps_end"] = time.time()
    out = {"variant": args.variant, "torch": torch.__version__, "marks": marks, "steps": steps,
           "compile_times_first_step": first_compile[-4000:], "counters": inductor_counters,
           "first_step_cprofile": first_profile if profiler is not None else None}
    if args.megacache_save:
        artifacts = torch.compiler.save_cache_artifacts()
        if artifacts is not None:
            blob, info = artifacts
            with open(args.megacache_save, "wb") as fh:
                fh.write(blob)
            out["megacache_bytes"] = len(blob)
            out["megacache_info"] = str(info)[:800]
    dist.destroy_process_group()
    out["marks"]["destroyed"] = time.time()
    print("SP_RESULT " + json.dumps(out), flush=True)


def _variants(recipe: str, steps: int, root: str) -> list[tuple[str, list[str], dict[str, str]]]:
    cache_a = os.path.join(root, "cache-a")
    cache_b = os.path.join(root, "cache-b")
    cache_p = os.path.join(root, "cache-p")
    blob = os.path.join(root, "mega.bin")

    def env(cache: str) -> dict[str, str]:
        return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
                "TRITON_CACHE_DIR": os.path.join(cache, "triton")}

    base = ["--recipe", recipe, "--steps", str(steps)]
    return [
        ("cold", base + ["--megacache-save", blob], env(cache_a)),
        ("warm", base, env(cache_a)),
        ("warm-2", base, env(cache_a)),
        ("megacache-load", base + ["--megacache-load", blob], env(cache_b)),
        ("precompile-cold", base + ["--precompile"], env(cache_p)),
        ("precompile-warm", base + ["--precompile"], env(cache_p)),
        ("warm-threads1", base, {**env(cache_a), "TORCHINDUCTOR_COMPILE_THREADS": "1"}),
        ("nocompile", base + ["parallel.compile=false"], env(cache_a)),
        ("warm-cprofile", base + ["--cprofile"], env(cache_a)),
    ]


def _row(r: dict) -> str:
    m, s = r["marks"], r["steps"]
    later = sorted(x["step_s"] for x in s[2:]) or [float("nan")]
    return (f"{r['variant']:16s} {r['wall_s']:6.2f} {m['import_torch'] - m['start']:6.2f} "
            f"{m['import_trainer'] - m['import_torch']:6.2f} "
            f"{m['process_group'] - m['import_trainer']:6.2f} "
            f"{m['model_built'] - m['process_group']:6.2f} {s[0]['fwd_s']:6.2f} "
            f"{s[0]['bwd_s']:6.2f} {s[0]['opt_s']:6.2f} {s[1]['step_s']:6.3f} "
            f"{later[len(later) // 2]:6.3f} {r['exit_s']:6.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="ltx2-bench-h200")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--out", default=None)
    p.add_argument("--only", default=None, help="comma-separated variant names")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="", help=argparse.SUPPRESS)
    p.add_argument("--megacache-save", default=None, help=argparse.SUPPRESS)
    p.add_argument("--megacache-load", default=None, help=argparse.SUPPRESS)
    p.add_argument("--precompile", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cprofile", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*")
    args = p.parse_args()
    if args.worker:
        _worker(args)
        return
    root = tempfile.mkdtemp(prefix="startup-profile-")
    results = []
    print(f"# startup_profile recipe={args.recipe} steps={args.steps} root={root}")
    print(f"# {'variant':16s} {'wall':>6s} {'imp_t':>6s} {'imp_tr':>6s} {'pg':>6s} "
          f"{'build':>6s} {'fwd0':>6s} {'bwd0':>6s} {'opt0':>6s} {'step1':>6s} "
          f"{'stepN':>6s} {'exit':>6s}   (seconds)")
    wanted = set(args.only.split(",")) if args.only else None
    for name, argv, env in _variants(args.recipe, args.steps, root):
        if wanted and name not in wanted:
            continue
        launch = time.time()
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--worker", "--variant", name, *argv,
             *args.overrides],
            env={**os.environ, **env, "SP_LAUNCH": repr(launch)}, capture_output=True,
            text=True, check=False)
        done = time.time()
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SP_RESULT ")), None)
        if line is None:
            print(f"{name}: failed rc={proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}",
                  flush=True)
            continue
        r = json.loads(line[len("SP_RESULT "):])
        r["wall_s"] = done - launch
        r["exit_s"] = done - r["marks"]["destroyed"]
        results.append(r)
        print(_row(r), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
