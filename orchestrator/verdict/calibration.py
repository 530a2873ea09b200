"""Run-to-run noise of a gate: its own residuals, consistent history, and a floor.

All spreads are of natural-log run medians (so sigma x 100 is about a percentage of
the step time). Model (DESIGN.md section 3 caution): a run median is the allocation's
level times exp(e), e ~ N(0, s^2) independently per run; s contains the per-step
noise of a median but also the run-to-run drift that per-step samples never see.

* Gate: the residual sum of squares of the least-squares fit of the gate's own runs
  (``sequential._fit``) and its degrees of freedom.
* History: each entry (controls of one earlier gate of the same control identity)
  contributes its sum of squared deviations from its own mean and len - 1 degrees of
  freedom; the most recent min(max_history_gates, available) entries are used.
* Consistency (two-sided): F = (gate SS / gate dof) / (history SS / history dof). When
  F exceeds the upper ``check_alpha`` quantile of F(gate dof, history dof) the gate is
  noisier than its history (a too-quiet history would make every interval
  overconfident); when F is below the lower ``check_low_alpha`` quantile the history is
  noisier than the gate (it would only cost power). Either way the history is dropped.
  Source: the variance-ratio F test (e.g. Montgomery, Design and Analysis of
  Experiments, sec. 2.6).
* Weight: a consistent history adds at most h_eff = min(history dof, floor(weight x
  gate dof)) degrees of freedom, its sum of squares scaled by h_eff / history dof (a
  power prior with a0 = h_eff / history dof: Ibrahim & Chen 2000, Stat. Sci. 15:46-60).
  Why capped: with few own degrees of freedom no check can tell a gate twice as noisy as
  its history (at the 5% level an F test on 1 dof keeps ~70% of them), and a full-weight
  history that under-states sigma by 2x gives 6-8% false decisions. The most powerful test that keeps
  false accepts <= 1% in such a gate decides a 1% effect at sigma 0.29% in at most 18% of
  gates after A X B (Neyman-Pearson bound, docs/design.md section 3.1), so history can
  only help once the gate has its own degrees of freedom.
* Pooled: s^2 = (gate SS + history SS x h_eff / history dof) / (gate dof + h_eff).
* Floor: s >= max(min_sigma_pct / 100, sqrt(mean_j (se_j / m_j)^2)), se_j the exact
  bootstrap standard error of run j's median from its own steps (``spread.py``): run
  medians cannot agree more closely than their own steps allow, so identical medians
  never mean zero noise, and bimodal runs (se about half the mode gap) never look quiet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from scipy import stats as _scipy_stats

from orchestrator.verdict.model import ControlHistory, RunSummary


@dataclass(frozen=True)
class HistorySelection:
    """The history entries a verdict may use, before the consistency check."""

    entries: tuple[tuple[float, ...], ...]
    """Most recent min(limit, available) entries, oldest first (seconds)."""
    gate_ids: tuple[str, ...]
    """Their ``ControlHistory.gate_ids`` (empty when none were given)."""
    num_available: int
    """Entries passed in."""
    sum_sq: float
    """Sum over entries of squared deviations of log medians from the entry mean."""
    dof: int
    """Sum over entries of (number of controls - 1)."""


def _sum_sq_dev(logs: Sequence[float]) -> float:
    mean = math.fsum(logs) / len(logs)
    return math.fsum((x - mean) ** 2 for x in logs)


def select_history(history: ControlHistory | None, limit: int) -> HistorySelection:
    """Take the most recent ``min(limit, available)`` history entries.

    Args:
        history: Earlier gates' control medians, oldest first, or None.
        limit: Most entries to use (0: none).

    Returns:
        The :class:`HistorySelection` with its log-scale sum of squares and dof.
    """
    entries = history.pairs if history is not None else ()
    ids = history.gate_ids if history is not None else ()
    count = min(limit, len(entries))
    start = len(entries) - count
    used = entries[start:] if count else ()
    used_ids = ids[start:] if (count and ids) else ()
    sum_sq = math.fsum(_sum_sq_dev([math.log(v) for v in entry]) for entry in used)
    return HistorySelection(
        entries=used,
        gate_ids=used_ids,
        num_available=len(entries),
        sum_sq=sum_sq,
        dof=sum(len(entry) - 1 for entry in used),
    )


def sigma_floor(runs: Sequence[RunSummary], min_sigma_pct: float) -> float:
    """Floor under the run-to-run sigma of log run medians (module docstring).

    Args:
        runs: The runs whose medians enter the estimate.
        min_sigma_pct: The policy's floor, percent, used when larger or when no run
            carries ``median_se_s``.

    Returns:
        The floor, natural-log units (about a fraction of the step time).
    """
    rel = [(r.median_se_s / r.median_step_s) ** 2 for r in runs if r.median_se_s is not None]
    from_runs = math.sqrt(math.fsum(rel) / len(rel)) if rel else 0.0
    return max(min_sigma_pct / 100.0, from_runs)


@lru_cache(maxsize=4096)
def _f_upper(check_alpha: float, gate_dof: int, history_dof: int) -> float:
    return float(_scipy_stats.f.isf(check_alpha, gate_dof, history_dof))


@dataclass(frozen=True)
class NoiseEstimate:
    """Run-to-run sigma of a look and where it came from."""

    sigma: float
    """Sigma of log run medians used for the interval (floor applied), log units."""
    dof: int
    """Degrees of freedom of ``sigma`` (gate + history used); 0 means unknown."""
    floor: float
    """The floor, log units."""
    gate_dof: int
    """Degrees of freedom from the gate's own runs."""
    history_dof: int
    """Degrees of freedom from the history used."""
    num_history_gates: int
    """History entries used."""
    check: str
    """``none``, ``consistent``, ``dropped`` or ``unchecked`` (see ``SequentialDetail``)."""
    check_f: float | None
    """Variance ratio gate / history, or None when the check did not run."""
    check_critical: float | None
    """Critical value of that ratio, or None."""
    source: str
    """``gate``, ``gate+history`` or ``floor`` (the floor was larger than the estimate)."""


def effective_history_dof(gate_dof: int, history_dof: int, weight: float) -> int:
    """Degrees of freedom a consistent history adds to a look (module docstring).

    Args:
        gate_dof: The look's own residual degrees of freedom.
        history_dof: Degrees of freedom of the selected history.
        weight: The policy's ``history_weight`` (inf: the whole history).

    Returns:
        min(history_dof, floor(weight x gate_dof)), >= 0.
    """
    if history_dof <= 0 or gate_dof <= 0:
        return 0
    if math.isinf(weight):
        return history_dof
    return max(0, min(history_dof, int(math.floor(weight * gate_dof + 1e-9))))


@lru_cache(maxsize=4096)
def _f_lower(check_alpha: float, gate_dof: int, history_dof: int) -> float:
    return float(_scipy_stats.f.ppf(check_alpha, gate_dof, history_dof))


def estimate_noise(
    gate_sum_sq: float,
    gate_dof: int,
    history: HistorySelection,
    floor: float,
    check_alpha: float,
    check_low_alpha: float = 0.0,
    weight: float = math.inf,
) -> NoiseEstimate:
    """Pool the gate's residual spread with consistent, weighted history; apply the floor.

    Args:
        gate_sum_sq: Residual sum of squares of the gate's own log medians.
        gate_dof: Its degrees of freedom (may be 0).
        history: The selected history (:func:`select_history`).
        floor: :func:`sigma_floor`, log units.
        check_alpha: Level of the upper-tail F test (gate noisier; 0: never drops).
        check_low_alpha: Level of the lower-tail F test (history noisier; 0: never drops).
        weight: Most history degrees of freedom per own degree of freedom (inf: all).

    Returns:
        The :class:`NoiseEstimate`; ``dof`` 0 when neither source has any.
    """
    check, check_f, critical = "none", None, None
    use_history = history.dof > 0
    if use_history and gate_dof > 0:
        gate_var = gate_sum_sq / gate_dof
        hist_var = history.sum_sq / history.dof
        check_f = gate_var / hist_var if hist_var > 0.0 else math.inf
        if check_alpha > 0.0:
            critical = _f_upper(check_alpha, gate_dof, history.dof)
            use_history = check_f <= critical
        if use_history and check_low_alpha > 0.0:
            low = _f_lower(check_low_alpha, gate_dof, history.dof)
            if check_f < low:
                use_history, critical = False, low
        check = "consistent" if use_history else "dropped"
        if not math.isfinite(check_f):
            check_f = None
    elif use_history:
        check = "unchecked"
    h_eff = effective_history_dof(gate_dof, history.dof, weight) if use_history else 0
    if check == "unchecked":
        h_eff = 0
    sum_sq = gate_sum_sq + (history.sum_sq * h_eff / history.dof if h_eff else 0.0)
    dof = gate_dof + h_eff
    estimate = math.sqrt(sum_sq / dof) if dof > 0 else 0.0
    source = "gate+history" if h_eff else "gate"
    if estimate < floor:
        source = "floor"
    return NoiseEstimate(
        sigma=max(estimate, floor),
        dof=dof,
        floor=floor,
        gate_dof=gate_dof,
        history_dof=h_eff,
        num_history_gates=len(history.entries) if h_eff else 0,
        check=check,
        check_f=check_f,
        check_critical=critical,
        source=source,
    )
