"""Building blocks of a ``sequential`` look, on arrays of gates: designs, least squares,
two-group splits, the split probability table, and the planned schedule of boundaries.

See ``seqcore.py`` for the method. Pure numpy/scipy; every function works on T gates at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as _stats

from orchestrator.verdict.boundaries import NO_BOUNDARY, spent_alpha, z_boundaries_spending
from orchestrator.verdict.design import CANDIDATE
from orchestrator.verdict.policy import SequentialPolicy

TREND_MIN_RUNS = 5
"""Included runs from which a linear trend is fitted."""
STATE_MIN_RUNS = 7
"""Included runs from which two run states may be fitted (fewer: too few to tell)."""
MAX_LOG = 700.0
"""Cap of log-scale interval bounds (keeps exp() finite for JSON)."""

@dataclass(frozen=True)
class Schedule:
    """Boundaries of the looks of one planned pattern.

    Look k is reached when 3 + 2k runs are included (A X B, then one pair per look).
    """

    z: tuple[float, ...]
    """Boundary of each look, standard-normal scale (NO_BOUNDARY: spends no error)."""
    fractions: tuple[float, ...]
    """Information fraction of each look (final planned variance / look variance)."""
    early: tuple[bool, ...]
    """True for a look that may decide only with a consistent history."""
    alpha_spent: tuple[float, ...]
    """Cumulative one-sided error spent up to each look."""


def design_columns(codes: np.ndarray, positions: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Design matrices (T, n, 3): intercept, candidate indicator, centred trend (or 0).

    Args:
        codes: Role codes (T, n), -1 pads.
        positions: Run positions (T, n), float.
        mask: Included runs (T, n).

    Returns:
        Float array (T, n, 3); the trend column is 0 below TREND_MIN_RUNS included runs.
    """
    n_inc = mask.sum(1)
    cols = np.zeros(codes.shape + (3,))
    cols[..., 0] = mask
    cols[..., 1] = mask & (codes == CANDIDATE)
    pos = np.where(mask, positions, 0.0)
    centre = pos.sum(1) / np.maximum(n_inc, 1)
    trend = np.where(mask, positions - centre[:, None], 0.0)
    cols[..., 2] = np.where((n_inc >= TREND_MIN_RUNS)[:, None], trend, 0.0)
    return cols


@lru_cache(maxsize=2048)
def schedule(codes: tuple[int, ...], num_cond: int, history_dof: int,
             policy: SequentialPolicy) -> Schedule:
    """Plan the boundaries of a gate's looks (its planned pattern and history size).

    Args:
        codes: The planned pattern, role codes, conditioning runs included.
        num_cond: Conditioning runs.
        history_dof: Degrees of freedom of the selected history (0: none).
        policy: Error, spending and look rules.

    A look spends error when its planned own dof plus the history dof it may add reach
    ``min_dof``; the early look (2 own dof, with ``early_history_dof`` > 0 and a history)
    spends ``early_alpha_fraction`` of alpha, the regular looks the rest by the spending
    function over their information fractions.

    Returns:
        The :class:`Schedule`.
    """
    used = np.array(codes[num_cond:])
    num_looks = (len(used) - 3) // 2 + 1
    var, dof = [], []
    for k in range(num_looks):
        n = 3 + 2 * k
        cols = design_columns(used[None, :n], np.arange(n, dtype=float)[None, :],
                               np.ones((1, n), bool))[0]
        cols = cols[:, np.any(cols != 0, axis=0)]
        var.append(float(np.linalg.inv(cols.T @ cols)[1, 1]))
        dof.append(n - cols.shape[1])
    fractions = tuple(min(1.0, var[-1] / v) for v in var)
    regular, early = [], []
    for k in range(num_looks):
        h = _history_dof(dof[k], history_dof, policy)
        is_early = (history_dof > 0 and policy.early_history_dof > 0 and dof[k] == 2
                    and dof[k] < policy.min_dof)
        early.append(is_early)
        regular.append(not is_early and dof[k] + h >= policy.min_dof)
    a_early = policy.alpha * policy.early_alpha_fraction if any(early) else 0.0
    a_reg = policy.alpha - a_early
    increments, cumulative, spent, last = [], [], 0.0, 0.0
    for k in range(num_looks):
        if early[k]:
            inc = a_early / sum(early)
        elif regular[k]:
            cum = spent_alpha(fractions[k], a_reg, policy.spending_gamma)
            inc, last = max(cum - last, 0.0), cum
        else:
            inc = 0.0
        spent += inc
        increments.append(inc)
        cumulative.append(spent)
    on = [k for k in range(num_looks) if increments[k] > 0.0]
    zs = z_boundaries_spending(tuple(fractions[k] for k in on), tuple(increments[k] for k in on))
    z = [NO_BOUNDARY] * num_looks
    for k, value in zip(on, zs):
        z[k] = value
    return Schedule(z=tuple(z), fractions=fractions, early=tuple(early),
                    alpha_spent=tuple(cumulative))


def _history_dof(gate_dof: int, history_dof: int, policy: SequentialPolicy) -> int:
    if history_dof <= 0 or gate_dof <= 0:
        return 0
    if math.isinf(policy.history_weight):
        return history_dof
    return max(0, min(history_dof, int(math.floor(policy.history_weight * gate_dof + 1e-9))))


def fit(cols: np.ndarray, y: np.ndarray, mask: np.ndarray):
    """Batched least squares; all-zero columns are unused. Returns coefficients, the
    candidate variance factor, RSS, dof, residuals, leverages, and a usable flag."""
    used = np.any(cols != 0, axis=1)
    gram = np.einsum("tnp,tnq->tpq", cols, cols) + np.einsum(
        "tp,pq->tpq", (~used).astype(float), np.eye(cols.shape[-1]))
    cond = np.linalg.cond(gram)
    usable = np.isfinite(cond) & (cond < 1e12)
    gram = np.where(usable[:, None, None], gram, np.eye(cols.shape[-1])[None])
    inv = np.linalg.inv(gram)
    coef = np.einsum("tpq,tnq,tn->tp", inv, cols, np.where(mask, y, 0.0))
    resid = np.where(mask, y - np.einsum("tnp,tp->tn", cols, coef), 0.0)
    rss = np.sum(resid**2, axis=1)
    dof = mask.sum(1) - used.sum(1)
    lev = np.einsum("tnp,tpq,tnq->tn", cols, inv, cols)
    return coef, inv[:, 1, 1], rss, dof, resid, lev, usable


def best_split(values: np.ndarray, mask: np.ndarray, floor: np.ndarray):
    """Best two-group split of the included values: (upper-group mask, separation)."""
    T, n = values.shape
    n_inc = mask.sum(1)
    v = np.where(mask, values, np.inf)
    order = np.argsort(v, axis=1)
    vs = np.take_along_axis(v, order, 1)
    idx = np.arange(n)[None, :]
    best_sep = np.zeros(T)
    best_k = np.zeros(T, dtype=int)
    for k in range(2, n - 1):
        ok = (n_inc - k) >= 2
        lo = vs[:, :k]
        in_hi = (idx >= k) & (idx < n_inc[:, None])
        n_hi = np.maximum(n_inc - k, 1)
        hi_vals = np.where(in_hi, vs, 0.0)
        m_lo = lo.mean(1)
        m_hi = hi_vals.sum(1) / n_hi
        with np.errstate(invalid="ignore"):
            ss = np.sum((lo - m_lo[:, None]) ** 2, 1) + np.sum(
                np.where(in_hi, vs - m_hi[:, None], 0.0) ** 2, 1)
        sd = np.maximum(np.sqrt(ss / np.maximum(n_inc - 2, 1)), floor)
        sep = np.where(ok, (m_hi - m_lo) / sd, 0.0)
        better = ok & (sep > best_sep)
        best_sep = np.where(better, sep, best_sep)
        best_k = np.where(better, k, best_k)
    rank = np.argsort(order, axis=1)
    upper = (rank >= best_k[:, None]) & mask
    return upper, best_sep


def misplaced(values: np.ndarray, is_x: np.ndarray, is_c: np.ndarray) -> np.ndarray:
    """Fewest runs that must change side for every candidate to lie above every control."""
    valid = is_x | is_c
    order = np.argsort(np.where(valid, values, np.inf), axis=1)
    x_sorted = np.take_along_axis(is_x, order, 1).astype(int)
    c_sorted = np.take_along_axis(is_c, order, 1).astype(int)
    zeros = np.zeros((values.shape[0], 1), dtype=int)
    x_below = np.concatenate([zeros, np.cumsum(x_sorted, 1)], 1)
    c_below = np.concatenate([zeros, np.cumsum(c_sorted, 1)], 1)
    return np.min(x_below + (c_sorted.sum(1, keepdims=True) - c_below), axis=1)


@lru_cache(maxsize=1)
def split_probability_table(max_n: int = 24) -> np.ndarray:
    """max over p of P(at most m of n_x candidates and n_c controls on the wrong side)
    when each run is in the upper state with probability p independently: table[n_x, n_c, m].

    Candidates belong in the upper state (prob p), controls in the lower (1 - p);
    P(M <= m) = sum_{i + j <= m} Bin(i; n_x, 1 - p) Bin(j; n_c, p), maximised over a grid of
    p in [0.005, 0.995].
    """
    ps = np.linspace(0.005, 0.995, 199)
    table = np.ones((max_n + 1, max_n + 1, max_n + 1))
    for nx in range(max_n + 1):
        bx = _stats.binom.pmf(np.arange(nx + 1)[:, None], nx, 1.0 - ps[None, :])
        for nc in range(max_n + 1):
            bc = np.cumsum(_stats.binom.pmf(np.arange(nc + 1)[:, None], nc, ps[None, :]), 0)
            for m in range(max_n + 1):
                total = np.zeros_like(ps)
                for i in range(min(m, nx) + 1):
                    total += bx[i] * bc[min(m - i, nc)]
                table[nx, nc, m] = min(1.0, float(total.max()))
    return table


def t_isf(p: np.ndarray, dof: np.ndarray) -> np.ndarray:
    safe = np.maximum(dof, 1)
    with np.errstate(invalid="ignore"):
        out = _stats.t.isf(p, safe)
    return np.where(dof > 0, out, np.inf)


