"""Read-side use case: a gate's live progress (per-run step counts and an ETA).

ETA: each unfinished run's remaining steps times the mean step time seen so far (its own
steps when it has some, else the mean over the gate's runs), plus, for a run not started
yet, the mean launch overhead of the gate's finished runs (wall time between start and end
minus the sum of their step times). Unknown (None) until the first step time is stored.
"""

from __future__ import annotations

import math
import statistics

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Run
from orchestrator.schemas.live import GateLivePublic, RunLivePublic

__all__ = ["ACTIVE_GATE_STATUSES", "gate_live"]

ACTIVE_GATE_STATUSES = ("queued", "submitted", "running")
_ENDED = ("succeeded", "failed", "cancelled", "skipped")


def _series(session: Session, run: Run, max_steps: int) -> list[float]:
    if run.slowest_rank_step_s:
        return [float(t) for t in run.slowest_rank_step_s[:max_steps]]
    rows = store.runs.list_steps(session=session, run_id=run.id, offset=0, limit=max_steps)
    times = [r.slowest_rank_step_s if r.slowest_rank_step_s is not None else r.rank_step_s
             for r in rows]
    return [float(t) for t in times if t is not None and math.isfinite(t)]


def _overhead_s(runs: list[Run], series: dict[int, list[float]]) -> float:
    walls = [(r.ended_at - r.started_at).total_seconds() - sum(series[r.id])
             for r in runs if r.status in _ENDED and r.started_at and r.ended_at]
    return max(statistics.fmean(walls), 0.0) if walls else 0.0


def gate_live(*, session: Session, gate_id: int, max_steps: int = 20_000) -> GateLivePublic:
    """Where a gate stands, run by run, with an ETA.

    Args:
        session: Open session.
        gate_id: The gate.
        max_steps: Step times returned per run at most (the counts are exact).

    Returns:
        The gate's live progress.

    Raises:
        NotFound: No gate has that id.
    """
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    runs = sorted(gate.runs, key=lambda r: r.order)
    counts = store.runs.count_steps(session=session, run_ids=[r.id for r in runs])
    series = {r.id: _series(session, r, max_steps) for r in runs}
    expected = gate.num_warmup_steps + gate.num_measured_steps
    seen = [t for times in series.values() for t in times]
    gate_mean = statistics.fmean(seen) if seen else None
    overhead = _overhead_s(runs, series)
    out, eta_total = [], 0.0
    for run in runs:
        times = series[run.id]
        num = max(counts.get(run.id, 0), len(times))
        mean = statistics.fmean(times) if times else None
        if run.status in _ENDED:
            eta: float | None = 0.0
        elif (mean or gate_mean) is None:
            eta = None
        else:
            eta = max(expected - num, 0) * float(mean or gate_mean)  # type: ignore[arg-type]
            eta += overhead if run.status == "pending" else 0.0
        eta_total = eta_total + eta if eta is not None and eta_total is not None else None
        out.append(RunLivePublic(
            id=run.id, order=run.order, role=run.role, label=f"{run.role or '?'}{run.order}",
            status=run.status, num_steps=num, num_steps_expected=expected,
            num_warmup_steps=run.num_warmup_steps if run.num_warmup_steps is not None
            else gate.num_warmup_steps,
            median_step_s=run.median_step_s, mean_step_s=mean, eta_s=eta, steps_s=times))
    primary = next((v for v in sorted(gate.verdicts, key=lambda v: -v.id) if v.is_primary), None)
    numbers = primary.numbers if primary is not None else {}
    active = gate.status in ACTIVE_GATE_STATUSES
    return GateLivePublic(
        id=gate.id, status=gate.status, status_reason=gate.status_reason, active=active,
        num_steps_done=sum(r.num_steps for r in out), num_steps_planned=expected * len(out),
        eta_s=(eta_total if active else 0.0) if seen or not active else None,
        midpoint_s=numbers.get("midpoint_s"), threshold_pct=numbers.get("threshold_pct"),
        runs=out)
