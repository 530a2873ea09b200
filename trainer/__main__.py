"""Command line: ``python -m trainer {train,flops,recipes,write-checkpoint}``.

``train --recipe NAME|PATH [section.key=value ...]`` runs training and prints the
record lines; ``flops --recipe NAME [--json] [--audit]`` prints model FLOPs per
sample (DESIGN.md section 2), with ``--audit`` also measuring them with
``FlopCounterMode``; ``recipes`` lists the bundled recipes; ``write-checkpoint
--recipe NAME --out DIR`` writes a Diffusers-layout LTX-2.0 folder (audio tensors
included) holding the recipe's own init (docs/checkpoints.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from trainer.config import list_recipes, load_recipe
from trainer.flops import flops_per_sample


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainer", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a recipe and print AXBGATE_* records")
    t.add_argument("--recipe", required=True, help="bundled recipe name or .toml path")
    t.add_argument("overrides", nargs="*", help="section.key=value overrides")
    f = sub.add_parser("flops", help="model FLOPs per sample")
    f.add_argument("--recipe", required=True)
    f.add_argument("overrides", nargs="*")
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.add_argument("--audit", action="store_true",
                   help="also count executed FLOPs with FlopCounterMode (CPU, eager attention)")
    sub.add_parser("recipes", help="list bundled recipes")
    w = sub.add_parser("write-checkpoint",
                       help="write a save_pretrained-compatible folder with the recipe's init")
    w.add_argument("--recipe", required=True)
    w.add_argument("overrides", nargs="*")
    w.add_argument("--out", required=True, help="output folder")
    w.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    w.add_argument("--max-shard-gb", type=float, default=5.0, help="largest shard, GB (1e9 B)")
    w.add_argument("--device", default="auto",
                   help="where values are drawn: auto (cuda when available, as the trainer), "
                        "cpu, cuda")
    w.add_argument("--no-audio", action="store_true", help="video tensors only")
    return p


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the process exit code (2 for a bad recipe)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=os.environ.get("AXBGATE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if args.cmd == "recipes":
        print("\n".join(list_recipes()))
        return 0
    try:
        recipe = load_recipe(args.recipe, args.overrides)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.cmd == "flops":
        out: dict = {"recipe": recipe.name, "flops_per_sample": flops_per_sample(recipe)}
        if args.audit:
            from trainer.flops import audit_flops

            out.update(audit_flops(recipe))
        if args.json:
            print(json.dumps(out))
        else:
            for key, value in out.items():
                print(f"{key}: {value}")
        return 0
    if args.cmd == "write-checkpoint":
        return _write_checkpoint(recipe, args)
    imports_start = time.time()
    from trainer.train import main as train_main

    code = train_main(recipe, timeline={"imports_start_unix": imports_start,
                                        "imports_done_unix": time.time()})
    # The process group is destroyed and every record is flushed at this point.
    # Skip interpreter teardown: with bf16 gloo runs on CPU, a C++ thread
    # destructor intermittently calls std::terminate at exit (SIGABRT after a
    # successful run, seen 1 in 4 runs with torch 2.13 CPU), which would turn a
    # measured run into a failed one.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _write_checkpoint(recipe, args: argparse.Namespace) -> int:
    import torch

    from trainer.diffusers_layout import write_init_checkpoint

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() and recipe.parallel.device != "cpu" else "cpu"
    start = time.perf_counter()
    out = write_init_checkpoint(recipe, args.out, dtype=args.dtype,
                                max_shard_bytes=int(args.max_shard_gb * 1e9), device=device,
                                with_audio=not args.no_audio)
    print(json.dumps({**out, "device": device, "dtype": args.dtype, "out": args.out,
                      "seconds": round(time.perf_counter() - start, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
