"""Vectorized replicas of the engine's candidate verdicts, for the simulation benchmark only.

``verdict_power.py --suite sequential`` judges 6,000 gates per cell; one engine call per
gate and policy takes about 0.5 ms, i.e. most of an hour for the whole suite. These
functions apply the same formulas (``orchestrator.verdict.sequential``, ``calibration``,
``drift``, ``statistical``) to arrays of gates at once, reusing the engine's schedule,
designs and boundaries. They are NOT the engine: the benchmark compares them with
``judge()`` on the first trials of every cell and prints the number of mismatches.
Inputs are natural-log run medians (candidate runs already scaled by the true effect).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from orchestrator.verdict.boundaries import NO_BOUNDARY
from orchestrator.verdict.calibration import effective_history_dof
from orchestrator.verdict.looks import design, design_key
from orchestrator.verdict.policy import DriftPolicy, RatioCIPolicy, SequentialPolicy
from orchestrator.verdict.sequential import build_schedule
from orchestrator.verdict.sequential_rules import NOT_ENOUGH_LOG

MAX_LOG = 700.0


def _t_isf(p: float, dof: np.ndarray) -> np.ndarray:
    safe = np.maximum(dof, 1)
    return np.where(dof > 0, stats.t.isf(p, safe), np.inf)


def sequential_verdicts(policy: SequentialPolicy, roles: tuple[str, ...], num_cond: int,
                        logm: np.ndarray, rel_se: np.ndarray, hist_ss: np.ndarray | None,
                        hist_dof: int) -> tuple[np.ndarray, np.ndarray]:
    """Verdicts and runs used of candidate gates judged on their whole planned pattern.

    Args:
        policy: The sequential policy.
        roles: The planned pattern (conditioning runs included).
        num_cond: Conditioning runs.
        logm: Log run medians, shape (trials, len(roles)).
        rel_se: Median standard error / median of every run, same shape.
        hist_ss: Log sum of squares of each trial's selected history, shape (trials,), or None.
        hist_dof: Its degrees of freedom (0 without history).

    Returns:
        (verdict strings, runs used), each shape (trials,).
    """
    trials = logm.shape[0]
    hist_dof = hist_dof if hist_ss is not None else 0
    sched = build_schedule(roles[:num_cond + 3], num_cond, hist_dof, policy)
    assert sched.plan == tuple(roles), (sched.plan, roles)
    used, rel2 = logm[:, num_cond:], rel_se[:, num_cond:] ** 2
    last_z = next((z for z in reversed(sched.z) if z != NO_BOUNDARY), NO_BOUNDARY)
    verdict = np.full(trials, "", dtype=object)
    runs = np.full(trials, len(roles))
    open_ = np.ones(trials, dtype=bool)
    band = policy.neutral_band_pct
    lo_margin, hi_margin = math.log1p(-policy.min_effect_pct / 100), math.log1p(
        policy.min_effect_pct / 100)
    for k, end in enumerate(sched.ends):
        spec = design(design_key(roles[num_cond:num_cond + end]))
        y = used[:, :end]
        coef = y @ spec.solve.T
        resid = y - coef @ spec.matrix.T
        ss, g = np.sum(resid * resid, axis=1), spec.dof
        floor = np.maximum(policy.min_sigma_pct / 100.0, np.sqrt(np.mean(rel2[:, :end], axis=1)))
        h_eff = np.zeros(trials, dtype=int)
        if hist_dof > 0 and g > 0:
            f = (ss / g) / (hist_ss / hist_dof)
            keep = np.ones(trials, dtype=bool)
            if policy.history_check_alpha > 0:
                keep &= f <= stats.f.isf(policy.history_check_alpha, g, hist_dof)
            if policy.history_check_low_alpha > 0:
                keep &= ~(f < stats.f.ppf(policy.history_check_low_alpha, g, hist_dof))
            h_eff = np.where(keep, effective_history_dof(g, hist_dof, policy.history_weight), 0)
        dof = g + h_eff
        with np.errstate(divide="ignore", invalid="ignore"):
            total = ss + np.where(h_eff > 0, hist_ss * h_eff / max(hist_dof, 1)
                                  if hist_ss is not None else 0.0, 0.0)
            est = np.where(dof > 0, np.sqrt(total / np.maximum(dof, 1)), 0.0)
        se = np.maximum(est, floor) * math.sqrt(spec.var_factor)
        z = sched.z[k] if sched.z[k] != NO_BOUNDARY else last_z
        p = float(stats.norm.sf(z)) if z != NO_BOUNDARY else policy.alpha
        c = _t_isf(p, dof)
        half = np.minimum(c * se, MAX_LOG)
        low = np.maximum(coef[:, 1] - half, -MAX_LOG)
        high = np.minimum(coef[:, 1] + half, MAX_LOG)
        if sched.z[k] != NO_BOUNDARY:
            ok = open_ & np.isfinite(c)
            acc = ok & (high < lo_margin)
            rej = ok & ~acc & (low > hi_margin)
            neu = ok & ~acc & ~rej & (band > 0) & (low > math.log1p(-band / 100)) & (
                high < math.log1p(band / 100))
            for mask, name in ((acc, "accept"), (rej, "reject"), (neu, "neutral")):
                verdict[mask] = name
                runs[mask] = num_cond + end
            open_ &= ~(acc | rej | neu)
        if k == len(sched.ends) - 1:
            t_pow = _t_isf(1.0 - policy.mde_power, dof)
            mde_log = np.minimum((c + t_pow) * se, MAX_LOG)
            not_enough = ~np.isfinite(mde_log) | (mde_log > NOT_ENOUGH_LOG)
            mde = -np.expm1(-(mde_log - lo_margin)) * 100.0
            final = np.where(not_enough | (mde > policy.max_mde_pct), "inconclusive", "neutral")
            verdict[open_] = final[open_]
    return verdict, runs


def _brackets(pattern: str) -> list[int]:
    return [i for i, r in enumerate(pattern) if r == "X"]


def drift_verdicts(policy: DriftPolicy, pattern: str, med: np.ndarray) -> np.ndarray:
    """Verdicts of the drift rule (``drift.py``) for alternating patterns.

    Args:
        policy: The drift policy.
        pattern: E.g. ``AXBXA`` (every X between two controls).
        med: Run medians, seconds, shape (trials, len(pattern)), X already scaled.

    Returns:
        Verdict strings, shape (trials,).
    """
    xs = _brackets(pattern)
    mids = np.stack([(med[:, i - 1] + med[:, i + 1]) / 2.0 for i in xs], axis=1)
    cands = med[:, xs]
    deltas = (cands - mids) / mids * 100.0
    midpoint, candidate = mids.mean(axis=1), cands.mean(axis=1)
    controls = med[:, [i for i, r in enumerate(pattern) if r != "X"]]
    drift = (controls.max(axis=1) - controls.min(axis=1)) / midpoint * 100.0
    delta = (candidate - midpoint) / midpoint * 100.0
    conflict = (deltas < 0).any(axis=1) & (deltas > 0).any(axis=1)
    thr = np.maximum(drift, policy.min_effect_pct)
    return np.select([drift > policy.max_drift_pct, conflict, delta < -thr, delta > thr],
                     ["inconclusive", "neutral", "accept", "reject"], "neutral").astype(object)


def ratio_ci_verdicts(policy: RatioCIPolicy, pattern: str, med: np.ndarray,
                      hist_ss: np.ndarray | None, hist_dof: int) -> np.ndarray:
    """Verdicts of ``ratio-ci`` (``statistical.py``) for gates without per-run spread.

    Args:
        policy: The ratio-ci policy.
        pattern: Alternating pattern.
        med: Run medians, seconds, shape (trials, len(pattern)), X already scaled.
        hist_ss: Log sum of squares of each trial's history, or None.
        hist_dof: Its degrees of freedom.

    Returns:
        Verdict strings, shape (trials,).
    """
    xs = _brackets(pattern)
    weights = np.zeros(len(pattern))
    for i in xs:
        weights[i] += 1.0 / len(xs)
        weights[i - 1] -= 0.5 / len(xs)
        weights[i + 1] -= 0.5 / len(xs)
    logs = np.log(med)
    ctrl = logs[:, [i for i, r in enumerate(pattern) if r != "X"]]
    ss = np.sum((ctrl - ctrl.mean(axis=1, keepdims=True)) ** 2, axis=1)
    dof = ctrl.shape[1] - 1 + (hist_dof if hist_ss is not None else 0)
    if hist_ss is not None:
        ss = ss + hist_ss
    sigma = np.maximum(np.sqrt(ss / dof), policy.min_sigma_pct / 100.0)
    se = sigma * math.sqrt(float(np.sum(weights**2)))
    t_ci = float(stats.t.ppf(0.5 + policy.confidence / 2.0, dof))
    t_pow = float(stats.t.ppf(policy.mde_power, dof))
    d = logs @ weights
    half = np.minimum(t_ci * se, MAX_LOG)
    high, low = np.expm1(d + half) * 100.0, np.expm1(d - half) * 100.0
    mde = -np.expm1(-(-math.log1p(-policy.min_effect_pct / 100.0) + (t_ci + t_pow) * se)) * 100
    mids = np.stack([(med[:, i - 1] + med[:, i + 1]) / 2.0 for i in xs], axis=1)
    deltas = (med[:, xs] - mids) / mids * 100.0
    conflict = (deltas < 0).any(axis=1) & (deltas > 0).any(axis=1) \
        if policy.require_consistent_sign else np.zeros(len(d), dtype=bool)
    margin = policy.min_effect_pct
    return np.select(
        [conflict, high < -margin, low > margin, (t_ci + t_pow) * se > NOT_ENOUGH_LOG,
         mde > policy.max_mde_pct],
        ["neutral", "accept", "reject", "inconclusive", "inconclusive"], "neutral").astype(object)
