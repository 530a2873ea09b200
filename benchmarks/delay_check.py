"""Is ``measure.delay_fraction`` the slowdown it says? (issue 23, "a calibrated 1% delay").

Runs the bundled trainer as alternating lone processes, undelayed and delayed
(``measure.delay_fraction``), each with a fixed warmup and window, and prints every run's
median step time, the delayed runs' median against the mean of their neighbouring
undelayed runs (a control midpoint, so a drift of the machine cancels), and the delay the
trainer measured on the device.

Usage (repo root; the GPU recipe on a GPU machine, ``tiny`` for a CPU dry run)::

    python3 benchmarks/delay_check.py --recipe ltx2-bench-h200 --fraction 0.01 --pairs 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def run_once(recipe: str, fraction: float, warmup: int, steps: int,
             overrides: list[str] = ()) -> dict:
    """One lone trainer process; returns its AXBGATE_TIMING record and median seconds."""
    argv = [sys.executable, "-m", "trainer", "train", "--recipe", recipe,
            "measure.warmup_mode=fixed", f"measure.warmup_steps={warmup}",
            f"measure.measured_steps={steps}", "measure.measured_seconds=none",
            f"measure.delay_fraction={fraction}", *overrides]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    rec = None
    for line in proc.stdout.splitlines():
        if line.startswith("AXBGATE_TIMING "):
            rec = json.loads(line.split(" ", 1)[1])
    if rec is None:
        raise SystemExit(f"trainer failed rc={proc.returncode}:\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-3000:]}")
    steps_s = rec["slowest_rank_step_s"][rec["num_warmup_steps"]:]
    return {"fraction": fraction, "median_s": statistics.median(steps_s),
            "steps_s": rec["slowest_rank_step_s"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="ltx2-bench-h200")
    p.add_argument("--fraction", type=float, default=0.01)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("overrides", nargs="*", help="recipe overrides, e.g. model.num_layers=4")
    args = p.parse_args()
    print(f"# delay_check recipe={args.recipe} fraction={args.fraction} warmup={args.warmup} "
          f"steps={args.steps} overrides={args.overrides}")
    runs = [run_once(args.recipe, 0.0, args.warmup, args.steps, args.overrides)]
    for _ in range(args.pairs):
        runs.append(run_once(args.recipe, args.fraction, args.warmup, args.steps, args.overrides))
        runs.append(run_once(args.recipe, 0.0, args.warmup, args.steps, args.overrides))
    for i, r in enumerate(runs):
        print(f"run {i} fraction {r['fraction']:.3f} median {r['median_s']:.5f} s  steps "
              + " ".join(f"{x:.4f}" for x in r["steps_s"]), flush=True)
    effects = []
    for i in range(1, len(runs) - 1, 2):
        mid = (runs[i - 1]["median_s"] + runs[i + 1]["median_s"]) / 2
        drift = abs(runs[i - 1]["median_s"] - runs[i + 1]["median_s"]) / mid * 100
        eff = (runs[i]["median_s"] / mid - 1) * 100
        effects.append(eff)
        print(f"delayed run {i}: {eff:+.3f}% over its control midpoint (drift {drift:.3f}%)")
    print(f"mean effect {statistics.mean(effects):+.3f}% (wanted {args.fraction * 100:+.3f}%)")


if __name__ == "__main__":
    main()
