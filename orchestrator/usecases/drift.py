"""Drift over time of a tracked branch: measured-head medians and their change points.

Series: one point per re-gate with a verdict, the candidate run median (seconds) and the
re-gate's delta. Medians of different re-gates come from different allocations, so the
series also carries ``cumulative_delta_pct``: each commit's delta added to its control's
cumulative value, which only ever compares runs of one allocation (DESIGN.md section 2).

Change points: ``ruptures`` PELT with the ``l2`` (mean-shift) cost, minimum segment
length 2, over the medians expressed in percent of the first median. Penalty: the
Schwarz/BIC choice for a Gaussian mean shift, ``pen = 2 * sigma^2 * ln(n)`` with sigma
in percent, estimated robustly from successive differences
(``1.4826 * MAD(diff) / sqrt(2)``) and floored at half the repository's re-gate
tolerance, so a perfectly quiet series does not split at every wiggle. A segment whose
mean moved more than the tolerance from the first segment, while no re-gate in between
reported a regression or improvement, is slow drift (``drift_flag``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.schemas.repos import DriftPointPublic, DriftPublic, DriftSegmentPublic

__all__ = ["BINSEG_METHOD", "ChangePoints", "detect_change_points", "detect_change_points_binseg",
           "drift_of_repository"]

METHOD = "ruptures PELT, l2 cost, min_size 2, pen = 2 sigma^2 ln(n), sigma >= tolerance/2 (percent)"


@dataclasses.dataclass(frozen=True)
class ChangePoints:
    """Result of :func:`detect_change_points`."""

    change_points: tuple[int, ...]
    """Indices where a new segment starts."""
    segments: tuple[tuple[int, int, float, float], ...]
    """(start, end exclusive, mean in input units, shift vs the first segment, percent)."""
    penalty: float | None
    """PELT penalty used (percent^2); None when the series is too short."""


def detect_change_points(values: list[float], *, tolerance_pct: float) -> ChangePoints:
    """Segment a series of medians by mean shifts (pure).

    Args:
        values: Medians in time order, seconds (any positive unit).
        tolerance_pct: Re-gate tolerance, percent; half of it floors the noise estimate.

    Returns:
        Change points and segments; a single segment when fewer than 4 points.

    Raises:
        ValueError: A value is not finite and positive.
    """
    if any(not (math.isfinite(v) and v > 0) for v in values):
        raise ValueError("medians must be finite and positive")
    n = len(values)
    if n == 0:
        return ChangePoints((), (), None)
    pct = (np.asarray(values, dtype=float) / values[0] - 1.0) * 100.0
    if n < 4:
        return ChangePoints((), ((0, n, float(np.mean(values)), float(np.mean(pct))),), None)
    import ruptures as rpt

    diffs = np.diff(pct)
    sigma = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2.0)
    sigma = max(sigma, tolerance_pct / 2.0, 1e-3)
    penalty = 2.0 * sigma**2 * math.log(n)
    ends = rpt.Pelt(model="l2", min_size=2, jump=1).fit(pct.reshape(-1, 1)).predict(pen=penalty)
    starts = [0, *ends[:-1]]
    first = float(np.mean(values[: ends[0]]))
    segments = tuple(
        (s, e, float(np.mean(values[s:e])), (float(np.mean(values[s:e])) / first - 1.0) * 100.0)
        for s, e in zip(starts, ends)
    )
    return ChangePoints(tuple(starts[1:]), segments, penalty)


BINSEG_METHOD = ("binary segmentation, l2 cost, min_size 2, pen = 2 sigma^2 ln(n), "
                 "sigma >= tolerance/2 (percent)")


def _noise_penalty(pct: np.ndarray, tolerance_pct: float) -> float:
    diffs = np.diff(pct)
    sigma = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2.0)
    sigma = max(sigma, tolerance_pct / 2.0, 1e-3)
    return 2.0 * sigma**2 * math.log(len(pct))


def detect_change_points_binseg(values: list[float], *, tolerance_pct: float,
                                min_size: int = 2) -> tuple[int, ...]:
    """Mean-shift change points of a long series in O(n log n) (pure).

    Binary segmentation (Scott and Knott 1974; see Truong, Oudre and Vayatis 2020, section
    5.2) with the ``l2`` cost evaluated from prefix sums: a segment is split at the point
    that lowers its sum of squared deviations most, while that gain exceeds the same
    penalty as :func:`detect_change_points` (``2 sigma^2 ln(n)``, percent of the first
    value). Used where PELT's quadratic worst case is too slow (the history plot of up to
    100,000 gates).

    Args:
        values: Positive values in time order (any unit).
        tolerance_pct: Half of it floors the noise estimate, percent.
        min_size: Shortest segment.

    Returns:
        Sorted indices where a new segment starts.

    Raises:
        ValueError: A value is not finite and positive.
    """
    if any(not (math.isfinite(v) and v > 0) for v in values):
        raise ValueError("values must be finite and positive")
    n = len(values)
    if n < 2 * min_size:
        return ()
    pct = (np.asarray(values, dtype=float) / values[0] - 1.0) * 100.0
    penalty = _noise_penalty(pct, tolerance_pct)
    csum = np.concatenate([[0.0], np.cumsum(pct)])
    csq = np.concatenate([[0.0], np.cumsum(pct * pct)])

    def cost(a: np.ndarray | int, b: np.ndarray | int):
        total = csum[b] - csum[a]
        return csq[b] - csq[a] - total * total / (np.asarray(b) - np.asarray(a))

    found: list[int] = []
    stack = [(0, n)]
    while stack:
        start, end = stack.pop()
        if end - start < 2 * min_size:
            continue
        splits = np.arange(start + min_size, end - min_size + 1)
        gains = cost(start, end) - cost(start, splits) - cost(splits, end)
        best = int(np.argmax(gains))
        if gains[best] > penalty:
            cut = int(splits[best])
            found.append(cut)
            stack += [(start, cut), (cut, end)]
    return tuple(sorted(found))


def drift_of_repository(*, session: Session, repo_id: int) -> DriftPublic:
    """The drift series of a tracked branch with change points (read-only use case).

    Raises:
        NotFound: No repository has that id.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    events = store.repos.events_of_repo(session=session, repo_id=repo_id, oldest_first=True,
                                        kinds=("baseline", "pass", "improvement", "regression"))
    cumulative: dict[str, float] = {}
    points = []
    for ev in events:
        if ev.kind == "baseline":
            if ev.candidate_sha:
                cumulative.setdefault(ev.candidate_sha, 0.0)
            continue
        if ev.candidate_median_s is None or ev.gate_id is None or not ev.candidate_sha:
            continue
        base = cumulative.setdefault(ev.control_sha or "", 0.0)
        cum = base + (ev.delta_pct or 0.0)
        cumulative[ev.candidate_sha] = cum
        points.append(DriftPointPublic(gate_id=ev.gate_id, sha=ev.candidate_sha, created_at=ev.created_at,
                                       median_s=ev.candidate_median_s, delta_pct=ev.delta_pct,
                                       cumulative_delta_pct=cum, verdict=ev.verdict,
                                       adopted=ev.kind != "regression"))
    cps = detect_change_points([p.median_s for p in points], tolerance_pct=repo.tolerance_pct)
    flagged, notes = False, []
    for start, end, _mean, shift in cps.segments[1:]:
        flagged_here = any(p.verdict in ("regression", "improvement") for p in points[: end])
        if abs(shift) > repo.tolerance_pct and not flagged_here:
            flagged = True
            notes.append(f"points {start}-{end - 1} moved {shift:+.3f}% with no re-gate over tolerance")
    return DriftPublic(
        repository_id=repo.id, branch=repo.branch, method=METHOD, penalty=cps.penalty, points=points,
        change_points=list(cps.change_points),
        segments=[DriftSegmentPublic(start=s, end=e, mean_s=m, shift_pct=sh) for s, e, m, sh in cps.segments],
        drift_flag=flagged, message="; ".join(notes) or "no slow drift beyond tolerance",
    )
