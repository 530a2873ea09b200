"""Read-side use cases: ledger pages, gate views, stopping points, run logs, previews.

API routes, web pages and the CLI call these (and :mod:`orchestrator.usecases.gates` for writes);
ORM objects never leave this module, the ``*Public`` models do.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator import verdict as verdict_engine
from orchestrator.db.models import Allocation, Artifact, Gate
from orchestrator.domain.errors import NotFound, ValidationFailed
from orchestrator.executors.plan import GatePaths
from orchestrator.schemas.gates import GatePublic
from orchestrator.schemas.semantics import SemanticVerdictPublic
from orchestrator.schemas.views import (
    AllocationPublic, ArtifactPublic, DecisionGroupPublic, DecisionPublic, GateFilters,
    GateSummariesPublic, GateSummaryPublic, GateViewPublic, RunDetailPublic, RunStepPublic,
    SideSummary, StoppingPointPublic, StoppingPointsPublic, VerdictPreviewCreate,
)
from orchestrator.store.ledger import GateQuery, LedgerRow
from orchestrator.usecases.verdict_briefs import attach_verdicts

__all__ = ["DEFAULT_STEPS_PAGE", "decision_index", "get_allocation_view", "get_gate_view",
           "get_run_view", "list_gates", "preview_verdict", "run_log_path", "stopping_points"]

logger = logging.getLogger(__name__)

_LOG_KINDS = ("log", "imported_log", "stdout", "stderr")


def _side(spec: dict[str, Any]) -> SideSummary:
    source = spec.get("source") or {}
    sha = source.get("sha")
    overrides = [f"{k}={v}" for k, v in sorted((spec.get("env") or {}).items())]
    overrides += list(spec.get("recipe_overrides") or [])
    return SideSummary(
        sha=sha,
        sha_short=sha[:10] if sha else None,
        ref=source.get("ref"),
        dirty=bool(source.get("dirty", False)),
        overrides=overrides,
    )


def _recipe_label_of(recipe_name: str | None, workload: dict[str, Any] | None) -> str:
    if recipe_name:
        return recipe_name
    command = (workload or {}).get("command") or []
    return f"command:{Path(str(command[0])).name}" if command else "unknown"


def _recipe_label(gate: Gate) -> str:
    return _recipe_label_of(gate.recipe_name, gate.workload)


def _topology_label_of(topology: str | None, request: dict[str, Any] | None) -> str | None:
    if topology:
        return topology
    req = request or {}
    if not req:
        return None
    gpus = req.get("gpus_per_node") or 0
    return f"requested {req.get('nodes', 1)}x{gpus if gpus else 'cpu'}"


def _topology_label(gate: Gate, alloc: Allocation | None) -> str | None:
    return _topology_label_of(alloc.topology if alloc is not None else None, gate.topology_request)


def _num(numbers: dict[str, Any], key: str) -> float | None:
    value = numbers.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _summary(row: LedgerRow) -> GateSummaryPublic:
    gate, ver, dec, alloc = row
    numbers = (ver.numbers or {}) if ver is not None else {}
    sem = gate.semantic_verdicts[-1] if gate.semantic_verdicts else None
    automatic = sem.decision if sem is not None and sem.decision else (ver.verdict if ver is not None else None)
    return GateSummaryPublic(
        id=gate.id,
        title=gate.title,
        family=gate.family,
        tags=list(gate.tags or []),
        kind=gate.kind,
        status=gate.status,
        status_reason=gate.status_reason,
        created_at=gate.created_at,
        control=_side(gate.control_spec or {}),
        candidate=_side(gate.candidate_spec or {}),
        run_pattern=gate.run_pattern,
        topology=_topology_label(gate, alloc),
        recipe=_recipe_label(gate),
        allocation_id=gate.allocation_id,
        scheduler_job_id=alloc.scheduler_job_id if alloc is not None else gate.job_ref,
        health_verdict=alloc.health_verdict if alloc is not None else None,
        midpoint_s=_num(numbers, "midpoint_s"),
        candidate_s=_num(numbers, "candidate_s"),
        delta_ms=_num(numbers, "delta_ms"),
        delta_pct=_num(numbers, "delta_pct"),
        drift_pct=_num(numbers, "drift_pct"),
        mfu_points=_num(numbers, "mfu_points"),
        verdict=ver.verdict if ver is not None else None,
        policy=ver.policy if ver is not None else None,
        semantics=sem.status if sem is not None else None,
        decision=dec.decision if dec is not None else automatic,
        decision_recorded=dec is not None,
        baseline_eligible=gate.status == "succeeded"
        and alloc is not None
        and alloc.health_verdict == "healthy",
    )


def list_gates(*, session: Session, filters: GateFilters) -> GateSummariesPublic:
    """Return one page of the ledger, newest first.

    Args:
        session: Open session.
        filters: Filters and pagination (``skip``, ``limit``).

    Returns:
        The rows and the total number of matching gates.
    """
    query = GateQuery(**filters.model_dump(exclude={"skip", "limit"}))
    rows, count = store.ledger.list_gate_rows(
        session=session, query=query, skip=filters.skip, limit=filters.limit
    )
    data = [_summary(r) for r in rows]
    attach_verdicts(session=session, summaries=data)
    return GateSummariesPublic(data=data, count=count)


def _artifact_public(artifact: Artifact) -> ArtifactPublic:
    out = ArtifactPublic.model_validate(artifact)
    if artifact.run_id is not None:
        out.log_url = f"/runs/{artifact.run_id}/log?artifact_id={artifact.id}"
    return out


def _allocation_public(alloc: Allocation) -> AllocationPublic:
    out = AllocationPublic.model_validate(alloc)
    out.baseline_eligible = alloc.health_verdict == "healthy"
    return out


_RUN_COLUMNS = tuple(
    name for name in RunDetailPublic.model_fields
    if name not in ("steps", "artifacts", "num_steps", "num_series_steps", "steps_offset",
                    "steps_limit")
)
_LIVE_SERIES_MAX = 100_000
"""Step records read back to show the series of a run that has not ended yet."""
DEFAULT_STEPS_PAGE = 1000
"""Step records (and series entries) per page of ``GET /runs/{id}`` unless asked."""


def _run_detail(session: Session, run) -> RunDetailPublic:
    """The run without its step records (never loads ``run.steps``: a run may have 1e6)."""
    out = RunDetailPublic.model_validate({name: getattr(run, name) for name in _RUN_COLUMNS})
    rank0_only = "rank0_step_s" in (run.result_extra or {})  # measured: no slowest-rank series
    if not out.slowest_rank_step_s and not rank0_only:  # a running run: its series so far
        rows = store.runs.list_steps(session=session, run_id=run.id, offset=0, limit=_LIVE_SERIES_MAX)
        series = [r.slowest_rank_step_s if r.slowest_rank_step_s is not None else r.rank_step_s
                  for r in rows]
        out.slowest_rank_step_s = [t for t in series if t is not None]
    out.num_series_steps = len(out.slowest_rank_step_s)
    out.artifacts = [_artifact_public(a) for a in run.artifacts]
    return out


def get_gate_view(*, session: Session, gate_id: int) -> GateViewPublic:
    """Return everything shown about one gate.

    Raises:
        NotFound: No gate has that id.
    """
    row = store.ledger.gate_row(session=session, gate_id=gate_id)
    if row is None:
        raise NotFound("gate", gate_id)
    gate, _ver, _dec, alloc = row
    # Per-step records stay on GET /runs/{id} (paged); the times are in the list.
    runs = [_run_detail(session, r) for r in gate.runs]
    public = GatePublic.model_validate(gate)
    summary = _summary(row)
    history = [_summary(r) for r in store.ledger.family_rows(session=session, gate=gate)]
    attach_verdicts(session=session, summaries=[summary, *history])
    return GateViewPublic(
        **{k: getattr(public, k) for k in GatePublic.model_fields if k != "runs"},
        gate=public,
        summary=summary,
        runs=runs,
        allocation=_allocation_public(alloc) if alloc is not None else None,
        decisions=[DecisionPublic.model_validate(d) for d in gate.decisions],
        artifacts=[
            _artifact_public(a) for a in store.ledger.artifacts_of_gate(session=session, gate=gate)
        ],
        family_history=history,
        semantic_verdict=SemanticVerdictPublic.model_validate(gate.semantic_verdicts[-1])
        if gate.semantic_verdicts else None,
    )


def get_run_view(*, session: Session, run_id: int, steps_offset: int = 0,
                 steps_limit: int = DEFAULT_STEPS_PAGE) -> RunDetailPublic:
    """Return one run with one page of its per-step records, provenance and artifacts.

    Args:
        session: Open session.
        run_id: The run.
        steps_offset: Step records (and entries of ``slowest_rank_step_s``) to skip.
        steps_limit: Step records (and series entries) to return at most.

    Returns:
        The run; ``steps`` and ``slowest_rank_step_s`` hold the page, ``num_steps`` and
        ``num_series_steps`` the totals.

    Raises:
        NotFound: No run has that id.
    """
    run = store.runs.get_run(session=session, run_id=run_id)
    out = _run_detail(session, run)
    out.num_steps = store.runs.count_steps(session=session, run_ids=[run.id]).get(run.id, 0)
    out.steps = [RunStepPublic.model_validate(s) for s in store.runs.list_steps(
        session=session, run_id=run.id, offset=steps_offset, limit=steps_limit)]
    out.slowest_rank_step_s = out.slowest_rank_step_s[steps_offset:steps_offset + steps_limit]
    out.steps_offset, out.steps_limit = steps_offset, steps_limit
    return out


def get_allocation_view(*, session: Session, allocation_id: int) -> AllocationPublic:
    """Return one allocation with its health checks.

    Raises:
        NotFound: No allocation has that id.
    """
    alloc = store.allocations.get_allocation(session=session, allocation_id=allocation_id)
    return _allocation_public(alloc)


def run_log_path(
    *, session: Session, run_id: int, artifacts_dir: Path, data_dir: Path,
    artifact_id: int | None = None,
) -> tuple[Path, ArtifactPublic]:
    """Return the file of a run's raw log, refusing anything outside the kept folders.

    Only paths recorded in the artifacts table are served, and only when they resolve
    (symlinks followed) inside ``artifacts_dir`` (imported logs) or the run's gate folder
    (:class:`~orchestrator.executors.plan.GatePaths`: ``runs/NN-R.log``, health logs).

    Args:
        session: Open session.
        run_id: The run.
        artifacts_dir: The service's artifact folder.
        data_dir: The service's data directory (gate folders live under it).
        artifact_id: A specific artifact of the run (default: its first log).

    Returns:
        ``(path, artifact)``.

    Raises:
        NotFound: Unknown run, no log artifact, an artifact of another run, a path
            outside the allowed folders, or a file that no longer exists.
    """
    run = store.runs.get_run(session=session, run_id=run_id)
    if artifact_id is not None:
        chosen = next((a for a in run.artifacts if a.id == artifact_id), None)
    else:
        chosen = next((a for a in run.artifacts if a.kind in _LOG_KINDS), None)
    if chosen is None:
        raise NotFound("log of run", run_id if artifact_id is None else f"{run_id}/{artifact_id}")
    roots = [artifacts_dir.resolve()]
    if run.gate_id is not None:
        roots.append(GatePaths.of(data_dir, run.gate_id).root.resolve())
    path = Path(chosen.path).resolve()
    if not any(path.is_relative_to(root) for root in roots) or not path.is_file():
        logger.warning("run=%s artifact=%s path %s is not servable", run_id, chosen.id, path)
        raise NotFound("log of run", run_id)
    return path, _artifact_public(chosen)


_POINTS_CACHE: dict[tuple, StoppingPointsPublic] = {}


def stopping_points(*, session: Session) -> StoppingPointsPublic:
    """Return the best baseline-eligible accepted gate per topology and recipe.

    Best means the lowest candidate run median; ties go to the newer gate. The table is
    kept per database until :func:`store.ledger.ledger_version` moves (every ledger page
    shows it; recomputing it costs a pass over the accepted gates)."""
    key = (str(session.get_bind().url), store.ledger.ledger_version(session=session))
    if key not in _POINTS_CACHE:
        _POINTS_CACHE.clear()
        _POINTS_CACHE[key] = _stopping_points(session)
    return _POINTS_CACHE[key].model_copy(deep=True)


def _stopping_points(session: Session) -> StoppingPointsPublic:
    groups: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for gate_id, topology, recipe_name, workload, request, candidate_s in (
        store.ledger.eligible_accepted_candidates(session=session)
    ):
        label = _topology_label_of(topology, request)
        if candidate_s is None or label is None:
            continue
        groups[(label, _recipe_label_of(recipe_name, workload))].append((candidate_s, gate_id))
    best = {key: min(items, key=lambda item: (item[0], -item[1])) for key, items in groups.items()}
    rows = store.ledger.all_rows(session=session, gate_ids=[gid for _, gid in best.values()])
    summaries = {row[0].id: _summary(row) for row in rows}
    data = [
        StoppingPointPublic(
            topology=topology,
            recipe=recipe,
            candidate_s=best[(topology, recipe)][0],
            num_accepted=len(groups[(topology, recipe)]),
            gate=summaries[best[(topology, recipe)][1]],
        )
        for topology, recipe in sorted(best)
    ]
    return StoppingPointsPublic(data=data)


def decision_index(*, session: Session, max_per_group: int = 50) -> list[DecisionGroupPublic]:
    """Return gates grouped by family and by tag with their effective decisions.

    Args:
        session: Open session.
        max_per_group: Newest gates listed per group.

    Returns:
        Family groups first, then tag groups, each sorted by name.
    """
    by_family: dict[str, list[GateSummaryPublic]] = defaultdict(list)
    by_tag: dict[str, list[GateSummaryPublic]] = defaultdict(list)
    for row in reversed(store.ledger.all_rows(session=session)):
        summary = _summary(row)
        if summary.family:
            by_family[summary.family].append(summary)
        for tag in summary.tags:
            by_tag[tag].append(summary)
    out = []
    for kind, groups in (("family", by_family), ("tag", by_tag)):
        for name in sorted(groups):
            gates = groups[name]
            out.append(
                DecisionGroupPublic(
                    group_kind=kind,  # type: ignore[arg-type]
                    name=name,
                    num_accepted=sum(g.decision == "accept" for g in gates),
                    num_rejected=sum((g.decision or "").startswith("reject") for g in gates),
                    gates=gates[:max_per_group],
                )
            )
    return out


def preview_verdict(body: VerdictPreviewCreate) -> dict[str, Any]:
    """Judge run medians without storing anything (same engine as ``axbgate verdict``).

    Args:
        body: Pattern, medians, policy and MFU inputs.

    Returns:
        The verdict as a JSON-safe dict (:meth:`Verdict.to_dict`).

    Raises:
        ValidationFailed: Unknown policy or parameter, a pattern that does not match
            the medians, or numbers that overflow.
    """
    roles = [c for c in body.pattern.replace(",", " ").replace(" ", "").upper()]
    if len(roles) != len(body.medians_s):
        raise ValidationFailed(
            "pattern", f"has {len(roles)} runs but medians_s has {len(body.medians_s)} values"
        )
    if any(r not in "AXB" for r in roles):
        raise ValidationFailed("pattern", "may hold only A, X and B")
    try:
        verdict_engine.get_policy(body.policy, **body.policy_params)
    except (ValueError, TypeError) as exc:
        field = "policy" if body.policy not in verdict_engine.POLICY_NAMES else "policy_params"
        raise ValidationFailed(field, str(exc)) from None
    try:
        runs = [verdict_engine.RunSummary(role=role, order=i, median_step_s=m)
                for i, (role, m) in enumerate(zip(roles, body.medians_s))]
        primary = verdict_engine.judge_policies(
            runs,
            kind=body.kind,
            policy=body.policy,
            params=body.policy_params,
            others=False,
            mfu_numerator_pct_s=body.mfu_numerator_pct_s,
            control_local_batch_size=body.control_local_batch_size,
            control_grad_accum_steps=body.control_grad_accum_steps,
            candidate_local_batch_size=body.candidate_local_batch_size,
            candidate_grad_accum_steps=body.candidate_grad_accum_steps,
        )[0]
        out = primary.to_dict()
        json.dumps(out, allow_nan=False)
    except (ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
        raise ValidationFailed("medians_s", str(exc)) from None
    return out


