"""Command line: ``python -m trainer {train,flops,recipes}``.

``train --recipe NAME|PATH [section.key=value ...]`` runs training and prints the
record lines; ``flops --recipe NAME [--json] [--audit]`` prints model FLOPs per
sample (DESIGN.md section 2), with ``--audit`` also measuring them with
``FlopCounterMode``; ``recipes`` lists the bundled recipes.
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


if __name__ == "__main__":
    sys.exit(main())
