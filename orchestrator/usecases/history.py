"""Read-side use case: the history of gates of one family, recipe or topology.

Each point is one succeeded gate: its control midpoint with the control band (midpoint x
(1 +/- drift / 2): the two controls of an A X B lie exactly on its edges), and its
candidate median. Medians of different gates come from different allocations, so the plot
shows where the controls wandered; decisions stay same-allocation (DESIGN.md section 2).
Points are grouped by the control identity (:func:`orchestrator.usecases.judge.control_identity`
plus the allocation's GPU model and clock bin, as ``judge._same_control`` compares them):
one line per group, so two workloads never share a line. Change points of the midpoints
are found per group: :func:`orchestrator.usecases.drift.detect_change_points_binseg`
(binary segmentation: linear-logarithmic where PELT is quadratic at 100,000 gates).
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.errors import ValidationFailed
from orchestrator.schemas.history import (
    GateHistoryGroupPublic,
    GateHistoryPointPublic,
    GateHistoryPublic,
)
from orchestrator.usecases.drift import BINSEG_METHOD, detect_change_points_binseg
from orchestrator.usecases.judge import control_identity

__all__ = ["DEFAULT_HISTORY_LIMIT", "gate_history", "identity_label"]

DEFAULT_HISTORY_LIMIT = 1000
"""Newest gates drawn in one history plot (the page says when there are more)."""


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _identity(row: tuple) -> dict[str, Any]:
    """The control identity of one :func:`store.ledger.history_control_rows` row."""
    workload, recipe, spec, topo, warmup, measured, options, gpu_model, clock_bin = row
    gate = SimpleNamespace(workload=workload or {}, recipe_name=recipe, control_spec=spec or {},
                           topology_request=topo or {}, num_warmup_steps=warmup,
                           num_measured_steps=measured, options=options or {})
    return {**control_identity(gate), "gpu_model": gpu_model, "clock_bin": clock_bin}  # type: ignore[arg-type]


def identity_label(identity: dict[str, Any]) -> str:
    """A short name of a control identity: recipe or command, topology, steps, GPU, e.g.
    ``recipe ltx2 · 1 x 8 GPUs · 3+6 steps · NVIDIA H200 · clock bin 1980``."""
    workload = identity.get("workload") or {}
    if identity.get("recipe") or workload.get("recipe"):
        what = f"recipe {identity.get('recipe') or workload.get('recipe')}"
    else:
        command = " ".join(str(c) for c in workload.get("command") or []) or "?"
        what = command if len(command) <= 40 else command[:39] + "\u2026"
    if identity.get("recipe_overrides"):
        what += f" ({len(identity['recipe_overrides'])} overrides)"
    if identity.get("env"):
        what += f" (env {', '.join(identity['env'])})"
    topo = identity.get("topology") or {}
    parts = [what, f"{topo.get('nodes', 1)} x {topo.get('gpus_per_node') or 0} GPUs"]
    warmup, measured = (identity.get("measure") or [None, None])[:2]
    parts.append(f"{warmup}+{measured} steps")
    if identity.get("gpu_model"):
        parts.append(str(identity["gpu_model"]))
    if identity.get("clock_bin"):
        parts.append(f"clock bin {identity['clock_bin']}")
    return " \u00b7 ".join(parts)


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
    identities = store.ledger.history_control_rows(session=session,
                                                   gate_ids=[p.gate_id for p in points])
    keys: dict[str, int] = {}
    members: list[list[int]] = []
    labels: list[dict[str, Any]] = []
    for i, p in enumerate(points):
        identity = _identity(identities[p.gate_id])
        key = json.dumps(identity, sort_keys=True, default=str)
        if key not in keys:
            keys[key] = len(members)
            members.append([])
            labels.append(identity)
        p.group = keys[key]
        members[keys[key]].append(i)
    groups, change_points = [], []
    for g, idx in enumerate(members):
        mids = [points[i].midpoint_s for i in idx]
        local: list[int] = []
        if all(_ok(m) for m in mids):
            local = list(detect_change_points_binseg(mids, tolerance_pct=tolerance_pct))
        change_points += [idx[c] for c in local]
        groups.append(GateHistoryGroupPublic(
            index=g, label=identity_label(labels[g]), identity=labels[g],
            gate_ids=[points[i].gate_id for i in idx],
            change_point_gate_ids=[points[idx[c]].gate_id for c in local]))
    return GateHistoryPublic(family=family, recipe=recipe, topology=topology,
                             tolerance_pct=tolerance_pct, points=points, num_shown=len(points),
                             limit=limit, change_points=sorted(change_points),
                             groups=groups, method=BINSEG_METHOD)
