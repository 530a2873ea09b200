"""Drift of a tracked branch over time (``GET /repos/{id}/drift``)."""

from __future__ import annotations

import datetime as dt

from orchestrator.domain.api_model import PublicModel

__all__ = ["DriftPointPublic", "DriftPublic", "DriftSegmentPublic"]


class DriftPointPublic(PublicModel):
    """The measured head after one re-gate of a tracked branch."""

    gate_id: int
    """Id of the gate this belongs to."""
    sha: str
    """Commit SHA."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    median_s: float
    """Candidate run median of the re-gate, seconds (allocation-dependent)."""
    delta_pct: float | None
    """The re-gate's delta against its control, percent (same allocation)."""
    cumulative_delta_pct: float
    """Sum of the re-gate deltas since the first point, percent: the allocation-
    independent drift estimate."""
    verdict: str | None
    """The gate's verdict."""
    adopted: bool = True
    """The candidate became the measured head (pass or improvement); a regression's
    candidate is measured but never adopted."""


class DriftSegmentPublic(PublicModel):
    """A run of points between two change points."""

    start: int
    """Index of the first point."""
    end: int
    """Index one past the last point."""
    mean_s: float
    """Mean of the medians in the segment, seconds."""
    shift_pct: float
    """Segment mean relative to the first segment's mean, percent."""


class DriftPublic(PublicModel):
    """Drift over time of one tracked branch and its change points."""

    repository_id: int
    """Id of the tracked repository."""
    branch: str
    """Tracked branch name."""
    method: str
    """Change-point method and penalty (``ruptures`` PELT, l2 cost)."""
    penalty: float | None
    """Change-point penalty used (None: the default)."""
    points: list[DriftPointPublic]
    """One point per gate, oldest first."""
    change_points: list[int]
    """Indices where a new segment starts."""
    segments: list[DriftSegmentPublic]
    """Segments between detected change points."""
    drift_flag: bool
    """A segment mean moved more than the repository's tolerance from the first segment
    while no single re-gate in between reported a regression or improvement."""
    message: str
    """Why no change points are shown, when none are."""
