"""Read-side queries of the decision ledger: filtered gate pages, eligibility, history.

A gate's *effective decision* is its newest recorded decision, else the decision its
newest semantic verdict combined (``reject (semantics)``, ``not comparable``, or the timing
verdict), else its primary timing verdict (DESIGN.md section 1; issue 19). Filters and ordering run in SQL on both backends; the
page is loaded with one query plus one count.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from sqlalchemy import Select, String, and_, cast, func, or_, select, union
from sqlalchemy.orm import Session, aliased, defer, selectinload

from orchestrator.db.models import (
    Allocation,
    Artifact,
    Decision,
    Gate,
    SemanticVerdict,
    TrackedRepository,
    Verdict,
)

__all__ = [
    "GateQuery",
    "LedgerRow",
    "all_rows",
    "artifacts_of_gate",
    "eligible_accepted_candidates",
    "eligible_accepted_rows",
    "family_rows",
    "gate_row",
    "history_control_rows",
    "history_rows",
    "ledger_version",
    "list_gate_rows",
]

LedgerRow = tuple[Gate, Verdict | None, Decision | None, Allocation | None]
"""A gate with its primary verdict, newest decision and allocation (each may be missing)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateQuery:
    """Filters of a ledger page; ``None`` means no filter on that field."""

    status: str | None = None
    verdict: str | None = None
    decision: str | None = None
    kind: str | None = None
    tag: str | None = None
    family: str | None = None
    topology: str | None = None
    recipe: str | None = None
    repository: str | None = None
    q: str | None = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    baseline_eligible: bool | None = None


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _base_select(gate_ids: Sequence[int] | None = None):
    """Gate joined with its primary verdict, newest decision and allocation (the newest
    decision is looked up for ``gate_ids`` only, when given)."""
    newest_q = select(Decision.gate_id, func.max(Decision.id).label("decision_id"))
    if gate_ids is not None:
        newest_q = newest_q.where(Decision.gate_id.in_(list(gate_ids)))
    newest = newest_q.group_by(Decision.gate_id).subquery("newest_decision")
    dec = aliased(Decision, name="dec")
    ver = aliased(Verdict, name="ver")
    alloc = aliased(Allocation, name="alloc")
    stmt = (
        select(Gate, ver, dec, alloc)
        .outerjoin(ver, and_(ver.gate_id == Gate.id, ver.is_primary.is_(True)))
        .outerjoin(newest, newest.c.gate_id == Gate.id)
        .outerjoin(dec, dec.id == newest.c.decision_id)
        .outerjoin(alloc, alloc.id == Gate.allocation_id)
        .options(defer(Gate.recipe), defer(Gate.policy_params), selectinload(Gate.semantic_verdicts))
    )
    return stmt, ver, dec, alloc


def _effective_decision(ver, dec) -> object:
    """SQL expression of the effective decision (module docstring)."""
    semantic = (select(SemanticVerdict.decision).where(SemanticVerdict.gate_id == Gate.id)
                .order_by(SemanticVerdict.id.desc()).limit(1).correlate(Gate).scalar_subquery())
    return func.coalesce(dec.decision, semantic, ver.verdict)


def _decided_as(decision: str):
    """Ids of gates whose effective decision CAN be ``decision``: a recorded decision, a
    semantic verdict's decision or a primary verdict with that value (a superset)."""
    return union(
        select(Verdict.gate_id.label("gate_id")).where(Verdict.is_primary.is_(True),
                                                       Verdict.verdict == decision),
        select(Decision.gate_id.label("gate_id")).where(Decision.decision == decision),
        select(SemanticVerdict.gate_id.label("gate_id")).where(SemanticVerdict.decision == decision),
    )


def _eligible(alloc) -> object:
    return and_(Gate.status == "succeeded", alloc.health_verdict == "healthy")


def _apply_filters(stmt: Select, query: GateQuery, ver, dec, alloc) -> Select:
    conds = []
    if query.status is not None:
        conds.append(Gate.status == query.status)
    if query.verdict is not None:
        conds.append(ver.verdict == query.verdict)
    if query.decision is not None:
        conds.append(_effective_decision(ver, dec) == query.decision)
        # A necessary condition the planner can drive from indexes (ix_verdicts_verdict_is_primary)
        # instead of joining every gate to its newest decision.
        conds.append(Gate.id.in_(_decided_as(query.decision)))
    if query.kind is not None:
        conds.append(Gate.kind == query.kind)
    if query.tag is not None:
        # Tags are validated to [A-Za-z0-9_.:/+-], so the quoted JSON element is exact.
        pattern = f'%"{_like_escape(query.tag)}"%'
        conds.append(cast(Gate.tags, String).like(pattern, escape="\\"))
    if query.family is not None:
        conds.append(Gate.family == query.family)
    if query.topology is not None:
        conds.append(alloc.topology == query.topology)
    if query.recipe is not None:
        conds.append(Gate.recipe_name == query.recipe)
    if query.repository is not None:
        tracked = select(TrackedRepository.id).where(TrackedRepository.url == query.repository)
        conds.append(
            or_(
                Gate.repository_id.in_(tracked.scalar_subquery()),
                Gate.candidate_spec["source"]["repo"].as_string() == query.repository,
            )
        )
    if query.q is not None:
        pattern = f"%{_like_escape(query.q.lower())}%"
        conds.append(
            or_(
                func.lower(Gate.title).like(pattern, escape="\\"),
                func.lower(func.coalesce(Gate.family, "")).like(pattern, escape="\\"),
            )
        )
    if query.created_after is not None:
        conds.append(Gate.created_at >= query.created_after)
    if query.created_before is not None:
        conds.append(Gate.created_at < query.created_before)
    if query.baseline_eligible is True:
        conds.append(_eligible(alloc))
    elif query.baseline_eligible is False:
        conds.append(or_(Gate.status != "succeeded", alloc.health_verdict.is_(None),
                         alloc.health_verdict != "healthy"))
    return stmt.where(*conds) if conds else stmt


def _id_select(query: GateQuery) -> Select:
    """``SELECT gates.id`` with the filters, joined only to what they read (the verdict for
    ``verdict``/``decision``, the newest decision for ``decision``, the allocation for
    ``topology``/``baseline_eligible``)."""
    stmt = select(Gate.id)
    ver = dec = alloc = None
    if query.verdict is not None or query.decision is not None:
        ver = aliased(Verdict, name="ver")
        stmt = stmt.outerjoin(ver, and_(ver.gate_id == Gate.id, ver.is_primary.is_(True)))
    if query.decision is not None:
        newest = (select(Decision.gate_id, func.max(Decision.id).label("decision_id"))
                  .group_by(Decision.gate_id).subquery("newest_decision"))
        dec = aliased(Decision, name="dec")
        stmt = (stmt.outerjoin(newest, newest.c.gate_id == Gate.id)
                .outerjoin(dec, dec.id == newest.c.decision_id))
    if query.topology is not None or query.baseline_eligible is not None:
        alloc = aliased(Allocation, name="alloc")
        stmt = stmt.outerjoin(alloc, alloc.id == Gate.allocation_id)
    return _apply_filters(stmt, query, ver, dec, alloc)


def list_gate_rows(
    *, session: Session, query: GateQuery, skip: int = 0, limit: int = 50
) -> tuple[list[LedgerRow], int]:
    """Return one page of ledger rows, newest first, and the total matching count.

    The page's gate ids are found first (joined only to what the filters read, see
    :func:`_id_select`; ``ix_gates_created_at_id`` gives the order), then only those rows
    are joined (a deferred join: 100,000 gates cost an index walk, not a join).

    Args:
        session: Open session.
        query: Filters.
        skip: Rows to skip.
        limit: Rows to return.

    Returns:
        ``(rows, count)``.
    """
    stmt = _id_select(query)
    count = session.scalar(select(func.count()).select_from(stmt.subquery()))
    ids = list(session.scalars(stmt.order_by(Gate.created_at.desc(), Gate.id.desc())
                               .offset(skip).limit(limit)))
    rows = all_rows(session=session, gate_ids=ids)
    position = {gate_id: i for i, gate_id in enumerate(ids)}
    rows.sort(key=lambda row: position[row[0].id])
    return rows, int(count or 0)


def gate_row(*, session: Session, gate_id: int) -> LedgerRow | None:
    """Return the ledger row of one gate, or ``None``."""
    stmt, _ver, _dec, _alloc = _base_select([gate_id])
    row = session.execute(stmt.where(Gate.id == gate_id)).first()
    return tuple(row) if row is not None else None  # type: ignore[return-value]


def family_rows(
    *, session: Session, gate: Gate, limit: int = 20
) -> list[LedgerRow]:
    """Return earlier gates of the same family (or the same title when there is none).

    Args:
        session: Open session.
        gate: The gate whose history is wanted.
        limit: Most rows to return.

    Returns:
        Ledger rows created before ``gate``, newest first.
    """
    stmt, _ver, _dec, _alloc = _base_select()
    if gate.family:
        same = Gate.family == gate.family
    elif gate.title:
        same = and_(Gate.family.is_(None), Gate.title == gate.title)
    else:
        return []
    stmt = stmt.where(same, Gate.id < gate.id).order_by(Gate.id.desc()).limit(limit)
    return [tuple(r) for r in session.execute(stmt).all()]  # type: ignore[misc]


def eligible_accepted_candidates(*, session: Session) -> list[tuple]:
    """Return light tuples of every baseline-eligible gate whose effective decision is
    ``accept``: ``(gate_id, allocation topology, recipe_name, workload, topology_request,
    candidate_s)`` with ``candidate_s`` the primary verdict's candidate median, seconds."""
    # Only gates accepted by their primary verdict or by some decision can qualify
    # (ix_verdicts_verdict_is_primary): no join over the whole ledger.
    cand = _decided_as("accept").subquery("cand")
    newest = (
        select(Decision.gate_id, func.max(Decision.id).label("decision_id"))
        .where(Decision.gate_id.in_(select(cand.c.gate_id)))
        .group_by(Decision.gate_id)
        .subquery("newest_decision")
    )
    dec = aliased(Decision, name="dec")
    ver = aliased(Verdict, name="ver")
    alloc = aliased(Allocation, name="alloc")
    stmt = (
        select(
            Gate.id, alloc.topology, Gate.recipe_name, Gate.workload, Gate.topology_request,
            ver.numbers["candidate_s"].as_float(),
        )
        .join(cand, cand.c.gate_id == Gate.id)
        .join(ver, and_(ver.gate_id == Gate.id, ver.is_primary.is_(True)))
        .join(alloc, alloc.id == Gate.allocation_id)
        .outerjoin(newest, newest.c.gate_id == Gate.id)
        .outerjoin(dec, dec.id == newest.c.decision_id)
        .where(_eligible(alloc), _effective_decision(ver, dec) == "accept")
    )
    return [tuple(r) for r in session.execute(stmt).all()]


def eligible_accepted_rows(*, session: Session) -> list[LedgerRow]:
    """Return every baseline-eligible gate whose effective decision is ``accept``."""
    stmt, ver, dec, alloc = _base_select()
    stmt = stmt.where(_eligible(alloc), _effective_decision(ver, dec) == "accept")
    return [tuple(r) for r in session.execute(stmt.order_by(Gate.id)).all()]  # type: ignore[misc]


def all_rows(*, session: Session, gate_ids: Sequence[int] | None = None) -> list[LedgerRow]:
    """Return ledger rows of every gate (or of ``gate_ids``), oldest first."""
    stmt, _ver, _dec, _alloc = _base_select(gate_ids)
    if gate_ids is not None:
        stmt = stmt.where(Gate.id.in_(list(gate_ids)))
    return [tuple(r) for r in session.execute(stmt.order_by(Gate.id)).all()]  # type: ignore[misc]


def artifacts_of_gate(*, session: Session, gate: Gate) -> list[Artifact]:
    """Return the artifacts of a gate, its runs and its allocation, oldest first."""
    run_ids = [r.id for r in gate.runs]
    conds = [Artifact.gate_id == gate.id]
    if run_ids:
        conds.append(Artifact.run_id.in_(run_ids))
    if gate.allocation_id is not None:
        conds.append(Artifact.allocation_id == gate.allocation_id)
    return list(session.scalars(select(Artifact).where(or_(*conds)).order_by(Artifact.id)))


def history_rows(*, session: Session, family: str | None = None, recipe: str | None = None,
                 topology: str | None = None, limit: int = 1000) -> list[tuple]:
    """Light rows of succeeded gates with a primary verdict, newest first, for the history
    plot: ``(gate_id, created_at, title, verdict, midpoint_s, candidate_s, delta_pct,
    drift_pct, threshold_pct)`` (seconds and percent, from the primary verdict's numbers).

    Args:
        session: Open session.
        family: Only gates of this family.
        recipe: Only gates of this bundled recipe name.
        topology: Only gates whose allocation has this topology string.
        limit: Newest gates returned at most.
    """
    ids = select(Gate.id).where(Gate.status == "succeeded")
    if family is not None:
        ids = ids.where(Gate.family == family)
    if recipe is not None:
        ids = ids.where(Gate.recipe_name == recipe)
    if topology is not None:
        ids = ids.join(Allocation, Allocation.id == Gate.allocation_id).where(
            Allocation.topology == topology)
    page = ids.order_by(Gate.created_at.desc(), Gate.id.desc()).limit(limit).subquery("page")
    ver = aliased(Verdict, name="ver")
    stmt = (
        select(Gate.id, Gate.created_at, Gate.title, ver.verdict,
               ver.numbers["midpoint_s"].as_float(), ver.numbers["candidate_s"].as_float(),
               ver.numbers["delta_pct"].as_float(), ver.numbers["drift_pct"].as_float(),
               ver.numbers["threshold_pct"].as_float())
        .join(ver, and_(ver.gate_id == Gate.id, ver.is_primary.is_(True)))
        .where(Gate.id.in_(select(page.c.id)))
        .order_by(Gate.created_at.desc(), Gate.id.desc())
    )
    return [tuple(r) for r in session.execute(stmt).all()]


def history_control_rows(*, session: Session, gate_ids: Sequence[int]) -> dict[int, tuple]:
    """What each gate's control identity is made of, for grouping the history plot:
    ``gate_id -> (workload, recipe_name, control_spec, topology_request, num_warmup_steps,
    num_measured_steps, options, gpu_model, clock_bin)`` (the last two None without an
    allocation).

    Args:
        session: Open session.
        gate_ids: Gates to look up (batched, 500 ids per query).
    """
    out: dict[int, tuple] = {}
    ids = list(gate_ids)
    for start in range(0, len(ids), 500):
        stmt = (select(Gate.id, Gate.workload, Gate.recipe_name, Gate.control_spec,
                       Gate.topology_request, Gate.num_warmup_steps, Gate.num_measured_steps,
                       Gate.options, Allocation.gpu_model, Allocation.clock_bin)
                .outerjoin(Allocation, Allocation.id == Gate.allocation_id)
                .where(Gate.id.in_(ids[start:start + 500])))
        for row in session.execute(stmt).all():
            out[row[0]] = tuple(row[1:])
    return out


def ledger_version(*, session: Session) -> tuple[int | None, ...]:
    """What changes whenever the stopping-point table can: the newest verdict (a gate
    finished), semantic verdict, decision and allocation ids (primary-key lookups)."""
    row = session.execute(select(select(func.max(Verdict.id)).scalar_subquery(),
                                 select(func.max(SemanticVerdict.id)).scalar_subquery(),
                                 select(func.max(Decision.id)).scalar_subquery(),
                                 select(func.max(Allocation.id)).scalar_subquery())).one()
    return tuple(row)  # type: ignore[return-value]
