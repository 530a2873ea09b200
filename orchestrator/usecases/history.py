"""Read-side use case: the history of gates of one family, recipe or topology.

Each point is one succeeded gate: its control midpoint with the control band (midpoint x
(1 +/- drift / 2): the two controls of an A X B lie exactly on its edges), and its
candidate median. Medians of different gates come from different allocations, so the plot
shows where the controls wandered; decisions stay same-allocation (DESIGN.md section 2).
Change points of the midpoints: :func:`orchestrator.usecases.drift.detect_change_points_binseg`
(binary segmentation: linear-logarithmic where PELT is quadratic at 100,000 gates).
"""

from __future__ import annotations

import math

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.errors import ValidationFailed
from orchestrator.schemas.history import GateHistoryPointPublic, GateHistoryPublic
from orchestrator.usecases.drift import BINSEG_METHOD, detect_change_points_binseg

__all__ = ["DEFAULT_HISTORY_LIMIT", "gate_history"]

DEFAULT_HISTORY_LIMIT = 1000
"""Newest gates drawn in one history plot (the page says when there are more)."""


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def gate_history(*, session: Session, family: str | None = None, recipe: str | None = None,
                 topology: str | None = None, tolerance_pct: float = 0.5,
                 limit: int = DEFAULT_HISTORY_LIMIT) -> GateHistoryPublic:
    """The newest ``limit`` succeeded gates matching the filters, oldest first.

    Args:
        session: Open session.
        family: Gate family.
        recipe: Bundled recipe name.
        topology: Allocation topology string.
        tolerance_pct: Half-width of the tolerance band, percent (DESIGN.md re-gate
            tolerance 0.5% by default); it also floors the change-point noise estimate.
        limit: Gates drawn at most.

    Raises:
        ValidationFailed: ``tolerance_pct`` not in (0, 100] or ``limit`` not in 1..100000.
    """
    if not (0 < tolerance_pct <= 100):
        raise ValidationFailed("tolerance_pct", "must be in (0, 100] percent")
    if not (1 <= limit <= 100_000):
        raise ValidationFailed("limit", "must be in 1..100000")
    rows = store.ledger.history_rows(session=session, family=family, recipe=recipe,
                                     topology=topology, limit=limit)
    points = []
    for gate_id, created_at, title, verdict, mid, cand, delta, drift, _thr in reversed(rows):
        half = (drift or 0.0) / 200.0
        points.append(GateHistoryPointPublic(
            gate_id=gate_id, created_at=created_at, title=title, verdict=verdict,
            midpoint_s=mid, candidate_s=cand, delta_pct=delta, drift_pct=drift,
            control_min_s=mid * (1 - half) if _ok(mid) else None,
            control_max_s=mid * (1 + half) if _ok(mid) else None))
    mids = [p.midpoint_s for p in points if _ok(p.midpoint_s)]
    change_points: list[int] = []
    if len(mids) == len(points):
        change_points = list(detect_change_points_binseg(mids, tolerance_pct=tolerance_pct))
    return GateHistoryPublic(family=family, recipe=recipe, topology=topology,
                             tolerance_pct=tolerance_pct, points=points, num_shown=len(points),
                             limit=limit, change_points=change_points, method=BINSEG_METHOD)
