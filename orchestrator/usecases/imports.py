"""Use case: import a run log (either record dialect) into the ledger.

One transaction per log, in bounded memory whatever its size: the file is hashed, its
import claimed (one row per SHA-256, so concurrent imports of the same bytes store one
run), then read line by line through the same :class:`RecordParser` the allocation
driver uses; step records go to the database in chunks as they are read. The raw file is
kept (content-addressed copy) only once the whole log parsed. Importing the same bytes
again returns what was stored.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Artifact, Run
from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.measure import MEDIAN_MISMATCH_REL, RunOutcome, measure_run
from orchestrator.domain.framework_logs import log_parser
from orchestrator.domain.records import ParsedLog, health_check_rows
from orchestrator.executors.files import hash_file, keep_file, read_line_blocks
from orchestrator.schemas import RunImportPublic

__all__ = ["import_log", "store_health"]

logger = logging.getLogger(__name__)

_STEP_BATCH = 10_000
"""Step records buffered before they are written."""


def store_health(*, session: Session, parsed: ParsedLog, extra_facts: dict | None = None):
    """Store the allocation and its health checks found in a parsed log.

    Args:
        session: Open session.
        parsed: A parsed log holding ``AXBGATE_HEALTH`` / ``HEALTH_GATE`` records.
        extra_facts: Allocation facts known from outside the log (job id, executor).

    Returns:
        The :class:`~orchestrator.db.models.Allocation`, or ``None`` when the log has no
        health records.
    """
    if not parsed.health and parsed.allocation is None:
        return None
    facts = dict(parsed.allocation or {})
    facts.setdefault("health_verdict", "unknown")
    if "criteria" in facts and not isinstance(facts["criteria"], dict):
        facts["criteria"] = {"name": str(facts["criteria"])}
    facts.update(extra_facts or {})
    allocation = store.allocations.create_allocation(session=session, facts=facts)
    store.allocations.add_health_checks(
        session=session, allocation=allocation, checks=health_check_rows(parsed)
    )
    return allocation


def _summary_from_run(run: Run, base: dict) -> RunImportPublic:
    extra = run.result_extra or {}
    log_median = extra.get("log_median_step_s")
    mismatch = (
        log_median is not None and run.median_step_s is not None
        and abs(log_median - run.median_step_s) > MEDIAN_MISMATCH_REL * run.median_step_s
    )
    return RunImportPublic(
        log_median_step_s=log_median,
        median_mismatch=mismatch,
        **base,
        run_id=run.id,
        status=run.status,
        error=run.error,
        median_step_s=run.median_step_s,
        warmup_steps=run.num_warmup_steps,
        measured_steps=run.num_measured_steps,
        num_steps=len(run.slowest_rank_step_s or extra.get("rank0_step_s") or []),
        mfu_pct=run.mfu_pct,
        allocation_id=run.allocation_id,
        step_series=extra.get("step_series"),
        notes=list(extra.get("notes") or []),
    )


def _already_imported(session: Session, sha256: str, base: dict) -> RunImportPublic:
    existing = store.artifacts.get_imported_log(session=session, sha256=sha256)
    assert existing is not None, "claim_imported_log found a row that is not there"
    base = {**base, "stored_path": existing.path, "already_imported": True}
    allocation = existing.allocation_id and store.allocations.get_allocation(
        session=session, allocation_id=existing.allocation_id)
    health = {"health_verdict": allocation.health_verdict if allocation else None,
              "num_health_checks": len(allocation.health_checks) if allocation else 0}
    if existing.run_id is not None:
        run = store.runs.get_run(session=session, run_id=existing.run_id)
        base["dialect"] = (run.result_extra or {}).get("log_dialect")
        return _summary_from_run(run, base).model_copy(update=health if allocation else {})
    return RunImportPublic(**base, allocation_id=existing.allocation_id, **health)


class _StepWriter:
    """Buffers step rows and writes them in chunks to a run created on first use."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.run: Run | None = None
        self.rows: list[tuple] = []
        self.last_step = -1
        self.increasing = True
        """Steps so far strictly increase: none can already be stored for the new run."""

    def get_run(self) -> Run:
        if self.run is None:
            self.run = store.runs.create_run(session=self.session, role=None, order=0, status="running")
        return self.run

    def add_rows(self, rows: list[tuple]) -> None:
        """Buffer ``(step, slowest_rank_step_s, rank_step_s, loss, grad_norm, phase)`` rows."""
        if not rows:
            return
        if self.increasing:
            last = self.last_step
            for row in rows:
                if row[0] <= last:
                    self.increasing = False
                    break
                last = row[0]
        self.last_step = rows[-1][0]
        self.rows.extend(rows)
        if len(self.rows) >= _STEP_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            store.runs.add_step_rows(session=self.session, run=self.get_run(), rows=self.rows,
                                     new_steps=self.increasing)
            self.rows = []


def _parse_and_store_steps(path: Path, writer: _StepWriter, parser) -> ParsedLog:
    with open(path, "rb") as fh:
        for block in read_line_blocks(fh):
            rows = parser.feed_lines(block)
            if parser.error is not None:
                raise parser.error  # stops at the first bad record; the caller rolls back
            writer.add_rows(rows)
    if hasattr(parser, "drain_rows"):  # an adapter's steps not known before the end
        writer.add_rows(parser.drain_rows())
        if parser.error is not None:
            raise parser.error
    return parser.finish()


def _store_run(session: Session, writer: _StepWriter, parsed: ParsedLog, outcome: RunOutcome,
               allocation_id: int | None) -> Run:
    writer.flush()
    prov = parsed.provenance
    fields = dict(outcome.fields)
    fields["result_extra"] = {**fields.get("result_extra", {}), "log_dialect": parsed.dialect}
    return store.runs.update_run(
        session=session, run=writer.get_run(), status=outcome.status, error=outcome.error,
        allocation_id=allocation_id, source_sha=prov.get("source_sha"),
        source_dirty=bool(prov.get("source_dirty", False)), env=prov.get("env") or {},
        command=prov.get("command") or [], **fields,
    )


def import_log(*, session: Session, path: Path, artifacts_dir: Path, log_format: str = "record",
               warmup_steps: int | None = None) -> RunImportPublic:
    """Parse, keep and store one run log, streaming (memory does not grow with its size).

    Args:
        session: Open session with no statement run yet (committed by the caller; on an
            error the caller rolls back and nothing of this log is stored).
        path: The log file.
        artifacts_dir: Where kept copies of raw logs go.
        log_format: ``record`` (either record dialect) or a framework adapter
            (``torchtitan``, ``megatron``: their own log lines, docs/integrations.md).
        warmup_steps: An adapter's warmup, steps from the log's first step (None: 10,
            with a note); a record log states its own counts.

    Returns:
        A :class:`RunImportPublic` summary (``already_imported`` when these bytes were
        imported before, by this or a concurrent call).

    Raises:
        ValidationFailed: The file is missing, unreadable, holds no record lines, or the
            format is unknown.
        orchestrator.domain.errors.RecordError: A record line is malformed or over a bound
            of docs/record-contract.md (the error names the line).
    """
    if not path.is_file():
        raise ValidationFailed("path", f"{path} is not a readable file")
    if log_format == "record" and warmup_steps is not None:
        raise ValidationFailed("warmup_steps", "warmup_steps applies to torchtitan/megatron logs; a "
                                               "record log states its own counts")
    try:
        parser = log_parser(log_format, warmup_steps=warmup_steps)
    except ValueError as exc:
        raise ValidationFailed("format", str(exc)) from None
    try:
        sha256, size = hash_file(path)
    except OSError as exc:
        raise ValidationFailed("path", f"{path} cannot be read: {exc.strerror}") from None
    kept = artifacts_dir / "logs" / sha256[:2] / f"{sha256}.log"
    base = {"path": str(path), "log_sha256": sha256, "size_bytes": size, "stored_path": str(kept),
            "dialect": None}
    claim: Artifact | None = store.artifacts.claim_imported_log(
        session=session, sha256=sha256, path=str(kept), size_bytes=size)
    if claim is None:
        return _already_imported(session, sha256, base)
    writer = _StepWriter(session)
    parsed = _parse_and_store_steps(path, writer, parser)
    if parsed.num_record_lines == 0 and not parsed.num_steps:
        what = ("record lines (AXBGATE_* or BF16_*/HEALTH_GATE); see docs/record-contract.md"
                if log_format == "record" else
                f"{log_format} metric lines; see docs/integrations.md (or import with another --format)")
        raise ValidationFailed("path", f"{path} holds no {what}")
    base["dialect"] = parsed.dialect
    allocation = store_health(session=session, parsed=parsed)
    run = None
    if parsed.num_steps or parsed.timing or parsed.result:
        outcome = measure_run(parsed)
        run = _store_run(session, writer, parsed, outcome, allocation.id if allocation else None)
    claim.run_id = run.id if run else None
    claim.allocation_id = allocation.id if allocation else None
    session.flush()
    keep_file(path, kept.parent.parent, sha256)
    logger.info("imported log %s sha256=%s run=%s steps=%d", path, sha256, run.id if run else None,
                parsed.num_steps)
    if run is not None:
        summary = _summary_from_run(run, base)
        if allocation is not None:
            summary = summary.model_copy(update={"health_verdict": allocation.health_verdict,
                                                 "num_health_checks": len(parsed.health)})
        return summary
    return RunImportPublic(
        **base,
        allocation_id=allocation.id if allocation else None,
        health_verdict=allocation.health_verdict if allocation else None,
        num_health_checks=len(parsed.health),
    )
