"""Drift of a tracked branch over time (``GET /repos/{id}/drift``)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel

__all__ = ["DriftPointPublic", "DriftPublic", "DriftSegmentPublic"]


class DriftPointPublic(BaseModel):
    """The measured head after one re-gate of a tracked branch."""

    gate_id: int
    sha: str
    created_at: dt.datetime
    median_s: float
    """Candidate run median of the re-gate, seconds (allocation-dependent)."""
    delta_pct: float | None
    """The re-gate's delta against its control, percent (same allocation)."""
    cumulative_delta_pct: float
    """Sum of the re-gate deltas since the first point, percent: the allocation-
    independent drift estimate."""
    verdict: str | None
    adopted: bool = True
    """The candidate became the measured head (pass or improvement); a regression's
    candidate is measured but never adopted."""


class DriftSegmentPublic(BaseModel):
    """A run of points between two change points."""

    start: int
    """Index of the first point."""
    end: int
    """Index one past the last point."""
    mean_s: float
    """Mean of the medians in the segment, seconds."""
    shift_pct: float
    """Segment mean relative to the first segment's mean, percent."""


class DriftPublic(BaseModel):
    """Drift over time of one tracked branch and its change points."""

    repository_id: int
    branch: str
    method: str
    """Change-point method and penalty (``ruptures`` PELT, l2 cost)."""
    penalty: float | None
    points: list[DriftPointPublic]
    change_points: list[int]
    """Indices where a new segment starts."""
    segments: list[DriftSegmentPublic]
    drift_flag: bool
    """A segment mean moved more than the repository's tolerance from the first segment
    while no single re-gate in between reported a regression or improvement."""
    message: str
