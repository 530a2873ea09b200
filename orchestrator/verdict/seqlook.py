"""One look of the ``sequential`` policy, on arrays of gates (steps 1-5 of ``seqcore.py``).

:func:`look` fits the included runs, then in order: (1) the outlier test, (2) two run
states, (3) sigma with a consistent history, (4) the interval and the crossing rules,
(5) the split guard. Every array has one entry per gate (shape (T,)) or one per gate and
run (shape (T, n)). Pure numpy/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _stats

from orchestrator.verdict.design import CANDIDATE, CONTROL
from orchestrator.verdict.policy import SequentialPolicy
from orchestrator.verdict.seqfit import (
    MAX_LOG,
    STATE_MIN_RUNS,
    best_split,
    design_columns,
    fit,
    misplaced,
    split_probability_table,
    t_isf,
)

__all__ = ["ACCEPT", "INCONCLUSIVE", "NEUTRAL", "REJECT", "VERDICT_NAMES", "LookArrays",
           "LookInput", "look"]

ACCEPT, REJECT, NEUTRAL, INCONCLUSIVE = 1, -1, 0, 9
"""Verdict codes; for ``regate`` gates ACCEPT = improvement, REJECT = regression,
NEUTRAL = pass."""
VERDICT_NAMES = {"candidate": {ACCEPT: "accept", REJECT: "reject", NEUTRAL: "neutral",
                               INCONCLUSIVE: "inconclusive"},
                 "regate": {ACCEPT: "improvement", REJECT: "regression", NEUTRAL: "pass",
                            INCONCLUSIVE: "inconclusive"}}


@dataclass
class LookInput:
    """The runs of one look of T gates."""

    codes: np.ndarray
    """Role codes of the used runs (T, n); -1 pads."""
    positions: np.ndarray
    """Position of each used run in its gate (T, n), float."""
    mask: np.ndarray
    """Included runs (T, n): used, not excluded, not padding."""
    y: np.ndarray
    """Log run medians (T, n) (0 where not included)."""
    rel_se: np.ndarray
    """Median standard error / median of each run (T, n) (0 when unknown)."""
    cond_y: np.ndarray
    """Log median of the (last) conditioning run (T,) (for the split guard)."""
    cond_pos: np.ndarray
    """Its position (T,), float."""
    cond_valid: np.ndarray
    """Whether the gate has a conditioning run (T,)."""
    z: np.ndarray
    """This look's boundary (T,), standard-normal scale (NO_BOUNDARY: spends nothing)."""
    last_z: np.ndarray
    """The last spending look's boundary (T,): the interval's level when z spends nothing."""
    early: np.ndarray
    """Whether this is the early look (T,)."""
    can_replace: np.ndarray
    """Whether an outlier may still be measured again (T,)."""
    history_ss: np.ndarray | None = None
    """Log sum of squares of each gate's selected history (T,), or None."""
    history_dof: int = 0
    """Its degrees of freedom."""


@dataclass
class LookArrays:
    """Everything one look computed, one entry per gate (arrays of shape (T,))."""

    effect: np.ndarray
    """Least-squares candidate minus control, log ratio."""
    se: np.ndarray
    """Standard error of ``effect``."""
    critical: np.ndarray
    """Multiplier of ``se`` (Student t at ``dof``; inf without degrees of freedom)."""
    low: np.ndarray
    """effect - critical se (capped at -700)."""
    high: np.ndarray
    """effect + critical se (capped at +700)."""
    sigma: np.ndarray
    """Run-to-run sigma used (history pooled, floor applied), log units."""
    gate_sigma: np.ndarray
    """The gate's own residual sigma, log units."""
    dof: np.ndarray
    """Degrees of freedom of ``sigma`` (gate + history)."""
    gate_dof: np.ndarray
    """The gate's own residual degrees of freedom."""
    history_dof: np.ndarray
    """Degrees of freedom the history added."""
    history_check: np.ndarray
    """0 none, 1 consistent, 2 dropped, 3 unchecked."""
    check_f: np.ndarray
    """Variance ratio gate / history (NaN when not checked)."""
    check_critical: np.ndarray
    """The F critical value crossed, or the upper one (NaN when not checked)."""
    floor: np.ndarray
    """Floor under sigma, log units."""
    z: np.ndarray
    """This look's boundary, standard-normal scale."""
    p: np.ndarray
    """Nominal one-sided level of the interval."""
    decides: np.ndarray
    """True when this look may decide (it spends error and found no outlier)."""
    outlier: np.ndarray
    """True: the look found an outlier (and decides nothing)."""
    outlier_pos: np.ndarray
    """Position of that run (-1: none)."""
    outlier_t: np.ndarray
    """Largest externally studentised residual."""
    outlier_critical: np.ndarray
    """Its critical value."""
    states: np.ndarray
    """True: two run states entered the fit."""
    state_separation: np.ndarray
    """Gap of the best two-group split over the pooled within-group sigma."""
    split_blocked: np.ndarray
    """True: the split guard held an accept/reject back."""
    split_p: np.ndarray
    """Probability that two run states line up with the roles at least this well."""
    mde_log: np.ndarray
    """(critical + t_power) se: the change detectable with the policy's power."""
    code: np.ndarray
    """ACCEPT / REJECT / NEUTRAL, or INCONCLUSIVE when undecided."""


def _outliers(policy: SequentialPolicy, li: LookInput, base: tuple, floor: np.ndarray,
              centred: np.ndarray) -> tuple[np.ndarray, ...]:
    """Step 1: (outlier flag, position, studentised residual, critical value)."""
    _, _, rss, dof, resid, lev, _ = base
    T = li.y.shape[0]
    rows = np.arange(T)
    none = (np.zeros(T, bool), np.full(T, -1), np.zeros(T), np.full(T, np.inf))
    if policy.max_replacements <= 0:
        return none
    n_inc = li.mask.sum(1)
    d1 = dof - 1
    one_minus_h = np.maximum(1.0 - lev, 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = (rss[:, None] - resid**2 / one_minus_h) / np.maximum(d1, 1)[:, None]
        s2 = np.maximum(s2, floor[:, None] ** 2)
        t_i = np.where(li.mask, np.abs(resid) / np.sqrt(s2 * one_minus_h), 0.0)
    j = np.argmax(t_i, axis=1)
    out_t = t_i[rows, j]
    out_crit = np.where(d1 >= 3, t_isf(policy.outlier_level / (2.0 * np.maximum(n_inc, 1)), d1),
                        np.inf)
    keep = li.mask.copy()
    keep[rows, j] = False
    cj = fit(design_columns(li.codes, li.positions, keep), li.y, keep)[0]
    detr = li.y - cj[:, 2:3] * centred
    vj = detr[rows, j]
    others = np.where(keep, detr, np.nan)
    with np.errstate(invalid="ignore"):
        apart = (vj > np.nanmax(others, 1)) | (vj < np.nanmin(others, 1))
        gap = np.nanmin(np.abs(others - vj[:, None]), 1)
    flag = li.can_replace & (out_t > out_crit) & apart & \
        (gap >= policy.outlier_gap * np.sqrt(s2[rows, j]))
    return flag, np.where(flag, li.positions[rows, j].astype(int), -1), out_t, out_crit


def _two_states(policy: SequentialPolicy, li: LookInput, base: tuple, cols: np.ndarray,
                detr: np.ndarray, floor: np.ndarray, outlier: np.ndarray):
    """Step 2: the fit with the state covariate where two states are found."""
    coef, vf, rss, dof = base[0], base[1], base[2], base[3]
    upper, separation = best_split(detr, li.mask, floor)
    is_x = li.mask & (li.codes == CANDIDATE)
    same = np.all(~li.mask | (upper == is_x), 1) | np.all(~li.mask | (upper == ~is_x), 1)
    states = ~outlier & (li.mask.sum(1) >= STATE_MIN_RUNS) & \
        (separation >= policy.state_separation) & ~same
    if states.any():
        extra = np.where(states[:, None], upper, False)[..., None].astype(float)
        c4, vf4, rss4, dof4, _, _, ok4 = fit(np.concatenate([cols, extra], axis=-1), li.y,
                                             li.mask)
        states &= ok4 & (dof4 >= 1)
        coef = np.where(states[:, None], c4[:, :3], coef)
        vf, rss, dof = (np.where(states, a, b) for a, b in ((vf4, vf), (rss4, rss), (dof4, dof)))
    return coef, vf, rss, dof, states, separation


def _sigma(policy: SequentialPolicy, li: LookInput, rss: np.ndarray, dof: np.ndarray,
           floor: np.ndarray) -> dict[str, np.ndarray]:
    """Step 3: sigma pooled with a history that passes the two-sided F check."""
    T = rss.shape[0]
    out = {"h_dof": np.zeros(T), "check": np.zeros(T, dtype=int), "check_f": np.full(T, np.nan),
           "check_crit": np.full(T, np.nan), "hist_sigma": np.full(T, np.inf)}
    pooled = rss.copy()
    hd = li.history_dof
    if li.history_ss is not None and hd > 0:
        hist_var = li.history_ss / hd
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (rss / np.maximum(dof, 1)) / hist_var
        upper_c = _stats.f.isf(policy.history_check_alpha, np.maximum(dof, 1), hd) \
            if policy.history_check_alpha > 0 else np.full(T, np.inf)
        lower_c = _stats.f.ppf(policy.history_check_low_alpha, np.maximum(dof, 1), hd) \
            if policy.history_check_low_alpha > 0 else np.zeros(T)
        has = dof > 0
        gate_noisier, hist_noisier = ratio > upper_c, ratio < lower_c
        kept = has & ~gate_noisier & ~hist_noisier
        out["check"] = np.where(~has, 3, np.where(kept, 1, 2))
        out["check_f"] = np.where(has & np.isfinite(ratio), ratio, np.nan)
        out["check_crit"] = np.where(has, np.where(hist_noisier & ~gate_noisier, lower_c,
                                                   upper_c), np.nan)
        weighted = np.minimum(hd, np.floor(policy.history_weight * dof + 1e-9)) \
            if math.isfinite(policy.history_weight) else np.full(T, float(hd))
        weighted = np.where(li.early, min(hd, policy.early_history_dof), weighted)
        out["h_dof"] = np.where(kept, np.maximum(weighted, 0.0), 0.0)
        pooled = rss + li.history_ss * out["h_dof"] / hd
        out["hist_sigma"] = np.where(kept, np.sqrt(hist_var), np.inf)
    tot = dof + out["h_dof"]
    sigma = np.maximum(np.sqrt(pooled / np.maximum(tot, 1)), floor)
    out["sigma"] = np.where(tot > 0, sigma, floor)
    out["tot_dof"] = tot
    return out


def _split_probability(li: LookInput, detr: np.ndarray, cond_detr: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Step 5's probabilities: candidates above (p_up) / below (p_down) every control."""
    T = detr.shape[0]
    values = np.concatenate([detr, cond_detr[:, None]], axis=1)
    xs = np.concatenate([li.mask & (li.codes == CANDIDATE), np.zeros((T, 1), bool)], axis=1)
    cs = np.concatenate([li.mask & (li.codes == CONTROL), li.cond_valid[:, None]], axis=1)
    table = split_probability_table()
    n_x = np.minimum(xs.sum(1), table.shape[0] - 1)
    n_c = np.minimum(cs.sum(1), table.shape[1] - 1)
    m_up = np.minimum(misplaced(values, xs, cs), table.shape[2] - 1)
    m_down = np.minimum(misplaced(-values, xs, cs), table.shape[2] - 1)
    return table[n_x, n_c, m_up], table[n_x, n_c, m_down]


def look(policy: SequentialPolicy, kind: str, li: LookInput) -> LookArrays:
    """Evaluate one look of T gates (steps 1-5 of ``seqcore.py``'s docstring).

    Args:
        policy: The sequential policy.
        kind: ``candidate`` or ``regate``.
        li: The runs of the look (:class:`LookInput`).

    Returns:
        The :class:`LookArrays`.
    """
    T = li.y.shape[0]
    n_inc = li.mask.sum(1)
    # floor: the median over the included runs of their own median errors (v2: the root mean
    # square, which one run with a hiccup among 5 steps, bootstrap error ~3.6%, dominated)
    rel = np.where(li.mask, li.rel_se, np.nan)
    with np.errstate(all="ignore"):
        run_floor = np.nan_to_num(np.nanmedian(np.where(np.isnan(rel).all(1, keepdims=True), 0.0,
                                                        rel), axis=1))
    floor = np.maximum(policy.min_sigma_pct / 100.0, run_floor)
    cols = design_columns(li.codes, li.positions, li.mask)
    base = fit(cols, li.y, li.mask)
    centre = np.where(li.mask, li.positions, 0.0).sum(1) / np.maximum(n_inc, 1)
    centred = li.positions - centre[:, None]
    outlier, out_pos, out_t, out_crit = _outliers(policy, li, base, floor, centred)
    detr = li.y - base[0][:, 2:3] * centred
    coef, vf, rss, dof, states, separation = _two_states(policy, li, base, cols, detr, floor,
                                                         outlier)
    sg = _sigma(policy, li, rss, dof, floor)
    tot_dof, sigma = sg["tot_dof"], sg["sigma"]
    decides = np.isfinite(li.z) & (tot_dof > 0) & ~outlier
    if li.early.any():  # the gate's own runs must back an early decision (early_gate_alpha)
        own_t = np.abs(coef[:, 1]) / (np.maximum(np.sqrt(rss / np.maximum(dof, 1)), floor)
                                      * np.sqrt(vf))
        own_ok = own_t > t_isf(np.full(T, policy.early_gate_alpha), dof)
        decides &= ~li.early | own_ok
    z_used = np.where(np.isfinite(li.z), li.z, li.last_z)
    p = np.where(np.isfinite(z_used), _stats.norm.sf(np.where(np.isfinite(z_used), z_used, 0.0)),
                 policy.alpha)
    crit = t_isf(p, tot_dof)
    effect = coef[:, 1]
    se = sigma * np.sqrt(vf)
    half = np.minimum(crit * se, MAX_LOG)
    low, high = np.maximum(effect - half, -MAX_LOG), np.minimum(effect + half, MAX_LOG)
    mde_log = np.minimum((crit + t_isf(np.full(T, 1.0 - policy.mde_power), tot_dof)) * se,
                         MAX_LOG)
    band = policy.neutral_band_pct / 100.0
    in_band = (low > math.log1p(-band)) & (high < math.log1p(band))
    if kind == "candidate":
        margin = policy.min_effect_pct / 100.0
        acc, rej = high < math.log1p(-margin), low > math.log1p(margin)
    else:
        tol = policy.tolerance_pct / 100.0
        acc = (high < 0.0) & (effect < math.log1p(-tol))
        rej = (low > 0.0) & (effect > math.log1p(tol))
    p_up, p_down = _split_probability(li, detr, li.cond_y - coef[:, 2] * (li.cond_pos - centre))
    guard = (np.abs(effect) > policy.split_effect_sigmas * sigma) & \
        ~(np.abs(effect) > policy.history_gap_sigmas * sg["hist_sigma"])
    block_acc, block_rej = guard & (p_down > policy.split_alpha), guard & (p_up > policy.split_alpha)
    split_blocked = decides & ((acc & block_acc) | (rej & block_rej))
    acc, rej = acc & ~block_acc, rej & ~block_rej
    code = np.full(T, INCONCLUSIVE)
    code = np.where(decides & in_band, NEUTRAL, code)
    code = np.where(decides & rej, REJECT, code)
    code = np.where(decides & acc, ACCEPT, code)
    return LookArrays(
        effect=effect, se=se, critical=crit, low=low, high=high, sigma=sigma,
        gate_sigma=np.sqrt(rss / np.maximum(dof, 1)), dof=tot_dof.astype(int),
        gate_dof=dof.astype(int), history_dof=sg["h_dof"].astype(int),
        history_check=sg["check"], check_f=sg["check_f"], check_critical=sg["check_crit"],
        floor=floor, z=li.z, p=p, decides=decides, outlier=outlier, outlier_pos=out_pos,
        outlier_t=out_t, outlier_critical=out_crit, states=states, state_separation=separation,
        split_blocked=split_blocked, split_p=np.where(effect < 0, p_down, p_up),
        mde_log=mde_log, code=code)
