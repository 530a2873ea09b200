"""Noise-family suite of the verdict policies: error rates, power, runs and GPU-seconds.

Usage (repository root)::

    .venv/bin/python benchmarks/verdict_noise.py [--trials N] [--seed S] [--families a,b]
        [--sigmas 0.04,0.1,...] [--history none,same,quiet,noisy] [--runs-table PATH]

For every cell (noise family x run sigma x history) it simulates ``--trials`` gates with no
true effect and as many with the candidate 1% faster, and judges them with

* ``sequential`` at its defaults (the default primary policy), through the engine's own
  vectorised walk (``orchestrator.verdict.seqcore.walk``: the code the stored verdicts use,
  so there is no replica to disagree with; ``--check`` also judges the first trials of
  every cell one gate at a time through ``judge()`` and counts mismatches);
* ``seq-v2-settings``: the same engine with the v2 choices (strict alternation, no outlier
  re-measurement, no state covariate or split guard, no early look, alpha 0.55%, gamma 1);
* ``drift``: the campaign's rule on one fixed A X B (no conditioning run).

It prints FA / FR (% accept / reject at no effect) with Wilson 95% intervals, power (%
accept at a 1% speedup) with its interval, mean runs per gate at no effect and at 1%,
and mean GPU-seconds per gate at 1% on the 1xH200 cost profile below.

Model of one allocation (multiplicative, log scale): run j's level is e_j from the family
below with sd ``sigma_run`` = sqrt(sigma^2 - w^2), so that the total sd of a run median is
the cell's sigma (w: the median error of ``STEPS`` steps of sd ``STEP_SD``); each run has
``STEPS`` measured steps of lognormal noise sd ``STEP_SD`` around its level; the run median
and its exact-bootstrap standard error are computed from the steps. Candidate runs are
scaled by the true effect. Families:

| family          | run levels                                                              |
|-----------------|-------------------------------------------------------------------------|
| normal          | N(0, s^2) independent                                                   |
| heavy           | Student t3 scaled to sd s                                               |
| outlier         | normal + one run (uniform over the allocation's positions) +3% slower   |
| outlier_fast    | normal + one run 3% faster                                              |
| outlier_1.5     | normal + one run +1.5% (6 sigma at s 0.25%: hard to see on 7 runs)      |
| outliers_2      | normal + two runs +3% each                                              |
| drift           | normal + 0.1% per run linear trend                                      |
| step            | normal + a +0.5% level shift from a random run on                       |
| bimodal         | normal + state drawn per run: +1% with probability 0.5                  |
| bimodal_2pct    | normal + +2% state, p 0.5                                               |
| bimodal_0.5pct  | normal + +0.5% state, p 0.5                                             |
| bimodal_rare    | normal + +1% state, p 0.2                                               |
| bimodal_sticky  | normal + +1% state, Markov: switches with probability 0.2 per run      |
| anticorrelated  | AR(1), phi -0.5 (neighbouring runs anti-correlated)                     |
| correlated      | AR(1), phi +0.5                                                         |
| autocorr_steps  | normal, steps AR(1) phi 0.7 within each run (iid bootstrap under-states)|
| first_run       | normal, the allocation's first run 0.4% faster (cold GPU)               |
| hiccups         | normal, 3% of steps +15% slower                                         |
| h200            | real 1xH200 / 2xH200 control runs resampled: each run the first STEPS    |
|                 | measured steps of a control run of one real gate (sigma as they give)    |

History (``--history``): ``none``; ``same`` (20 earlier (A, B) pairs of the same family at the
gate's sigma), ``quiet`` (history sigma half the gate's: the dangerous direction),
``noisy`` (twice the gate's).

GPU-seconds (1xH200 profile, ``benchmarks/results/gate_cost_h200x1_2026-12-01``): health
6.8 s + runs x (per-run fixed cost + warmup ``RUN_OVERHEAD_S`` + window ``WINDOW_S``).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import io
import json
import math
import os
import platform
import sys
import tarfile
import time

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from orchestrator.verdict import GateMeasurement, RunSummary, judge
from orchestrator.verdict.design import label_controls, planned_codes
from orchestrator.verdict.policy import DriftPolicy, SequentialPolicy
from orchestrator.verdict.seqcore import ACCEPT, INCONCLUSIVE, REJECT, walk

STEPS = 5
"""Measured steps per run (the cost model's choice on 1xH200: ``cost_model.py``)."""
STEP_SD = 0.002
"""Per-step lognormal sd (0.2%: the 1xH200 recipe's measured steps, gate_cost_h200x1)."""
HEALTH_S = 6.8
"""Health gate on 1xH200, seconds (gate_cost_h200x1_2026-12-01/SUMMARY.txt)."""
RUN_OVERHEAD_S = 10.3
"""Per-run fixed cost + warmup on 1xH200 today, seconds (1.8 + 8.5, same source)."""
WINDOW_S = STEPS * 0.859
"""Measured window, seconds (5 steps of the recipe's 0.859 s)."""
EFFECT = -0.01
HISTORY_PAIRS = 20
FAMILIES = ("normal", "heavy", "outlier", "outlier_fast", "outlier_1.5", "outliers_2", "drift",
            "step", "bimodal", "bimodal_2pct", "bimodal_0.5pct", "bimodal_rare", "bimodal_sticky",
            "anticorrelated", "correlated", "autocorr_steps", "first_run", "hiccups", "h200")
HISTORY = {"none": None, "same": 1.0, "quiet": 0.5, "noisy": 2.0}
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
V2_SETTINGS = {"design": "alternate", "max_replacements": 0, "state_separation": 1e9,
               "split_alpha": 1.0, "early_history_dof": 0, "alpha": 0.0055, "spending_gamma": 1.0}


def _ar1(rng: np.random.Generator, shape: tuple[int, ...], phi: float) -> np.ndarray:
    e = rng.normal(size=shape)
    out = np.empty(shape)
    out[..., 0] = e[..., 0]
    for j in range(1, shape[-1]):
        out[..., j] = phi * out[..., j - 1] + math.sqrt(1 - phi**2) * e[..., j]
    return out


def run_levels(rng: np.random.Generator, family: str, shape: tuple[int, int],
               s: float) -> np.ndarray:
    """Log run levels, shape (trials, runs), run-level sd ``s`` (fraction)."""
    T, N = shape
    if family == "heavy":
        return s * rng.standard_t(3, shape) / math.sqrt(3.0)
    if family in ("anticorrelated", "correlated"):
        return s * _ar1(rng, shape, -0.5 if family == "anticorrelated" else 0.5)
    e = rng.normal(0.0, s, shape)
    rows = np.arange(T)
    if family.startswith("outlier"):
        size = {"outlier": 0.03, "outlier_fast": -0.03, "outlier_1.5": 0.015,
                "outliers_2": 0.03}[family]
        for _ in range(2 if family == "outliers_2" else 1):
            e[rows, rng.integers(0, N, T)] += math.log1p(size)
    elif family == "drift":
        e += np.arange(N) * 0.001
    elif family == "step":
        at = rng.integers(1, N, T)
        e += np.where(np.arange(N)[None, :] >= at[:, None], math.log1p(0.005), 0.0)
    elif family == "bimodal_sticky":
        state = np.zeros(shape, bool)
        state[:, 0] = rng.random(T) < 0.5
        for j in range(1, N):
            state[:, j] = state[:, j - 1] ^ (rng.random(T) < 0.2)
        e += np.where(state, math.log1p(0.01), 0.0)
    elif family.startswith("bimodal"):
        gap, p = {"bimodal": (0.01, 0.5), "bimodal_2pct": (0.02, 0.5),
                  "bimodal_0.5pct": (0.005, 0.5), "bimodal_rare": (0.01, 0.2)}[family]
        e += np.where(rng.random(shape) < p, math.log1p(gap), 0.0)
    elif family == "first_run":
        e[:, 0] += math.log1p(-0.004)
    return e


def _median_and_se(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run median and its exact-bootstrap standard error (``orchestrator.verdict.spread``)."""
    x = np.sort(steps, axis=-1)
    n = x.shape[-1]
    m = int(n / 2 + 0.5)
    w = np.diff(stats.beta.cdf(np.arange(n + 1) / n, m, n - m + 1))
    first = x @ w
    se = np.sqrt(np.maximum(((x - first[..., None]) ** 2) @ w, 0.0))
    return np.median(steps, axis=-1), se


def simulated_runs(rng: np.random.Generator, family: str, sigma: float, shape: tuple[int, int],
                   h200: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Log run medians and relative median errors, shape (trials, runs)."""
    if family == "h200":
        return _h200_runs(rng, shape, h200 or [])
    within = 1.2533 * STEP_SD / math.sqrt(STEPS)
    s = math.sqrt(max(sigma**2 - within**2, 1e-12))
    level = run_levels(rng, family, shape, s)
    if family == "autocorr_steps":
        noise = STEP_SD * _ar1(rng, shape + (STEPS,), 0.7)
    else:
        noise = rng.normal(0.0, STEP_SD, shape + (STEPS,))
    steps = np.exp(level[..., None] + noise)
    if family == "hiccups":
        steps *= 1.0 + 0.15 * (rng.random(steps.shape) < 0.03)
    med, se = _median_and_se(steps)
    return np.log(med), se / med


def load_h200_gates() -> list[np.ndarray]:
    """Measured steps of every control run of the committed 1x/2xH200 gates, each gate's
    runs relative to the mean of its runs' medians: one array (runs, steps) per gate."""
    gates = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "gate_cost_h200x*", "*.runs.tgz"))):
        runs = []
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if not member.name.endswith(".log") or "-X" in member.name:
                    continue
                text = tar.extractfile(member).read().decode("utf-8", "replace")
                for line in io.StringIO(text):
                    if line.startswith("AXBGATE_TIMING "):
                        rec = json.loads(line.split(" ", 1)[1])
                        steps = np.array(rec["slowest_rank_step_s"][rec["num_warmup_steps"]:])
                        if len(steps) >= 20:
                            runs.append(steps[:20])
        if len(runs) >= 2:
            arr = np.array(runs)
            gates.append(arr / np.mean(np.median(arr, axis=1)))
    return gates


def _h200_runs(rng: np.random.Generator, shape: tuple[int, int],
               gates: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    T, N = shape
    med = np.empty(shape)
    se = np.empty(shape)
    which = rng.integers(0, len(gates), T)
    for g, runs in enumerate(gates):
        rows = np.where(which == g)[0]
        if not len(rows):
            continue
        pick = rng.integers(0, runs.shape[0], (len(rows), N))
        # every run measures the steps right after its warmup (the same window position
        # for all runs, as in a gate: a drift within the run then cancels between roles)
        idx = np.broadcast_to(np.arange(STEPS), (len(rows), N, STEPS))
        block = runs[pick[..., None], idx]
        m, s = _median_and_se(block)
        med[rows], se[rows] = m, s
    return np.log(med), se / med


def history_ss(rng: np.random.Generator, family: str, sigma: float, trials: int,
               h200: list[np.ndarray] | None) -> np.ndarray:
    """Log sum of squares of HISTORY_PAIRS (A, B) pairs per trial (history dof = pairs)."""
    fam = family if family.startswith("bimodal") or family in ("heavy", "h200",
                                                               "autocorr_steps") else "normal"
    logm, _ = simulated_runs(rng, fam, sigma, (trials * HISTORY_PAIRS, 2), h200)
    logm = logm.reshape(trials, HISTORY_PAIRS, 2)
    return np.sum((logm - logm.mean(-1, keepdims=True)) ** 2, axis=(1, 2))


def sequential_cell(policy: SequentialPolicy, family: str, sigma: float, effect: float,
                    trials: int, seed: int, hist: str, h200) -> dict[str, np.ndarray]:
    """Simulate and judge one cell with the engine's walk; returns codes, runs, and the
    inputs (for ``--check``)."""
    rng = np.random.default_rng(seed)
    width = policy.max_runs + policy.max_replacements
    logm, rel = simulated_runs(rng, family, sigma, (trials, width), h200)
    seeds = rng.integers(0, 2**31, trials)
    plans = np.array([planned_codes(policy.design, int(s), policy.max_runs,
                                    policy.num_conditioning_runs) for s in seeds])
    factor = HISTORY[hist]
    ss = history_ss(rng, family, sigma * factor, trials, h200) if factor else None
    result = walk(policy, "candidate", plans, np.full(trials, plans.shape[1]), logm, rel,
                  effect_log=math.log1p(effect), history_ss=ss,
                  history_dof=HISTORY_PAIRS if factor else 0)
    return {"code": result.code, "runs": result.num_runs, "logm": logm, "rel": rel,
            "seeds": seeds, "ss": ss, "roles": result.roles}


def drift_cell(family: str, sigma: float, effect: float, trials: int, seed: int,
               h200) -> np.ndarray:
    """The campaign's A X B under drift (DriftPolicy defaults), vectorised: codes."""
    rng = np.random.default_rng(seed + 1)
    logm, _ = simulated_runs(rng, family, sigma, (trials, 3), h200)
    a, x, b = np.exp(logm[:, 0]), np.exp(logm[:, 1]) * (1 + effect), np.exp(logm[:, 2])
    mid = (a + b) / 2
    drift = np.abs(a - b) / mid * 100
    delta = (x - mid) / mid * 100
    p = DriftPolicy()
    thr = np.maximum(drift, p.min_effect_pct)
    return np.where(drift > p.max_drift_pct, INCONCLUSIVE,
                    np.where(delta < -thr, ACCEPT, np.where(delta > thr, REJECT, 0)))


def check_engine(policy: SequentialPolicy, out: dict, effect: float, count: int) -> int:
    """Judge the first ``count`` gates one at a time through ``judge()``: mismatches."""
    want = {ACCEPT: "accept", REJECT: "reject", 0: "neutral", INCONCLUSIVE: "inconclusive"}
    bad = 0
    for t in range(count):
        n = int(out["runs"][t])
        codes = tuple(int(r) for r in out["roles"][t, :n])
        runs = []
        for j, role in enumerate(label_controls(codes)):
            med = math.exp(out["logm"][t, j]) * ((1 + effect) if role == "X" else 1.0)
            runs.append(RunSummary(role=role, order=j, median_step_s=med,
                                   median_se_s=out["rel"][t, j] * med))
        m = GateMeasurement(runs=tuple(runs), design_seed=int(out["seeds"][t]))
        bad += judge(m, policy).verdict != want[int(out["code"][t])]
    return bad


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half) * 100, min(1.0, centre + half) * 100)


def _fmt(k: int, n: int) -> str:
    lo, hi = _wilson(k, n)
    return f"{100 * k / n:5.2f} [{lo:4.2f},{hi:5.2f}]"


def gpu_seconds(runs: np.ndarray) -> float:
    """Mean GPU-seconds of the gates on the 1xH200 profile (one GPU)."""
    return HEALTH_S + float(np.mean(runs)) * (RUN_OVERHEAD_S + WINDOW_S)


RUNS_TABLE_SIGMAS_PCT = (0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75,
                         1.0, 1.5, 2.0)


def write_runs_table(path: str, trials: int, seed: int) -> None:
    """The cost model's input (``orchestrator.domain.cost_model``): for each run sigma, the
    default policy's mean runs per gate and share of gates decided (not inconclusive), at no
    effect and at a 1% speedup, normal family, no history."""
    policy = SequentialPolicy()
    rows = []
    for i, sigma_pct in enumerate(RUNS_TABLE_SIGMAS_PCT):
        row = {"sigma_pct": sigma_pct}
        for name, effect in (("null", 0.0), ("effect_1pct", EFFECT)):
            out = sequential_cell(policy, "normal", sigma_pct / 100, effect, trials,
                                  seed + 17 * i + (1 if effect else 0), "none", None)
            row[f"runs_{name}"] = round(float(np.mean(out["runs"])), 3)
            row[f"decided_{name}"] = round(float(np.mean(out["code"] != INCONCLUSIVE)), 4)
        rows.append(row)
        print(row, flush=True)
    table = {
        "policy": "sequential", "policy_version": SequentialPolicy.version,
        "params": policy.params(),
        "source": f"benchmarks/verdict_noise.py --write-runs-table --trials {trials} "
                  f"--seed {seed} ({datetime.date.today().isoformat()})",
        "rows": rows,
    }
    with open(path, "w") as fh:
        json.dump(table, fh, indent=1)
        fh.write("\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=10000)
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--sigmas", default="0.04,0.1,0.15,0.25,0.5,1.0")
    p.add_argument("--history", default="none,same,quiet,noisy")
    p.add_argument("--policies", default="sequential,seq-v2-settings,drift")
    p.add_argument("--check", type=int, default=0, help="judge() this many gates per cell too")
    p.add_argument("--params", default="", help="sequential parameter overrides, k=v,k=v")
    p.add_argument("--write-runs-table", default=None, metavar="PATH",
                   help="only write the cost model's table (runs per gate vs run sigma, normal "
                        "family, no history, default policy) to PATH as JSON")
    args = p.parse_args()
    if args.write_runs_table:
        write_runs_table(args.write_runs_table, args.trials, args.seed)
        return
    overrides = {}
    for item in filter(None, args.params.split(",")):
        k, v = item.split("=")
        overrides[k] = json.loads(v) if v[0] in "0123456789-.[{tf" else v
    default = SequentialPolicy(**overrides)
    policies = {"sequential": default, "seq-v2-settings": SequentialPolicy(**V2_SETTINGS)}
    wanted = args.policies.split(",")
    h200 = load_h200_gates()
    print("# verdict_noise: FA / FR / power / runs / GPU-s of the verdict policies per noise "
          "family (issue 23)")
    print(f"# date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"# machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()} "
          f"python={platform.python_version()} numpy={np.__version__}")
    print(f"# command (cwd = repository root): {' '.join(sys.argv)}")
    print(f"# sequential v{SequentialPolicy.version} params: {default.params()}")
    print(f"# seq-v2-settings: the same engine with {V2_SETTINGS}")
    print(f"# model: {STEPS} measured steps/run, step sd {STEP_SD * 100:g}%; h200 family: "
          f"{len(h200)} real gates, {sum(g.shape[0] for g in h200)} control runs resampled "
          f"({STEPS}-step blocks); GPU-s: {HEALTH_S} s health + runs x ({RUN_OVERHEAD_S} s fixed+"
          f"warmup + {WINDOW_S:.2f} s window) on one GPU")
    print(f"# trials per cell and effect: {args.trials}; FA/FR/pow in % with Wilson 95% "
          "intervals; runs@0 / runs@1 = mean runs per gate at no effect / at a 1% speedup")
    print()
    print(f"{'family':15s} {'sigma':>5s} {'hist':5s} {'policy':16s} {'FA% [95%]':>19s} "
          f"{'FR% [95%]':>19s} {'pow@1% [95%]':>22s} {'runs@0':>6s} {'runs@1':>6s} {'GPU-s@1':>7s}")
    worst = {}
    checks = 0
    started = time.time()
    for family in args.families.split(","):
        sigmas = [None] if family == "h200" else [float(s) / 100 for s in args.sigmas.split(",")]
        for sigma in sigmas:
            for hist in args.history.split(","):
                if family == "h200" and hist in ("quiet", "noisy"):
                    continue
                seed = abs(hash((family, sigma, hist, args.seed))) % (2**31)
                for name in wanted:
                    if name == "seq-v2-settings" and hist != "none":
                        continue  # the comparison is shown without history only
                    if name == "drift":
                        if hist != "none":
                            continue
                        c0 = drift_cell(family, sigma or 0.0, 0.0, args.trials, seed, h200)
                        c1 = drift_cell(family, sigma or 0.0, EFFECT, args.trials, seed + 7, h200)
                        r0 = r1 = np.full(args.trials, 3)
                    else:
                        pol = policies[name]
                        o0 = sequential_cell(pol, family, sigma or 0.0, 0.0, args.trials, seed,
                                             hist, h200)
                        o1 = sequential_cell(pol, family, sigma or 0.0, EFFECT, args.trials,
                                             seed + 7, hist, h200)
                        c0, c1, r0, r1 = o0["code"], o1["code"], o0["runs"], o1["runs"]
                        if args.check and hist == "none":
                            checks += check_engine(pol, o0, 0.0, args.check)
                            checks += check_engine(pol, o1, EFFECT, args.check)
                    n = args.trials
                    fa, fr, pw = int(np.sum(c0 == ACCEPT)), int(np.sum(c0 == REJECT)), \
                        int(np.sum(c1 == ACCEPT))
                    label = "real" if sigma is None else f"{sigma * 100:.2f}"
                    print(f"{family:15s} {label:>5s} {hist:5s} {name:16s} {_fmt(fa, n):>19s} "
                          f"{_fmt(fr, n):>19s} {_fmt(pw, n):>22s} {np.mean(r0):6.2f} "
                          f"{np.mean(r1):6.2f} {gpu_seconds(r1):7.1f}", flush=True)
                    w = worst.setdefault(name, {"fa": 0, "fr": 0, "cells": 0, "pow_fail": []})
                    w["fa"] = max(w["fa"], fa / n * 100)
                    w["fr"] = max(w["fr"], fr / n * 100)
                    w["cells"] += 1
                    if name == "sequential" and (sigma is None or sigma <= 0.0025 + 1e-12) \
                            and family.startswith("outlier") and pw / n < 0.95:
                        w["pow_fail"].append(f"{family}@{label}/{hist}: {100 * pw / n:.1f}%")
    print()
    for name, w in worst.items():
        print(f"# {name}: worst FA {w['fa']:.2f}%, worst FR {w['fr']:.2f}% over {w['cells']} cells")
    if "sequential" in worst:
        fails = worst["sequential"]["pow_fail"]
        print(f"# sequential: power < 95% at a 1% effect with outlier runs, sigma <= 0.25%: "
              f"{'; '.join(fails) if fails else 'none'}")
    if args.check:
        print(f"# engine check: judge() one gate at a time vs the vectorised walk: {checks} "
              f"mismatches in the first {args.check} gates of every cell without history")
    print(f"# wall {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
