"""Read-side use case: a gate's live progress (per-run step counts, run budget and an ETA).

Step counts follow the gate's measurement rule (:mod:`orchestrator.usecases.run_plan`): a
steady warmup takes between ``warmup_steps`` and ``max_warmup_steps``, a time window
``ceil(window / step time)`` steps, the cost model's window what the driver recorded in
``status.json``. ETA: each unfinished run's remaining steps times the mean step time seen
so far (its own steps when it has some, else the mean over the gate's runs), plus, for a run
not started yet, the mean launch overhead of the gate's finished runs (wall time between
start and end minus the sum of their step times); ``eta_max_s`` adds the runs a sequential
(or extending) gate may still append, up to its budget. Unknown (None) until the first step
time is stored.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate, Run
from orchestrator.schemas.live import GateLivePublic, RunLivePublic
from orchestrator.usecases.run_plan import (
    MeasurementRule,
    eta_seconds,
    measurement_rule,
    run_budget,
    run_position,
)

__all__ = ["ACTIVE_GATE_STATUSES", "gate_live", "gate_measurement_rule"]

ACTIVE_GATE_STATUSES = ("queued", "submitted", "running")
_ENDED = ("succeeded", "failed", "cancelled", "skipped")


def _series(session: Session, run: Run, max_steps: int) -> tuple[list[float], int | None]:
    """The run's step times so far and, once its warmup is over, its warmup step count."""
    if run.slowest_rank_step_s:
        return [float(t) for t in run.slowest_rank_step_s[:max_steps]], run.num_warmup_steps
    rows = store.runs.list_steps(session=session, run_id=run.id, offset=0, limit=max_steps)
    times = [r.slowest_rank_step_s if r.slowest_rank_step_s is not None else r.rank_step_s
             for r in rows]
    phases = [r.phase for r in rows]
    warm = phases.index("measured") if "measured" in phases else None
    return [float(t) for t in times if t is not None and math.isfinite(t)], warm


def _overhead_s(runs: list[Run], series: dict[int, list[float]]) -> float:
    walls = [(r.ended_at - r.started_at).total_seconds() - sum(series[r.id])
             for r in runs if r.status in _ENDED and r.started_at and r.ended_at]
    return max(statistics.fmean(walls), 0.0) if walls else 0.0


def gate_measurement_rule(gate: Gate, data_dir: Path | None = None) -> MeasurementRule:
    """The measurement rule of a stored gate, with the cost model's window once its driver
    recorded it in ``<data_dir>/gates/<id>/status.json`` (``data_dir`` None: not read)."""
    window = None
    if data_dir is not None:
        from orchestrator.executors.plan import GatePaths, read_json

        status = read_json(GatePaths.of(data_dir, gate.id).status) or {}
        window = status.get("window") if isinstance(status.get("window"), dict) else None
    return measurement_rule(num_warmup_steps=gate.num_warmup_steps,
                            num_measured_steps=gate.num_measured_steps,
                            options=gate.options, window=window)


def gate_live(*, session: Session, gate_id: int, max_steps: int = 20_000,
              data_dir: Path | None = None) -> GateLivePublic:
    """Where a gate stands, run by run, with an ETA.

    Args:
        session: Open session.
        gate_id: The gate.
        max_steps: Step times returned per run at most (the counts are exact).
        data_dir: Service data directory; when given, the cost model's window recorded by
            the driver (``status.json``) sets the step counts of the later runs.

    Returns:
        The gate's live progress.

    Raises:
        NotFound: No gate has that id.
    """
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    runs = sorted(gate.runs, key=lambda r: r.order)
    counts = store.runs.count_steps(session=session, run_ids=[r.id for r in runs])
    read = {r.id: _series(session, r, max_steps) for r in runs}
    series = {rid: times for rid, (times, _) in read.items()}
    rule = gate_measurement_rule(gate, data_dir)
    budget = run_budget(policy=gate.policy, policy_params=gate.policy_params, kind=gate.kind,
                        run_pattern=gate.run_pattern, num_runs=len(runs),
                        max_extend=int((gate.options or {}).get("max_extend") or 0))
    seen = [t for times in series.values() for t in times]
    gate_mean = statistics.fmean(seen) if seen else None
    overhead = _overhead_s(runs, series)
    out, remaining, num_pending = [], [], 0
    for run in runs:
        times, warm_done = read[run.id]
        num = max(counts.get(run.id, 0), len(times))
        mean = statistics.fmean(times) if times else None
        step_s = statistics.fmean(times[warm_done:]) if warm_done is not None \
            and times[warm_done:] else (mean or gate_mean)
        steps = rule.for_order(run.order).steps(step_s, num_warmup_done=warm_done)
        if run.status in _ENDED and run.num_measured_steps:
            low = high = (run.num_warmup_steps or 0) + run.num_measured_steps
        elif run.status in _ENDED:
            low = high = num
        else:
            low, high = max(num, steps.low), max(num, steps.high)
        if run.status in _ENDED:
            eta: float | None = 0.0
        else:
            eta = eta_seconds(remaining_steps=[low - num], step_s=mean or gate_mean,
                              num_pending=int(run.status == "pending"), overhead_s=overhead)
            remaining.append(low - num)
            num_pending += run.status == "pending"
        out.append(RunLivePublic(
            id=run.id, order=run.order, role=run.role, label=f"{run.role or '?'}{run.order}",
            status=run.status, num_steps=num, num_steps_expected=low,
            num_steps_expected_max=high,
            num_warmup_steps=run.num_warmup_steps if run.num_warmup_steps is not None
            else (warm_done if warm_done is not None else rule.for_order(run.order).num_warmup_steps),
            position=run_position(run.order, budget),
            median_step_s=run.median_step_s, mean_step_s=mean, eta_s=eta, steps_s=times))
    primary = next((v for v in sorted(gate.verdicts, key=lambda v: -v.id) if v.is_primary), None)
    numbers = primary.numbers if primary is not None else {}
    active = gate.status in ACTIVE_GATE_STATUSES
    eta_planned = eta_seconds(remaining_steps=remaining, step_s=gate_mean, num_pending=num_pending,
                              overhead_s=overhead)
    later = rule.for_order(max(1, len(runs))).steps(gate_mean).low
    eta_max = eta_seconds(remaining_steps=remaining, step_s=gate_mean, num_pending=num_pending,
                          overhead_s=overhead, num_more_runs=budget.max_runs - len(runs),
                          steps_per_run=later)
    running = next((r for r in out if r.status == "running"), None)
    return GateLivePublic(
        id=gate.id, status=gate.status, status_reason=gate.status_reason, active=active,
        num_steps_done=sum(r.num_steps for r in out),
        num_steps_planned=sum(r.num_steps_expected for r in out),
        num_runs_planned=budget.num_runs_planned, max_runs=budget.max_runs,
        position=running.position if running is not None else None,
        measurement=rule.describe(),
        eta_s=(eta_planned if active else 0.0) if seen or not active else None,
        eta_max_s=(eta_max if active else 0.0) if seen or not active else None,
        midpoint_s=numbers.get("midpoint_s"), threshold_pct=numbers.get("threshold_pct"),
        runs=out)
