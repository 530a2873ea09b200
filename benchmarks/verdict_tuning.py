"""Parameter and look-schedule sweep of the sequential policy on the verdict_power model.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/verdict_tuning.py [--trials N] \
        [--sigmas 0.04,...,1.5] '' 'alpha=0.0065' 'min_dof=2,spending_gamma=2' \
        'looks=every,trend_min_runs=9,min_dof=4' ...

Every positional argument is one variant: comma-separated overrides of the default
``sequential`` policy ('' = the default). Two keys are not policy parameters but
experiments on the engine's look schedule, patched into this process only:
``looks=every`` looks after every run from the third used run on (the engine looks
after every X + control pair), ``trend_min_runs=N`` fits the linear trend from N used
runs on (engine: ``looks.TREND_MIN_RUNS`` = 5).

Each variant is judged on the same simulated gates (common random numbers; the model
and run statistics of ``verdict_power.py --suite sequential``, normal steps, histories
none / same / x0.5 / x2 of 20 pairs) by the vectorized replicas of ``verdict_vector.py``.
The engine checks of ``verdict_power.py`` are not repeated: a chosen setting must be
confirmed with that benchmark. Printed per variant: every cell's FA / FR at no effect,
power and runs at a 1% speedup, then a summary line (worst FA and FR over the cells).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import orchestrator.verdict.looks as looks  # noqa: E402
import orchestrator.verdict.sequential as sequential  # noqa: E402
from orchestrator.verdict import get_policy, initial_roles  # noqa: E402
from orchestrator.verdict.model import CONTROL_ROLES  # noqa: E402

import verdict_power as vp  # noqa: E402
import verdict_vector as vv  # noqa: E402

HISTORIES = ("none", "same", "x0.5", "x2")
ENGINE_LOOK_ENDS = looks.look_ends
ENGINE_TREND_MIN_RUNS = looks.TREND_MIN_RUNS
SCHEDULE_KEYS = ("looks", "trend_min_runs")


def every_run_look_ends(roles):
    """Look after every used run from the third on, once a candidate and a control ran."""
    ends, seen_x, seen_c = [], False, False
    for i, role in enumerate(roles):
        seen_x, seen_c = seen_x or role == "X", seen_c or role in CONTROL_ROLES
        if seen_x and seen_c and i >= 2:
            ends.append(i + 1)
    return ends


def _parse(spec: str) -> dict[str, object]:
    """Overrides from ``name=value,name=value`` (ints stay ints, ``looks`` a string)."""
    out: dict[str, object] = {}
    for item in filter(None, spec.split(",")):
        key, value = (x.strip() for x in item.split("="))
        if key == "looks":
            out[key] = value
        else:
            out[key] = int(value) if value.lstrip("-").isdigit() else float(value)
    return out


def _set_schedule(overrides: dict[str, object]) -> None:
    """Patch (or restore) the engine's look schedule in this process."""
    looks.TREND_MIN_RUNS = int(overrides.get("trend_min_runs", ENGINE_TREND_MIN_RUNS))
    every = overrides.get("looks", "pair") == "every"
    sequential.look_ends = every_run_look_ends if every else ENGINE_LOOK_ENDS
    looks.design.cache_clear()
    sequential.build_schedule.cache_clear()


def _gates(s_run: float, hist_mode: str, trials: int, seed: int, n_max: int):
    """Simulated runs (medians, their se) and history of one cell."""
    rng = np.random.default_rng(seed)
    med, se, _ = vp._run_stats(vp._steps(rng, (trials, n_max), s_run, "normal", 0))
    hist_ss, hist_dof = None, 0
    if hist_mode != "none":
        h_med, _, _ = vp._run_stats(vp._steps(rng, (trials, vp.HISTORY_GATES, 2),
                                              s_run * vp.HISTORY_FACTOR[hist_mode], "normal", 1))
        logs = np.log(h_med)
        hist_ss = np.sum((logs - logs.mean(axis=-1, keepdims=True)) ** 2, axis=(-1, -2))
        hist_dof = vp.HISTORY_GATES
    return med, se, hist_ss, hist_dof


def _judge(policy, med, se, hist_ss, hist_dof, speedup_pct: float):
    """Verdicts and runs used of one cell's gates (candidate faster by speedup_pct)."""
    roles = sequential.planned_roles(initial_roles(policy), policy.max_runs)
    is_x = np.array([r == "X" for r in roles])
    n = len(roles)
    logm = np.log(np.where(is_x, med[:, :n] * (1.0 - speedup_pct / 100.0), med[:, :n]))
    return vv.sequential_verdicts(policy, roles, len(initial_roles(policy)) - 3, logm,
                                  se[:, :n] / med[:, :n], hist_ss, hist_dof)


def main() -> None:
    """Run the sweep and print one line per variant and cell, then a summary per variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--sigmas", default=",".join(map(str, vp.SEQ_SIGMAS_PCT)))
    parser.add_argument("--histories", default=",".join(HISTORIES))
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args()
    sigmas = [float(x) for x in args.sigmas.split(",")]
    histories = args.histories.split(",")
    print(f"{'variant':<50} {'sigma':>5} {'hist':<5} {'FA%':>5} {'FR%':>5} {'pow@1':>6} "
          f"{'runs@1':>6} {'p95':>4}", flush=True)
    summaries = []
    for spec in args.variants:
        overrides = _parse(spec)
        _set_schedule(overrides)
        policy = get_policy("sequential", **{k: v for k, v in overrides.items()
                                             if k not in SCHEDULE_KEYS})
        name, rows = spec or "default", {}
        for si, s_run in enumerate(sigmas):
            for hi, hist in enumerate(histories):
                out = []
                for ei, speedup in enumerate((0.0, 1.0)):
                    cell = _gates(s_run, hist, args.trials, args.seed + 1000 * si + 10 * hi + ei,
                                  policy.max_runs + 2)
                    out.append(_judge(policy, *cell, speedup))
                (v0, _), (v1, r1) = out
                row = (100 * np.mean(v0 == "accept"), 100 * np.mean(v0 == "reject"),
                       100 * np.mean(v1 == "accept"), float(r1.mean()),
                       float(np.percentile(r1, 95)))
                rows[(s_run, hist)] = row
                print(f"{name:<50} {s_run:>5.2f} {hist:<5} {row[0]:>5.2f} {row[1]:>5.2f} "
                      f"{row[2]:>6.1f} {row[3]:>6.2f} {row[4]:>4.0f}", flush=True)
        summaries.append((name, rows))
    _set_schedule({})
    print("\n# summary: worst FA / FR over all cells above; power and mean runs at a 1% speedup"
          " at sigma 0.25 without history / with the same-noise history / x0.5 / x2")
    for name, rows in summaries:
        fa = max(rows.items(), key=lambda kv: kv[1][0])
        fr = max(rows.items(), key=lambda kv: kv[1][1])
        at = [rows.get((0.25, h)) for h in HISTORIES]
        tail = " | ".join(f"{h} {r[2]:.1f}% {r[3]:.2f}" for h, r in zip(HISTORIES, at) if r)
        print(f"{name:<50} FA {fa[1][0]:.2f} ({fa[0][0]:g}/{fa[0][1]}) FR {fr[1][1]:.2f} "
              f"({fr[0][0]:g}/{fr[0][1]}) | {tail}")


if __name__ == "__main__":
    main()
