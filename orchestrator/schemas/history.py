"""History of gates across allocations for one family, recipe or topology (plot data)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from orchestrator.domain.api_model import PublicModel

__all__ = ["GateHistoryGroupPublic", "GateHistoryPointPublic", "GateHistoryPublic"]


class GateHistoryPointPublic(PublicModel):
    """One succeeded gate in the history plot."""

    gate_id: int
    created_at: dt.datetime
    title: str
    verdict: str | None
    midpoint_s: float | None
    """Control midpoint, seconds."""
    candidate_s: float | None
    """Candidate run median, seconds."""
    control_min_s: float | None
    """Lower edge of the control band: midpoint x (1 - drift/2), seconds."""
    control_max_s: float | None
    """Upper edge of the control band: midpoint x (1 + drift/2), seconds."""
    delta_pct: float | None
    drift_pct: float | None
    group: int = 0
    """Index into ``GateHistoryPublic.groups``: the gate's control identity."""


class GateHistoryGroupPublic(PublicModel):
    """Gates of one control identity (one line of the history plot)."""

    index: int
    label: str
    """Short name: recipe or command, topology, steps, GPU model."""
    identity: dict[str, Any]
    """The control identity (``usecases.judge.control_identity`` with GPU model and clock bin)."""
    gate_ids: list[int]
    """Gates of this identity, oldest first."""
    change_point_gate_ids: list[int]
    """First gate of each new segment of this group's control midpoints."""


class GateHistoryPublic(PublicModel):
    """Gates of one family / recipe / topology over time with change points."""

    family: str | None
    recipe: str | None
    topology: str | None
    tolerance_pct: float
    """Half-width of the tolerance band around the control midpoint, percent."""
    points: list[GateHistoryPointPublic]
    """Oldest first (the newest ``limit`` gates)."""
    num_shown: int
    limit: int
    change_points: list[int]
    """Indices into ``points`` where the control midpoint's mean shifts within its group
    (binary segmentation per control identity, see :mod:`orchestrator.usecases.drift`)."""
    groups: list[GateHistoryGroupPublic] = []
    """One per control identity, in order of first appearance."""
    method: str
