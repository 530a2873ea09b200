"""Simulated false-accept rate and power of the verdict policies (DESIGN.md section 3).

Usage::

    .venv/bin/python benchmarks/verdict_power.py [--trials N] [--seed S] [--workers W]
    .venv/bin/python benchmarks/verdict_power.py --suite sequential [--trials N] ...

``--suite fixed`` (default) is the original comparison of fixed patterns below;
``--suite sequential`` is the calibrated sequential policy's benchmark (issue 12, see
``_sequential_suite``).

Model of one gate on one allocation (all effects multiplicative):

* run level: every run gets an independent allocation-drift factor
  exp(N(0, s_run)), s_run = the "drift level" (0.04% .. 1.5%); a linear
  time trend of ``TREND_PCT_PER_RUN`` per run is added (thermal / fabric warm-up),
  which the A X B sandwich is meant to cancel;
* per step: log-normal noise of sd ``STEP_NOISE_PCT`` plus, with probability
  ``HICCUP_PROB``, a hiccup step ``HICCUP_PCT`` slower; ``MEASURED_STEPS`` steps,
  run median = median of the steps (warmup already discarded);
* candidate copies are slower by the true effect (negative effect = faster);
* ledger history: ``HISTORY_GATES`` earlier (A, B) control pairs drawn from the
  same model on other allocations.

Every policy verdict is computed by the real engine (``orchestrator.verdict.judge``).
``per-step-t`` is NOT a policy of the engine: it is the DESIGN caution's foil, a
Welch t interval on per-step samples (98%), shown to be overconfident.

False accept = P(accept | no true effect); power = P(accept | candidate faster by
0.5%, 1%, 2%). "runs" = runs per gate, the GPU-time cost in units of one run.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import platform
import sys
import time

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from orchestrator.verdict import (
    ControlHistory,
    GateMeasurement,
    RunSummary,
    get_policy,
    initial_roles,
    judge,
    measurement_from_pattern,
    next_roles,
    run_statistics,
)
from orchestrator.verdict.looks import planned_roles

import verdict_vector as vv  # noqa: E402  (benchmarks/, on sys.path above)

DRIFT_LEVELS_PCT = (0.04, 0.1, 0.25, 0.5, 1.0, 1.5)
EFFECTS_PCT = (0.0, 0.5, 1.0, 2.0)
PATTERNS = ("AXB", "AXBXA", "AXBXAXB", "AXBXAXBXA")
STEP_NOISE_PCT = 0.5
HICCUP_PROB = 0.03
HICCUP_PCT = 15.0
MEASURED_STEPS = 20
TREND_PCT_PER_RUN = 0.05
HISTORY_GATES = 20
POLICIES = ("drift", "ratio-ci(gate)", f"ratio-ci(+{HISTORY_GATES} hist)", "per-step-t")


def _simulate_steps(rng: np.random.Generator, shape: tuple[int, ...], s_run: float,
                    trend: np.ndarray | float) -> np.ndarray:
    """Per-step times (seconds) of runs, shape (..., MEASURED_STEPS), base step 1 s."""
    level = np.exp(rng.normal(0.0, s_run / 100.0, size=shape) + trend)
    noise = np.exp(rng.normal(0.0, STEP_NOISE_PCT / 100.0, size=shape + (MEASURED_STEPS,)))
    hiccup = 1.0 + (HICCUP_PCT / 100.0) * (rng.random(shape + (MEASURED_STEPS,)) < HICCUP_PROB)
    return level[..., None] * noise * hiccup


def _per_step_t(steps: np.ndarray, pattern: str) -> np.ndarray:
    """Welch 98% interval of mean log step time, X minus controls, per-step samples only.

    Args:
        steps: Per-step times, shape (trials, runs, steps).
        pattern: Roles of the runs.

    Returns:
        Verdict strings, shape (trials,).
    """
    is_x = np.array([r == "X" for r in pattern])
    x = np.log(steps[:, is_x, :]).reshape(steps.shape[0], -1)
    c = np.log(steps[:, ~is_x, :]).reshape(steps.shape[0], -1)
    vx, vc = x.var(axis=1, ddof=1) / x.shape[1], c.var(axis=1, ddof=1) / c.shape[1]
    dof = (vx + vc) ** 2 / (vx**2 / (x.shape[1] - 1) + vc**2 / (c.shape[1] - 1))
    half = stats.t.ppf(0.99, dof) * np.sqrt(vx + vc)
    diff = x.mean(axis=1) - c.mean(axis=1)
    return np.where(diff + half < 0, "accept", np.where(diff - half > 0, "reject", "neutral"))


def _cell(args: tuple[str, float, float, int, int]) -> dict[str, dict[str, float]]:
    pattern, s_run, effect_pct, trials, seed = args
    rng = np.random.default_rng(seed)
    drift = get_policy("drift")
    ratio = get_policy("ratio-ci")
    n = len(pattern)
    trend = np.arange(n) * TREND_PCT_PER_RUN / 100.0
    is_x = np.array([r == "X" for r in pattern])
    counts = {p: {"accept": 0, "reject": 0, "inconclusive": 0} for p in POLICIES}
    steps_all = _simulate_steps(rng, (trials, n), s_run, trend)
    steps_all[:, is_x, :] *= 1.0 + effect_pct / 100.0
    medians = np.median(steps_all, axis=-1)
    hist_steps = _simulate_steps(rng, (trials, HISTORY_GATES, 2), s_run, 0.0)
    hist_medians = np.median(hist_steps, axis=-1)
    per_step = _per_step_t(steps_all, pattern)
    for t in range(trials):
        gate = measurement_from_pattern(pattern, medians[t].tolist())
        history = ControlHistory(pairs=tuple(map(tuple, hist_medians[t].tolist())))
        verdicts = {
            POLICIES[0]: judge(gate, drift).verdict,
            POLICIES[1]: judge(gate, ratio).verdict,
            POLICIES[2]: judge(gate, ratio, history=history).verdict,
            POLICIES[3]: str(per_step[t]),
        }
        for policy, verdict in verdicts.items():
            if verdict in counts[policy]:
                counts[policy][verdict] += 1
    return {p: {k: v / trials for k, v in c.items()} for p, c in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("fixed", "sequential"), default="fixed")
    parser.add_argument("--trials", type=int, default=6000, help="simulated gates per cell")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sigmas", default=",".join(map(str, SEQ_SIGMAS_PCT)),
                        help="sequential suite: comma-separated run-level sigmas, percent")
    args = parser.parse_args()
    if args.suite == "sequential":
        _sequential_suite(args)
        return
    _fixed_suite(args)


def _fixed_suite(args: argparse.Namespace) -> None:
    started = time.monotonic()
    jobs = []
    for pi, pattern in enumerate(PATTERNS):
        for di, s_run in enumerate(DRIFT_LEVELS_PCT):
            for ei, effect in enumerate(EFFECTS_PCT):
                # Candidate faster by `effect` percent: its step time is multiplied by 1 - e.
                seed = args.seed + 1000 * pi + 100 * di + ei
                jobs.append((pattern, s_run, -effect, args.trials, seed))
    with multiprocessing.Pool(args.workers) as pool:
        results = pool.map(_cell, jobs)
    table = {(j[0], j[1], -j[2]): r for j, r in zip(jobs, results)}

    print("# verdict_power: simulated false-accept rate and power of the verdict policies")
    print(f"# date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}")
    print(f"# machine: {platform.node()} {platform.machine()} {platform.processor() or ''} "
          f"cpus={os.cpu_count()} python={platform.python_version()} numpy={np.__version__}")
    print(f"# command: .venv/bin/python benchmarks/verdict_power.py --trials {args.trials} "
          f"--seed {args.seed} --workers {args.workers}")
    print(f"# model: run-to-run sd = drift level, trend {TREND_PCT_PER_RUN}%/run, per-step sd "
          f"{STEP_NOISE_PCT}%, hiccups {HICCUP_PROB:.0%} x +{HICCUP_PCT}%, "
          f"{MEASURED_STEPS} measured steps, history {HISTORY_GATES} control pairs")
    print(f"# trials per cell: {args.trials}; FA = false accept at no true effect, FR = false "
          "reject at no effect, inc = inconclusive at no effect, pow@e = P(accept) when the "
          "candidate is e% faster")
    print()
    header = (f"{'policy':<22} {'pattern':<10} {'runs':>4} {'drift%':>6} {'FA%':>6} {'FR%':>6} "
              f"{'inc%':>6} {'pow@0.5':>8} {'pow@1':>7} {'pow@2':>7}")
    for policy in POLICIES:
        print(header)
        for pattern in PATTERNS:
            for s_run in DRIFT_LEVELS_PCT:
                zero = table[(pattern, s_run, 0.0)][policy]
                pw = [table[(pattern, s_run, e)][policy]["accept"] for e in EFFECTS_PCT[1:]]
                print(f"{policy:<22} {pattern:<10} {len(pattern):>4} {s_run:>6.2f} "
                      f"{100 * zero['accept']:>6.2f} {100 * zero['reject']:>6.2f} "
                      f"{100 * zero['inconclusive']:>6.2f} {100 * pw[0]:>8.1f} "
                      f"{100 * pw[1]:>7.1f} {100 * pw[2]:>7.1f}")
        print()

    print("# false accept pooled over all patterns and drift levels (nominal 1% for ratio-ci;"
          f" Monte Carlo SE of one cell at 1%: {100 * (0.01 * 0.99 / args.trials) ** 0.5:.2f}%)")
    for policy in POLICIES:
        cells = [table[(p, s, 0.0)][policy]["accept"] for p in PATTERNS for s in DRIFT_LEVELS_PCT]
        print(f"{policy:<22} {100 * sum(cells) / len(cells):6.2f}%  (max cell "
              f"{100 * max(cells):.2f}%)")
    print()
    mc_se = (0.01 * 0.99 / args.trials) ** 0.5
    print("# cheapest policy x pattern meeting FA <= 1% and power@1% >= 95%, per drift level;")
    print(f"# FA counts as <= 1% up to 1% + 2 Monte Carlo SE ({100 * (0.01 + 2 * mc_se):.2f}%):"
          " ratio-ci is built to sit at 1%, '*' marks such cells")
    print("# run sigma = total sd of log run medians (drift level + per-step noise of a median),")
    print("# the quantity ratio-ci estimates and reports as run_sigma_pct")
    sigma_rng = np.random.default_rng(args.seed - 1)
    best: dict[float, tuple[str, str] | None] = {}
    for s_run in DRIFT_LEVELS_PCT:
        sim = np.median(_simulate_steps(sigma_rng, (20000,), s_run, 0.0), axis=-1)
        label = f"drift {s_run:>5.2f}% (run sigma {100 * np.log(sim).std(ddof=1):.2f}%)"
        ok = []
        for policy in POLICIES:
            for pattern in PATTERNS:
                fa = table[(pattern, s_run, 0.0)][policy]["accept"]
                pw = table[(pattern, s_run, 1.0)][policy]["accept"]
                if fa <= 0.01 + 2 * mc_se and pw >= 0.95:
                    ok.append((len(pattern), policy, pattern, fa, pw))
        ok.sort(key=lambda row: (row[0], row[3]))
        best[s_run] = (ok[0][1], ok[0][2]) if ok else None
        if ok:
            runs, policy, pattern, fa, pw = ok[0]
            print(f"{label}: {policy} on {pattern} ({runs} runs): "
                  f"FA {100 * fa:.2f}%{'*' if fa > 0.01 else ''}, power@1% {100 * pw:.1f}%")
        else:
            print(f"{label}: none of the simulated patterns (max "
                  f"{max(map(len, PATTERNS))} runs)")
    print()
    print(RECOMMENDATION)
    print(f"# runtime {time.monotonic() - started:.1f} s")


RECOMMENDATION = """\
# recommendation
# 1. Decide with `ratio-ci` (v1, confidence 0.98 = 1% per tail), fed with the ledger's
#    control pairs of the same topology and recipe (>= 20), reported side by side with
#    `drift`. It is the only rule here whose false-accept rate stays at its nominal 1%
#    at every drift level and pattern (pooled line above); with history it is also the
#    cheapest rule that reaches power >= 95% at a 1% effect.
# 2. Pick the pattern from the run-to-run spread the ledger shows (ratio-ci reports it
#    as run_sigma_pct, and mde_pct before any decision is trusted):
#      run sigma <= ~0.17% (drift level <= 0.1%) -> A X B (3 runs) already meets
#        FA <= 1% and power@1% >= 95%;
#      run sigma ~0.3% (drift level 0.25%)      -> A X B X A X B (7 runs);
#      run sigma >= ~0.5%                        -> no pattern up to 9 runs reaches 95% power at 1%
#        (Var of the estimate ~ 2 s^2 / copies); ratio-ci then answers inconclusive
#        (MDE > max_mde) or neutral instead of a coin-flip accept: fix the allocation
#        noise (clock bin, health gate) or accept a larger minimum effect.
# 3. Keep `drift` as the name DESIGN.md section 3 makes the default and always report it,
#    but do not let it decide alone on one A X B: it accepts 20-23% of candidates with no
#    true effect at every drift level (the DESIGN caution, reproduced above) and still
#    5-8% on A X B X A, because one X falls outside a two-run control range that often.
#    Its false accept falls below 1% only at 9 runs, where ratio-ci has more power.
# 4. Without ledger history ratio-ci stays honest (FA <= 1%) but a single A X B pair has
#    one degree of freedom: it is inconclusive most of the time and needs ~9 runs for
#    power at 1%. Seed the ledger with control pairs (A X B X A gates give two each).
# 5. Intervals from per-step samples (per-step-t) are overconfident: their false accept
#    grows with the run-to-run drift to 13-25% at 1-1.5%, as DESIGN.md section 3 warns."""


# --- sequential suite (issue 12) -------------------------------------------------------
#
# Model of one gate (all effects multiplicative, step time 1 s):
# * run level: exp(N(0, sigma)) per run, sigma = the cell's run-level sigma ("drift level"
#   of the fixed suite), plus the trend of TREND_PCT_PER_RUN per run, and the first run of
#   every allocation FIRST_RUN_PCT faster (cold GPUs boost higher, issue 12);
# * steps: MEASURED_STEPS per run; "normal": log-normal STEP_NOISE_PCT noise with hiccups
#   (HICCUP_PROB x +HICCUP_PCT); "bimodal": every step 1.00 or BIMODAL_HIGH at random
#   (p = 0.5, the same for every run) times the same log-normal noise;
# * run statistics as the engine computes them (median, its exact-bootstrap standard
#   error, multimodality), vectorized here and checked against run_statistics;
# * history: HISTORY_GATES earlier (A, B) pairs of the same step model on other
#   allocations (runs 1 and 3, after a conditioning run), at the gate's sigma ("same"),
#   half of it ("x0.5", a history quieter than the gate) or double ("x2");
# * the sequential policy runs through next_roles exactly as a driver would: the first
#   look's roles, then one X + control pair per call until next_roles is empty; the
#   stored verdict is judge() of the runs made. Fixed patterns start at run 0 (they get
#   the first-run effect on their first A).

SEQ_SIGMAS_PCT = (0.04, 0.1, 0.2, 0.25, 0.5, 1.0, 1.5)
FIRST_RUN_PCT = 0.4
BIMODAL_HIGH = 1.12
SEQ_EFFECTS_PCT = {"normal": (0.0, 0.5, 1.0, 2.0), "bimodal": (0.0, 1.0)}
SEQ_HISTORY = {"normal": ("none", "same", "x0.5", "x2", "s50"),
               "bimodal": ("none", "same", "x0.5")}
HISTORY_FACTOR = {"same": 1.0, "x0.5": 0.5, "x2": 2.0, "s50": 1.0}
HISTORY_PAIRS = {"same": HISTORY_GATES, "x0.5": HISTORY_GATES, "x2": HISTORY_GATES, "s50": 50}


def _seq_effects(model: str, hist_mode: str) -> tuple[float, ...]:
    """Effects (percent speedup) simulated in a cell: the 50-pair history only at 0 and 1%."""
    return (0.0, 1.0) if hist_mode == "s50" else SEQ_EFFECTS_PCT[model]
FIXED_PATTERNS = ("AXB", "AXBXA", "AXBXAXB", "AXBXAXBXA")
ENGINE_CHECK_TRIALS = 150
"""Trials per cell and policy judged by the engine too (compared with the replicas)."""
LOOP_CHECK_TRIALS = 20
"""Of those, trials whose sequential gates also run the driver's next_roles loop."""


def _steps(rng: np.random.Generator, shape: tuple[int, ...], s_run: float, model: str,
           first_index: int) -> np.ndarray:
    """Per-step times (seconds), shape (..., runs, MEASURED_STEPS); run 0 of the
    allocation is index 0 - first_index along the runs axis."""
    n = shape[-1]
    index = np.arange(n) + first_index
    level = rng.normal(0.0, s_run / 100.0, size=shape) + index * TREND_PCT_PER_RUN / 100.0
    level = level + np.where(index == 0, np.log1p(-FIRST_RUN_PCT / 100.0), 0.0)
    noise = np.exp(rng.normal(0.0, STEP_NOISE_PCT / 100.0, size=shape + (MEASURED_STEPS,)))
    if model == "bimodal":
        noise *= np.where(rng.random(shape + (MEASURED_STEPS,)) < 0.5, 1.0, BIMODAL_HIGH)
    else:
        noise *= 1.0 + (HICCUP_PCT / 100.0) * (rng.random(shape + (MEASURED_STEPS,))
                                                < HICCUP_PROB)
    return np.exp(level)[..., None] * noise


def _run_stats(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, its exact-bootstrap standard error and the multimodal flag of every run,
    the same formulas as orchestrator.verdict.spread (checked in _check_run_stats)."""
    x = np.sort(steps, axis=-1)
    n = x.shape[-1]
    m = int(n / 2 + 0.5)
    cdf = stats.beta.cdf(np.arange(n + 1) / n, m, n - m + 1)
    w = np.diff(cdf)
    first = x @ w
    se = np.sqrt(np.maximum(((x - first[..., None]) ** 2) @ w, 0.0))
    kmin = max(3, int(np.ceil(0.2 * n)))
    ks = np.arange(kmin, n - kmin + 1)
    csum = np.cumsum(x, axis=-1)
    low = csum[..., ks - 1] / ks
    high = (csum[..., -1:] - csum[..., ks - 1]) / (n - ks)
    best = ks[np.argmax(ks * (n - ks) / n * (high - low) ** 2, axis=-1)]
    in_low = np.arange(n) < best[..., None]
    mean_low = np.sum(x * in_low, -1) / best
    mean_high = np.sum(x * ~in_low, -1) / (n - best)
    var_low = np.sum(((x - mean_low[..., None]) * in_low) ** 2, -1) / (best - 1)
    var_high = np.sum(((x - mean_high[..., None]) * ~in_low) ** 2, -1) / (n - best - 1)
    gap = mean_high - mean_low
    within = var_low + var_high
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = np.where(within > 0, np.sqrt(2.0) * gap / np.sqrt(within), np.inf)
    multimodal = (gap >= 0.001 * mean_low) & (dist >= 5.0)
    return np.median(steps, axis=-1), se, multimodal


def _check_run_stats(rng: np.random.Generator) -> int:
    """Compare _run_stats with the engine's run_statistics on 2000 simulated runs."""
    mismatches = 0
    for model in ("normal", "bimodal"):
        steps = _steps(rng, (1000, 1), 0.25, model, 1)[:, 0, :]
        med, se, mm = _run_stats(steps)
        for i in range(steps.shape[0]):
            ref = run_statistics(steps[i].tolist(), num_warmup_steps=0)
            close = abs(ref.median_step_s - med[i]) < 1e-12 and abs(ref.median_se_s - se[i]) < 1e-9
            mismatches += (not close) or ref.multimodal != bool(mm[i])
    return mismatches


def _summaries(policy, roles: tuple[str, ...], med: np.ndarray, se: np.ndarray,
               mm: np.ndarray, factor: float) -> list[RunSummary]:
    """RunSummary objects of the first len(roles) simulated runs (X runs x factor)."""
    out = []
    for i, role in enumerate(roles):
        k = factor if role == "X" else 1.0
        out.append(RunSummary(role=role, order=i, median_step_s=float(med[i] * k),
                              median_se_s=float(se[i] * k), num_measured_steps=MEASURED_STEPS,
                              multimodal=bool(mm[i])))
    return out


def _run_sequential_loop(policy, med: np.ndarray, se: np.ndarray, mm: np.ndarray,
                         factor: float, history) -> tuple[str, int]:
    """One gate through the driver's loop: run the roles next_roles asks for (X runs are
    the candidate, step time x factor), call it again, until it is empty; then judge."""
    roles = tuple(next_roles(None, policy))
    while True:
        measurement = GateMeasurement(runs=tuple(_summaries(policy, roles, med, se, mm, factor)))
        more = next_roles(measurement, policy, history=history)
        if not more:
            break
        roles += tuple(more)
    return judge(measurement, policy, history=history).verdict, len(roles)


def _run_sequential(policy, med: np.ndarray, se: np.ndarray, mm: np.ndarray, factor: float,
                    history) -> tuple[str, int]:
    """The same gate judged ONCE on its whole planned pattern: the engine walks the looks
    in order and stops at the first crossing, so the verdict and the runs used
    (``num_runs_used``) equal the driver loop's (checked on the first trials of every cell,
    ``_run_sequential_loop``) at one engine call instead of one per look."""
    roles = planned_roles(initial_roles(policy), policy.max_runs)
    measurement = GateMeasurement(runs=tuple(_summaries(policy, roles, med, se, mm, factor)))
    verdict = judge(measurement, policy, history=history)
    return verdict.verdict, int(verdict.to_dict()["num_runs_used"])


def _seq_cell(args: tuple) -> dict[str, dict[str, object]]:
    """One cell: every trial judged by the vectorized replicas (``verdict_vector.py``);
    the first ENGINE_CHECK_TRIALS trials also by the engine's judge() (one call on the
    whole planned pattern) and the first LOOP_CHECK_TRIALS by the driver's next_roles
    loop; disagreements are counted under ``_check``."""
    s_run, model, hist_mode, effect_pct, trials, seed = args
    rng = np.random.default_rng(seed)
    variants = {"sequential": get_policy("sequential")}
    fixed = {"drift": get_policy("drift"), "ratio-ci": get_policy("ratio-ci")}
    if model == "normal" and hist_mode in ("none", "same"):
        variants["sequential(no cond.)"] = get_policy("sequential", num_conditioning_runs=0)
    n_max = max([p.max_runs for p in variants.values()] + [len(FIXED_PATTERNS[-1])])
    med, se, mm = _run_stats(_steps(rng, (trials, n_max), s_run, model, 0))
    factor = 1.0 + effect_pct / 100.0
    hist_ss, hist_dof, histories = None, 0, [None] * min(trials, ENGINE_CHECK_TRIALS)
    if hist_mode != "none":
        h_med, _, _ = _run_stats(_steps(rng, (trials, HISTORY_PAIRS[hist_mode], 2), s_run
                                        * HISTORY_FACTOR[hist_mode], model, 1))
        logs = np.log(h_med)
        hist_ss = np.sum((logs - logs.mean(axis=-1, keepdims=True)) ** 2, axis=(-1, -2))
        hist_dof = HISTORY_PAIRS[hist_mode]
        histories = [ControlHistory(pairs=tuple(map(tuple, h_med[t].tolist())))
                     for t in range(len(histories))]
    out: dict[str, dict[str, object]] = {"_check": {"engine": 0, "loop": 0, "n_engine": 0,
                                                     "n_loop": 0}}
    check = out["_check"]

    def record(name: str, verdicts: np.ndarray, runs_used: np.ndarray) -> None:
        names, counts = np.unique(verdicts.astype(str), return_counts=True)
        out[name] = {"verdicts": dict(zip(names.tolist(), counts.tolist())),
                     "runs": runs_used}

    for name, policy in variants.items():
        roles = planned_roles(initial_roles(policy), policy.max_runs)
        is_x = np.array([r == "X" for r in roles])
        logm = np.log(np.where(is_x, med[:, : len(roles)] * factor, med[:, : len(roles)]))
        verdicts, runs = vv.sequential_verdicts(policy, roles, len(initial_roles(policy)) - 3,
                                                logm, se[:, : len(roles)] / med[:, : len(roles)],
                                                hist_ss, hist_dof)
        record(name, verdicts, runs)
        for t, hist in enumerate(histories):
            one = _run_sequential(policy, med[t], se[t], mm[t], factor, hist)
            check["n_engine"] += 1  # type: ignore[operator]
            check["engine"] += one != (verdicts[t], int(runs[t]))  # type: ignore[operator]
            if t < LOOP_CHECK_TRIALS:
                loop = _run_sequential_loop(policy, med[t], se[t], mm[t], factor, hist)
                check["n_loop"] += 1  # type: ignore[operator]
                check["loop"] += loop != one  # type: ignore[operator]
    for pattern in FIXED_PATTERNS:
        is_x = np.array([r == "X" for r in pattern])
        m = np.where(is_x, med[:, : len(pattern)] * factor, med[:, : len(pattern)])
        const = np.full(trials, len(pattern))
        todo = []
        if hist_mode == "none":
            todo.append((f"drift {pattern}", vv.drift_verdicts(fixed["drift"], pattern, m),
                         fixed["drift"]))
        if pattern in ("AXB", "AXBXAXB") and hist_mode in ("none", "same"):
            todo.append((f"ratio-ci {pattern}", vv.ratio_ci_verdicts(
                fixed["ratio-ci"], pattern, m, hist_ss, hist_dof), fixed["ratio-ci"]))
        for name, verdicts, policy in todo:
            record(name, verdicts, const)
            for t, hist in enumerate(histories):
                gate = measurement_from_pattern(pattern, m[t].tolist())
                check["n_engine"] += 1  # type: ignore[operator]
                check["engine"] += judge(gate, policy, history=hist).verdict != verdicts[t]  # type: ignore[operator]
    return out


def _summary(cell: dict[str, object], trials: int) -> dict[str, float]:
    verdicts: dict[str, int] = cell["verdicts"]  # type: ignore[assignment]
    runs = np.array(cell["runs"])
    out = {k: 100.0 * verdicts.get(k, 0) / trials
           for k in ("accept", "reject", "neutral", "inconclusive")}
    out["runs_mean"], out["runs_p95"] = float(runs.mean()), float(np.percentile(runs, 95))
    return out


def _sequential_suite(args: argparse.Namespace) -> None:
    started = time.monotonic()
    sigmas = tuple(float(x) for x in args.sigmas.split(","))
    mismatches = _check_run_stats(np.random.default_rng(args.seed - 2))
    jobs = []
    for mi, model in enumerate(SEQ_EFFECTS_PCT):
        for hi, hist_mode in enumerate(SEQ_HISTORY[model]):
            for si, s_run in enumerate(sigmas):
                for ei, effect in enumerate(_seq_effects(model, hist_mode)):
                    seed = args.seed + 100000 * mi + 10000 * hi + 100 * si + ei
                    jobs.append((s_run, model, hist_mode, -effect, args.trials, seed))
    with multiprocessing.Pool(args.workers) as pool:
        results = pool.map(_seq_cell, jobs, chunksize=1)
    checks = [r.pop("_check") for r in results]
    engine_checked, engine_mismatch = (sum(c["n_engine"] for c in checks),
                                       sum(c["engine"] for c in checks))
    loop_checked, loop_mismatch = sum(c["n_loop"] for c in checks), sum(c["loop"] for c in checks)
    table = {(j[0], j[1], j[2], -j[3]): {k: _summary(v, args.trials) for k, v in r.items()}
             for j, r in zip(jobs, results)}
    sd_rng = np.random.default_rng(args.seed - 1)
    run_sd = {}
    for model in SEQ_EFFECTS_PCT:
        for s_run in sigmas:
            med, _, _ = _run_stats(_steps(sd_rng, (20000, 1), s_run, model, 1))
            run_sd[(s_run, model)] = 100.0 * float(np.log(med).std(ddof=1))
    policy = get_policy("sequential")
    print("# verdict_power --suite sequential: the calibrated sequential policy (issue 12)")
    print(f"# date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}")
    print(f"# machine: {platform.node()} {platform.machine()} {platform.processor() or ''} "
          f"cpus={os.cpu_count()} python={platform.python_version()} numpy={np.__version__}")
    print(f"# command (cwd = repository root): PYTHONPATH=. {sys.executable} "
          f"{' '.join(sys.argv)}")
    print(f"# effective arguments: --suite sequential --trials {args.trials} --seed {args.seed} "
          f"--workers {args.workers} --sigmas {args.sigmas}")
    print(f"# default policy: sequential v{policy.version} {policy.params()}")
    print(f"# model: sigma = run-level sd (the fixed suite's drift level); run_sd = total sd of "
          f"log run medians it gives; trend {TREND_PCT_PER_RUN}%/run; first run of every "
          f"allocation {FIRST_RUN_PCT}% faster; {MEASURED_STEPS} steps/run, per-step sd "
          f"{STEP_NOISE_PCT}%; normal: hiccups {HICCUP_PROB:.0%} x +{HICCUP_PCT}%; bimodal: "
          f"steps 1.00 or {BIMODAL_HIGH} at random; history {HISTORY_GATES} (A, B) pairs at "
          "the gate's sigma (same), half (x0.5) or double (x2)")
    print(f"# run statistics vectorized here vs the engine's run_statistics: {mismatches} "
          "mismatches in 2000 runs")
    print(f"# verdicts: vectorized replicas of the engine (benchmarks/verdict_vector.py) vs the "
          f"engine's judge() on the first {ENGINE_CHECK_TRIALS} trials of every cell and policy: "
          f"{engine_mismatch} mismatches (verdict, or runs used) in {engine_checked} gates")
    print(f"# engine: sequential gates judged once on their whole planned pattern (it stops at "
          f"the first crossing) vs the driver's next_roles loop: {loop_mismatch} mismatches in "
          f"{loop_checked} gates ({LOOP_CHECK_TRIALS} per cell and variant)")
    print(f"# trials per cell: {args.trials}. FA/FR/neu/inc = accept/reject/neutral/"
          "inconclusive at no effect, %; pow@e = accept when the candidate is e% faster, %;")
    print("# runs = runs used per decision (conditioning run included), mean and 95th "
          "percentile, at no effect (@0) and at a 1% speedup (@1)")
    print()
    _print_seq_table(table, sigmas, run_sd)
    _print_goals(table, sigmas, run_sd, args.trials)
    print(f"# runtime {time.monotonic() - started:.1f} s")


def _cell_pct(values: dict[float, float], key: float) -> str:
    return f"{values[key]:>6.1f}" if key in values else f"{'-':>6}"


def _print_seq_table(table: dict, sigmas: tuple[float, ...], run_sd: dict) -> None:
    head = (f"{'sigma':>5} {'run_sd':>6} {'steps':<7} {'hist':<5} {'policy':<22} {'FA%':>5} "
            f"{'FR%':>5} {'neu%':>5} {'inc%':>5} {'runs@0':>6} {'p95':>4} {'pow@.5':>6} "
            f"{'pow@1':>6} {'runs@1':>6} {'p95':>4} {'pow@2':>6}")
    for model in SEQ_EFFECTS_PCT:
        for hist_mode in SEQ_HISTORY[model]:
            print(head)
            for s_run in sigmas:
                zero = table[(s_run, model, hist_mode, 0.0)]
                for name in zero:
                    z = zero[name]
                    one = table[(s_run, model, hist_mode, 1.0)][name]
                    pw = {e: table[(s_run, model, hist_mode, e)][name]["accept"]
                          for e in _seq_effects(model, hist_mode) if e}
                    print(f"{s_run:>5.2f} {run_sd[(s_run, model)]:>6.3f} {model:<7} "
                          f"{hist_mode:<5} {name:<22} {z['accept']:>5.2f} {z['reject']:>5.2f} "
                          f"{z['neutral']:>5.1f} {z['inconclusive']:>5.1f} "
                          f"{z['runs_mean']:>6.2f} {z['runs_p95']:>4.0f} {_cell_pct(pw, 0.5)} "
                          f"{one['accept']:>6.1f} {one['runs_mean']:>6.2f} "
                          f"{one['runs_p95']:>4.0f} {_cell_pct(pw, 2.0)}")
            print()


def _print_goals(table: dict, sigmas: tuple[float, ...], run_sd: dict, trials: int) -> None:
    name = "sequential"
    zero = {k: v[name] for k, v in table.items() if k[3] == 0.0}
    worst_fa = max(zero.items(), key=lambda kv: kv[1]["accept"])
    worst_fr = max(zero.items(), key=lambda kv: kv[1]["reject"])
    bad = sorted(k for k, v in zero.items() if v["accept"] > 1.0 or v["reject"] > 1.0)
    print("# goals (issue 12), default policy `sequential`; Monte Carlo SE of a rate near 1%: "
          f"{100 * (0.01 * 0.99 / trials) ** 0.5:.2f} points")
    print(f"# 1. FA <= 1% and FR <= 1% at no effect in every cell: max FA {worst_fa[1]['accept']:.2f}%"
          f" {worst_fa[0][:3]}, max FR {worst_fr[1]['reject']:.2f}% {worst_fr[0][:3]}; "
          f"{len(bad)} of {len(zero)} cells above 1%: "
          + (", ".join(f"{k[0]:g}/{k[1]}/{k[2]} (FA {zero[k]['accept']:.2f}, FR "
                       f"{zero[k]['reject']:.2f})" for k in bad) or "none"))
    for hist_mode in ("none", "same", "s50", "x0.5", "x2"):
        rows = [(s, table[(s, "normal", hist_mode, 1.0)][name]) for s in sigmas]
        print(f"# 2. power at a 1% speedup, history {hist_mode}: " + ", ".join(
            f"sigma {s:g} (run_sd {run_sd[(s, 'normal')]:.2f}) {r['accept']:.1f}% in "
            f"{r['runs_mean']:.2f} runs (p95 {r['runs_p95']:.0f})" for s, r in rows
            if s <= 0.25))
    print("# 3. goal: sigma 0.25 -> <= 5 runs on average with history, <= 9 without (and power "
          ">= 95% whenever sigma <= 0.25): see the rows above; sigma is the run-level sd,")
    print("#    run_sd the total sd of a run median (what 2xH200 measured as ~0.2%).")


if __name__ == "__main__":
    main()
