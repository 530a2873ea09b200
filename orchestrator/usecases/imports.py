"""Use case: import a run log (either record dialect) into the ledger.

One transaction per log: the raw file is kept (content-addressed copy), its SHA-256
stored as an artifact, the run (and the allocation with its health checks, when the log
has health records) stored. Importing the same bytes again returns what was stored.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Artifact, Run
from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.measure import MEDIAN_MISMATCH_REL, measure_run
from orchestrator.domain.records import ParsedLog, health_check_rows, parse
from orchestrator.executors.plan import hash_file
from orchestrator.schemas import RunImportPublic

__all__ = ["import_log", "store_health"]

logger = logging.getLogger(__name__)


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
    log_median = (run.result_extra or {}).get("log_median_step_s")
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
        num_steps=len(run.slowest_rank_step_s or []),
        mfu_pct=run.mfu_pct,
        allocation_id=run.allocation_id,
    )


def import_log(*, session: Session, path: Path, artifacts_dir: Path) -> RunImportPublic:
    """Parse, keep and store one run log.

    Args:
        session: Open session (committed by the caller).
        path: The log file.
        artifacts_dir: Where kept copies of raw logs go.

    Returns:
        A :class:`RunImportPublic` summary.

    Raises:
        ValidationFailed: The file is missing, unreadable, or holds no record lines.
        orchestrator.domain.errors.RecordError: A record line is malformed (names the line).
    """
    if not path.is_file():
        raise ValidationFailed("path", f"{path} is not a readable file")
    sha256, size = hash_file(path)
    text = path.read_bytes().decode("utf-8", errors="replace")
    parsed = parse(text)
    if parsed.num_record_lines == 0:
        raise ValidationFailed(
            "path",
            f"{path} holds no record lines (AXBGATE_* or BF16_*/HEALTH_GATE); "
            "see docs/record-contract.md",
        )
    base = {"path": str(path), "log_sha256": sha256, "size_bytes": size, "dialect": parsed.dialect}
    existing = session.scalars(
        select(Artifact).where(Artifact.sha256 == sha256, Artifact.kind == "imported_log")
    ).first()
    if existing is not None:
        base["stored_path"] = existing.path
        if existing.run_id is not None:
            run = store.runs.get_run(session=session, run_id=existing.run_id)
            return _summary_from_run(run, base).model_copy(update={"already_imported": True})
        return RunImportPublic(
            **base, already_imported=True, allocation_id=existing.allocation_id
        )
    kept = _keep_file(path, artifacts_dir / "logs", sha256)
    base["stored_path"] = str(kept)
    allocation = store_health(session=session, parsed=parsed)
    run = None
    if parsed.steps or parsed.timing or parsed.result:
        outcome = measure_run(parsed)
        run = store.runs.create_run(
            session=session,
            role=None,
            order=0,
            status=outcome.status,
            error=outcome.error,
            allocation_id=allocation.id if allocation else None,
            source_sha=parsed.provenance.get("source_sha"),
            source_dirty=bool(parsed.provenance.get("source_dirty", False)),
            env=parsed.provenance.get("env") or {},
            command=parsed.provenance.get("command") or [],
            **outcome.fields,
        )
        store.runs.add_steps(
            session=session,
            run=run,
            steps=[
                {
                    "step": s.step,
                    "slowest_rank_step_s": s.slowest_rank_step_s,
                    "rank_step_s": s.rank_step_s,
                    "loss": s.loss,
                    "grad_norm": s.grad_norm,
                    "phase": s.phase,
                }
                for s in parsed.steps
            ],
        )
    store.artifacts.add_artifact(
        session=session,
        path=str(kept),
        size_bytes=size,
        sha256=sha256,
        kind="imported_log",
        run_id=run.id if run else None,
        allocation_id=allocation.id if allocation else None,
    )
    logger.info("imported log %s sha256=%s run=%s", path, sha256, run.id if run else None)
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


def _keep_file(src: Path, store_dir: Path, sha256: str, suffix: str = ".log") -> Path:
    """Copy ``src`` to ``store_dir/<sha256[:2]>/<sha256><suffix>`` atomically.

    The copy is written to a temporary file in the same folder and renamed, so a reader
    never sees half a file; an existing copy (same hash) is left alone.

    Returns:
        The path of the kept copy.
    """
    dest = store_dir / sha256[:2] / f"{sha256}{suffix}"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest
