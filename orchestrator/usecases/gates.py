"""Use cases of the gate lifecycle. Each function is one transaction's worth of work
(the caller commits); API routes, pages, the CLI and services call these and nothing
below them.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate
from orchestrator.domain.decisions import DECISIONS  # what a team may record (re-exported)
from orchestrator.domain.errors import Conflict, ValidationFailed
from orchestrator.domain.gate_spec import GateCreate, parse_pattern
from orchestrator.domain.lifecycle import TERMINAL_GATE_STATUSES, transition
from orchestrator.schemas import GatePublic
from orchestrator.schemas.gates import GateProgressPublic, RunProgressPublic
from orchestrator.usecases.gate_files import FilePolicy, check_gate_files, check_secret_refs
from orchestrator.usecases.measure_defaults import apply_recipe_measure_defaults
from orchestrator.vcs.sources import SourceError, project_source_state, resolve_ref

__all__ = [
    "FilePolicy",
    "cancel_gate",
    "gate_overhead",
    "get_gate",
    "get_gate_progress",
    "record_decision",
    "resolve_recipe",
    "submit_gate",
]

logger = logging.getLogger(__name__)



_SIDE_MEASURE_KEYS = frozenset({"measure.delay_fraction", "measure.profile_dir"})
"""``measure.*`` recipe keys one side may set: a calibrated slowdown for validating gates,
and profiling. Everything that sizes the warmup or the measured window is the gate's."""


def resolve_recipe(gate_in: GateCreate, side: str) -> dict[str, Any] | None:
    """Validate the bundled-trainer recipe of one side with its overrides.

    Args:
        gate_in: The request.
        side: ``"control"`` or ``"candidate"``.

    Returns:
        The resolved recipe as a dict, or ``None`` for an external command workload.

    Raises:
        ValidationFailed: Unknown recipe, unknown key or invalid value (named).
    """
    if gate_in.workload.recipe is None:
        return None
    from trainer import load_recipe

    overrides = [
        *getattr(gate_in, side).recipe_overrides,
        f"measure.warmup_steps={gate_in.warmup_steps}",
        f"measure.measured_steps={gate_in.measured_steps}",
        f"measure.warmup_mode={gate_in.warmup_mode}",
        f"measure.max_warmup_steps={gate_in.max_warmup_steps}",
    ]
    # always set: a recipe's own window must not stay when the gate measures a count
    window = "none" if gate_in.measured_seconds is None else gate_in.measured_seconds
    overrides.append(f"measure.measured_seconds={window}")
    try:
        return load_recipe(gate_in.workload.recipe, overrides).model_dump(mode="json")
    except (ValueError, FileNotFoundError, KeyError) as exc:
        field = f"{side}.recipe_overrides" if getattr(gate_in, side).recipe_overrides else "workload.recipe"
        raise ValidationFailed(field, str(exc)) from None


def _resolve(repo: str, ref: str, side: str, field: str) -> str:
    """Resolve a ref of one side, naming the request field when it cannot be."""
    try:
        return resolve_ref(repo, ref)
    except SourceError as exc:
        raise ValidationFailed(f"{side}.source.{exc.part if exc.part == 'repo' else field}",
                               str(exc)) from None


def _resolve_side(gate_in: GateCreate, side: str) -> dict[str, Any]:
    spec = getattr(gate_in, side)
    data = spec.model_dump(mode="json")
    src = spec.source
    if src.repo is not None and src.sha is None:
        data["source"]["sha"] = _resolve(src.repo, src.ref or "HEAD", side, "ref")
    elif src.repo is not None and src.sha is not None:
        # A pinned SHA must exist too: fail now, not on the allocation.
        if _resolve(src.repo, src.sha, side, "sha") != src.sha:
            raise ValidationFailed(f"{side}.source.sha", f"{src.sha} does not name a commit")
    if src.repo is None and gate_in.workload.recipe is not None:
        # The bundled trainer is axbgate's own code: its commit is the workload's source.
        # An external command's code is unknown without a repo: no commit is recorded.
        sha, dirty = project_source_state()
        data["source"]["sha"] = sha
        data["source"]["dirty"] = dirty
    return data


def _idempotent_repeat(existing: Gate, request_sha256: str, key: str) -> GatePublic:
    """The first gate of an idempotency key, if the repeat asks for the same thing."""
    if existing.request_sha256 is not None and existing.request_sha256 != request_sha256:
        raise Conflict(
            f"Idempotency-Key {key!r} was used for gate {existing.id} with a different request; "
            "use a new key for a new gate"
        )
    return GatePublic.model_validate(existing)


def submit_gate(
    *,
    session: Session,
    gate_in: GateCreate,
    default_executor: str = "local",
    idempotency_key: str | None = None,
    parent_gate_id: int | None = None,
    repository_id: int | None = None,
    files: FilePolicy | None = None,
    secret_refs: list[str] | None = None,
) -> tuple[GatePublic, bool]:
    """Validate a gate request and store it as ``queued`` with one pending run per role.

    Args:
        session: Open session (the caller commits).
        gate_in: The validated request.
        default_executor: Executor when the request names none.
        idempotency_key: A repeat with the same key returns the first gate.
        parent_gate_id: Bisection parent.
        repository_id: Tracked repository of a re-gate.
        files: Which recipe/criteria files may be named (default: any, the embedded
            CLI's own rights; the server passes :meth:`FilePolicy.restricted_to`).
        secret_refs: Server variables ``secret://NAME`` may name (default: any).

    Returns:
        ``(gate, created)``; ``created`` is False for an idempotent repeat.

    Raises:
        ValidationFailed: A recipe override, a source ref, a path field or a secret
            reference is invalid (field named).
    """
    request_sha256 = hashlib.sha256(gate_in.model_dump_json().encode()).hexdigest()
    if idempotency_key:
        existing = store.gates.get_gate_by_idempotency_key(session=session, key=idempotency_key)
        if existing is not None:
            return _idempotent_repeat(existing, request_sha256, idempotency_key), False
    gate_in = check_gate_files(gate_in, files or FilePolicy.unrestricted())
    gate_in = apply_recipe_measure_defaults(gate_in)
    check_secret_refs({"control.env": gate_in.control.env, "candidate.env": gate_in.candidate.env},
                      secret_refs)
    for side in ("control", "candidate"):
        for item in getattr(gate_in, side).recipe_overrides:
            if item.startswith("measure.") and item.split("=", 1)[0] not in _SIDE_MEASURE_KEYS:
                raise ValidationFailed(
                    f"{side}.recipe_overrides",
                    f"{item!r}: warmup/measured steps are the gate's (warmup_steps, measured_steps, "
                    "warmup_mode, measured_seconds), the same for every run; set them there",
                )
    if gate_in.health.enabled and gate_in.health.criteria:
        from health import load_criteria

        try:
            load_criteria(gate_in.health.criteria)
        except (ValueError, OSError) as exc:
            raise ValidationFailed("health.criteria", f"{gate_in.health.criteria!r}: {exc}") from None
    control_recipe = resolve_recipe(gate_in, "control")
    candidate_recipe = resolve_recipe(gate_in, "candidate")
    control = _resolve_side(gate_in, "control")
    candidate = _resolve_side(gate_in, "candidate")
    if candidate_recipe is not None:
        candidate["recipe"] = candidate_recipe
    fields = dict(
        kind=gate_in.kind,
        title=gate_in.title,
        family=gate_in.family,
        tags=gate_in.tags,
        control_spec=control,
        candidate_spec=candidate,
        workload=gate_in.workload.stored(),
        recipe=control_recipe or {},
        recipe_name=gate_in.workload.recipe,
        topology_request=gate_in.topology.model_dump(mode="json"),
        run_pattern=gate_in.run_pattern,
        num_warmup_steps=gate_in.warmup_steps,
        num_measured_steps=gate_in.measured_steps,
        policy=gate_in.policy,
        policy_params=dict(gate_in.policy_params),
        design_seed=_design_seed(gate_in),
        options=gate_in.options().model_dump(mode="json"),
        executor=gate_in.executor or default_executor,
        idempotency_key=idempotency_key,
        request_sha256=request_sha256,
        parent_gate_id=parent_gate_id,
        repository_id=repository_id,
    )
    try:
        gate = store.gates.create_gate(session=session, **fields)
    except Conflict:
        existing = store.gates.get_gate_by_idempotency_key(session=session, key=idempotency_key or "")
        if existing is None:
            raise
        return _idempotent_repeat(existing, request_sha256, idempotency_key or ""), False
    for order, role in enumerate(parse_pattern(gate_in.run_pattern)):
        side = control if role in ("A", "B") else candidate
        store.runs.create_run(
            session=session,
            gate_id=gate.id,
            role=role,
            order=order,
            status="pending",
            source_ref=side["source"].get("ref"),
            source_sha=side["source"].get("sha"),
            source_dirty=bool(side["source"].get("dirty", False)),
            env=side["env"],
        )
    session.refresh(gate)
    logger.info("gate=%s queued pattern=%s executor=%s", gate.id, gate.run_pattern, gate.executor)
    return GatePublic.model_validate(gate), True


def _design_seed(gate_in: GateCreate) -> int | None:
    """The gate's design seed: the request's, or a fresh one for a sequential candidate gate
    (its run order is randomised in mirrored blocks; other gates run their pattern as given)."""
    if gate_in.policy != "sequential" or gate_in.kind != "candidate":
        return gate_in.design_seed
    return gate_in.design_seed if gate_in.design_seed is not None else secrets.randbelow(2**31)


def get_gate(*, session: Session, gate_id: int) -> GatePublic:
    """Return one gate with its runs and verdicts.

    Raises:
        NotFound: No gate has that id.
    """
    return GatePublic.model_validate(store.gates.get_gate(session=session, gate_id=gate_id))


def get_gate_progress(*, session: Session, gate_id: int) -> GateProgressPublic:
    """Where a gate stands: its status and, per run, the steps stored so far.

    Raises:
        NotFound: No gate has that id.
    """
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    counts = store.runs.count_steps(session=session, run_ids=[r.id for r in gate.runs])
    return GateProgressPublic(
        id=gate.id, status=gate.status, status_reason=gate.status_reason,
        num_steps_per_run=gate.num_warmup_steps + gate.num_measured_steps,
        runs=[RunProgressPublic(order=r.order, role=r.role, status=r.status,
                                num_steps=counts.get(r.id, 0), median_step_s=r.median_step_s)
              for r in sorted(gate.runs, key=lambda r: r.order)],
    )


def cancel_gate(*, session: Session, gate_id: int, reason: str = "cancelled by user") -> Gate:
    """Mark a gate cancelled; the dispatcher/poller cancels its job (``scancel``).

    Pending and running runs become ``cancelled``. Cancelling a finished gate is a
    conflict.

    Raises:
        NotFound: No gate has that id.
        InvalidTransition: The gate already finished.
    """
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    transition(gate, "cancelled", reason=reason)
    for run in gate.runs:
        if run.status in ("pending", "running"):
            transition(run, "cancelled", reason=reason)
    session.flush()
    return gate


def record_decision(
    *, session: Session, gate_id: int, decided_by: str, decision: str, reason: str,
    note: str = "", token_id: int | None = None,
):
    """Append a human decision to a gate (append-only; the newest supersedes).

    Args:
        session: Open session (the caller commits).
        gate_id: The gate.
        decided_by: The identity recording it: the API token's name or the embedded
            CLI's OS user, never a name the client chose.
        decision: One of :data:`DECISIONS`.
        reason: Why; required when it differs from the gate's own decision (the timing
            verdict combined with the semantic verdict, e.g. ``reject (semantics)``).
        note: Free text the client added.
        token_id: The API token used (``None`` for the embedded CLI).

    A ``rerun`` decision also queues a new gate with the same request
    (:func:`orchestrator.usecases.rerun.requeue_gate`); its id is kept with the decision.

    Raises:
        NotFound: No gate has that id.
        ValidationFailed: Unknown decision or an override of the timing verdict without
            a reason.
    """
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    if decision not in DECISIONS:
        raise ValidationFailed("decision", f"must be one of {', '.join(DECISIONS)}")
    if not decided_by.strip():
        raise ValidationFailed("decided_by", "must name who decided")
    primary = next((v for v in reversed(gate.verdicts) if v.is_primary), None)
    automatic = primary.verdict if primary is not None else None
    if gate.semantic_verdicts and gate.semantic_verdicts[-1].decision:
        automatic = gate.semantic_verdicts[-1].decision  # timing and semantics combined
    if not reason.strip() and (automatic or "").removesuffix(" (semantics)") != decision:
        raise ValidationFailed("reason", f"a decision that differs from the gate's decision "
                                         f"({automatic or 'none'}: timing and semantics) needs a reason")
    if gate.status not in TERMINAL_GATE_STATUSES:
        raise Conflict(f"gate {gate_id} is {gate.status}; decide once it has finished")
    if gate.status != "succeeded" and decision not in ("reject", "rerun"):
        raise ValidationFailed("decision", f"gate {gate_id} {gate.status} without a measurement: "
                                           "only 'reject' or 'rerun' can be recorded")
    rerun_gate_id = None
    if decision == "rerun":
        from orchestrator.usecases.rerun import requeue_gate

        rerun_gate_id = requeue_gate(session=session, gate=gate).id
    return store.decisions.add_decision(
        session=session, gate_id=gate_id, decided_by=decided_by, decision=decision, reason=reason,
        note=note, token_id=token_id, rerun_gate_id=rerun_gate_id,
    )


def gate_overhead(*, session: Session, gate_id: int, data_dir: Path) -> dict[str, Any]:
    """Where the allocation's wall time went, what it cost and what precision it bought.

    Returns:
        Empty while the driver runs; then ``allocation_wall_s`` (driver start to end),
        ``measured_s`` (sum of the measured slowest-rank step times of all runs),
        ``warmup_s``, ``fixed_s`` (per-run launch to first step plus last step to exit,
        summed), ``health_s``, ``runs_wall_s``, ``other_s`` (the rest: sources, polling
        gaps), ``overhead_pct`` = 100 x (1 - measured / wall), ``num_runs``,
        ``accelerator_s`` = wall x GPUs of the allocation (``None`` on CPU) with
        ``num_gpus``, ``rank_s`` = wall x ranks, ``per_run`` (each run's phase seconds,
        see ``executors.driver.phases``) and ``median_precision_pct`` (per run, the
        half-width of the 95% order-statistic interval of its median, percent of the
        median; DESIGN.md section 2 run median).
    """
    import datetime as dt

    from orchestrator.executors.plan import GatePaths, read_json
    from orchestrator.verdict import median_interval_halfwidth_pct

    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    status = read_json(GatePaths.of(data_dir, gate_id).status)
    if not status or not status.get("ended_at"):
        return {}
    wall = (dt.datetime.fromisoformat(status["ended_at"])
            - dt.datetime.fromisoformat(status["started_at"])).total_seconds()
    runs = [t for t in status.get("timeline", []) if t.get("phase") == "run"]
    total = {key: sum(t.get(key) or 0.0 for t in runs)
             for key in ("measured_s", "warmup_s", "fixed_s", "wall_s")}
    health = sum(t.get("wall_s") or 0.0 for t in status.get("timeline", [])
                 if str(t.get("phase")).startswith("health"))
    topo = gate.topology_request or {}
    num_gpus = int(topo.get("nodes", 1)) * int(topo.get("gpus_per_node", 0))
    ranks = int(topo.get("nodes", 1)) * int(topo.get("ntasks_per_node") or topo.get("gpus_per_node") or 2)
    precision = {}
    for run in gate.runs:
        if run.num_warmup_steps is not None and run.num_measured_steps and run.slowest_rank_step_s:
            measured = run.slowest_rank_step_s[run.num_warmup_steps:
                                               run.num_warmup_steps + run.num_measured_steps]
            precision[run.order] = median_interval_halfwidth_pct(measured)
    return {
        "allocation_wall_s": wall,
        "measured_s": total["measured_s"],
        "warmup_s": total["warmup_s"],
        "fixed_s": total["fixed_s"],
        "health_s": health,
        "runs_wall_s": total["wall_s"],
        "other_s": max(0.0, wall - total["wall_s"] - health),
        "overhead_pct": 100.0 * (1.0 - total["measured_s"] / wall) if wall > 0 else None,
        "num_runs": len(runs),
        "num_gpus": num_gpus,
        "accelerator_s": wall * num_gpus if num_gpus else None,
        "rank_s": wall * ranks,
        "per_run": runs,
        "median_precision_pct": precision,
        "window": status.get("window"),
    }
