"""Information bounds on runs per decision for the sequential policy's goals (issue 12).

Usage::

    .venv/bin/python benchmarks/verdict_bounds.py [--samples N] [--seed S]

Two lower bounds on the mean number of runs (first run of the allocation included) to
accept a candidate 1% faster at the model's sigma 0.25% (``verdict_noise.py``, normal
family), for any rule that keeps false accepts <= ``ALPHA`` and that judges ratios
(invariant to the step time's scale) without assuming the size of the first-run effect
(so the allocation's first run, whose offset is unknown, carries no information):

* E[N] = sum_m P(N > m) >= 3 + sum_{k >= 2} (1 - p_k), p_k the largest probability of an
  accept that uses k runs after the first one (it needs an X and a control).
* With history: p_k is bounded by the Neyman-Pearson lemma (Lehmann & Romano, Testing
  Statistical Hypotheses, 3rd ed., thm 3.2.1) between two cells of the model whose
  history is identically distributed: "same" history at sigma 0.25 (gate run sd 0.288%,
  effect -1%) and "x0.5" history at sigma 0.5 (gate run sd 0.515%, no effect, history run
  sd 0.287%). A rule with FA <= ALPHA in the x0.5 cell cannot accept more often than the
  most powerful test of the two gate distributions, given the sufficient statistics of k
  runs (effect estimate D ~ N(delta, v s^2), residual SS ~ s^2 chi2(k - 2); the trend is
  taken as known, which only helps the rule). The history cannot tell the cells apart.
* Without history: sigma is unknown and only the gate's runs estimate it; the uniformly
  most powerful scale-invariant one-sided test at k runs is the t test (Lehmann & Romano
  sec. 6.4), p_k = P(noncentral t(k - 3 or k - 2, delta / se) > t_ALPHA) with the trend
  fitted (or known). Each p_k gets the whole ALPHA: a sequential rule has less.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import verdict_noise as vn  # noqa: E402

ALPHA = 0.01
EFFECT_LOG_PCT = -math.log(0.99) * 100.0
MAX_USED = 14


def _run_sd(rng: np.random.Generator, sigma: float) -> float:
    """sd in % of log run medians of the suite's normal family at cell sigma ``sigma`` %
    (``verdict_noise.simulated_runs``: 5 steps of 0.2% sd, total sd = the cell's sigma)."""
    log_med, _ = vn.simulated_runs(rng, "normal", sigma / 100.0, (40000, 1))
    return 100.0 * float(log_med.std(ddof=1))


def _split(k: int) -> float:
    """Variance factor of the best X/control split of k runs: 1/nX + 1/nC."""
    nx = k // 2
    return 1.0 / nx + 1.0 / (k - nx)


def _np_power(rng: np.random.Generator, s0: float, s1: float, k: int, samples: int) -> float:
    """Most powerful test of (D, SS) at k runs: H0 sd s0, no effect; H1 sd s1, effect."""
    v, dof = _split(k), k - 2

    def llr(d: np.ndarray, ss: np.ndarray) -> np.ndarray:
        out = stats.norm.logpdf(d, -EFFECT_LOG_PCT, s1 * math.sqrt(v))
        out -= stats.norm.logpdf(d, 0.0, s0 * math.sqrt(v))
        if dof > 0:
            out += stats.chi2.logpdf(ss / s1**2, dof) - 2 * math.log(s1)
            out -= stats.chi2.logpdf(ss / s0**2, dof) - 2 * math.log(s0)
        return out

    def draw(s: float, mean: float) -> tuple[np.ndarray, np.ndarray]:
        d = rng.normal(mean, s * math.sqrt(v), samples)
        ss = s**2 * rng.chisquare(dof, samples) if dof > 0 else np.zeros(samples)
        return d, ss

    null = llr(*draw(s0, 0.0))
    alt = llr(*draw(s1, -EFFECT_LOG_PCT))
    return float(np.mean(alt > np.quantile(null, 1.0 - ALPHA)))


def _t_power(s: float, k: int, trend_fitted: bool) -> float:
    dof = k - 2 - (1 if trend_fitted and k >= vp_trend_min() else 0)
    if dof < 1:
        return 0.0
    ncp = EFFECT_LOG_PCT / (s * math.sqrt(_split(k)))
    return float(stats.nct.sf(stats.t.isf(ALPHA, dof), dof, ncp))


def vp_trend_min() -> int:
    """Used runs from which the engine fits a trend (orchestrator.verdict.seqfit)."""
    from orchestrator.verdict.seqfit import TREND_MIN_RUNS

    return TREND_MIN_RUNS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--cost", default="6.0,8.0,4.2", metavar="HEALTH,FIXED,WINDOW",
                        help="seconds of one GPU: the allocation's health gate, a run's "
                             "fixed cost + warmup, a run's window (default: measured on 1xH200 "
                             "at the defaults, benchmarks/results/decision_cost_h200x1_2026-12-02)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    same = _run_sd(rng, 0.25)
    x05_gate, x05_hist = _run_sd(rng, 0.5), _run_sd(rng, 0.25)
    hist_same = same
    print("# verdict_bounds: information bounds on runs per 1% decision (issue 12)")
    print(f"# date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}")
    print(f"# machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()} "
          f"python={platform.python_version()} numpy={np.__version__}")
    print(f"# command (cwd = repository root): PYTHONPATH=. {sys.executable} {' '.join(sys.argv)}")
    print(f"# effective arguments: --samples {args.samples} --seed {args.seed}; FA bound "
          f"ALPHA = {ALPHA}; effect ln(0.99) = -{EFFECT_LOG_PCT:.4f}%")
    print(f"# run sd of log run medians (model of verdict_noise.py, normal family, 40000 runs):"
          f" same cell sigma 0.25: gate {same:.3f}%, history {hist_same:.3f}%; x0.5 cell "
          f"sigma 0.5: gate {x05_gate:.3f}%, history (sigma 0.25) {x05_hist:.3f}%")
    print()
    print(" k runs after the first | p_k with history (NP)| p_k no history, trend fitted | "
          "trend known")
    bound_hist, bound_fit, bound_known = 3.0, 3.0, 3.0
    for k in range(2, MAX_USED + 1):
        p_np = _np_power(rng, x05_gate, same, k, args.samples)
        p_fit, p_known = _t_power(same, k, True), _t_power(same, k, False)
        bound_hist += 1.0 - p_np
        bound_fit += 1.0 - p_fit
        bound_known += 1.0 - p_known
        print(f" {k:>2} (N = {k + 1:>2})            | {p_np:>20.3f} | {p_fit:>28.3f} | "
              f"{p_known:>11.3f}")
    print()
    print(f"# mean runs to a 1% accept at sigma 0.25 (N counts the first run), lower bounds: "
          f"with history, FA <= {ALPHA:.0%} also in the x0.5 cell: >= {bound_hist:.2f} "
          f"(goal <= 5); without history: >= {bound_fit:.2f} with the trend fitted, "
          f">= {bound_known:.2f} with the trend known (goal <= 9)")
    health_s, fixed_s, window_s = (float(x) for x in args.cost.split(","))
    gpu_s = lambda runs: health_s + runs * (fixed_s + window_s)  # noqa: E731
    print(f"# the same bounds in GPU-seconds per decision on one GPU (health {health_s:g} s + "
          f"runs x ({fixed_s:g} s fixed + warmup + {window_s:g} s window)): with history "
          f">= {gpu_s(bound_hist):.1f}; without history >= {gpu_s(bound_fit):.1f} (trend "
          f"fitted), >= {gpu_s(bound_known):.1f} (trend known)")


if __name__ == "__main__":
    main()
