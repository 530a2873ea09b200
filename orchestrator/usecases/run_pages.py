"""Read-side use cases of the run, allocation and imported-run pages."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.errors import NotFound
from orchestrator.executors.plan import GatePaths
from orchestrator.schemas.gates import RunPublic
from orchestrator.usecases.views import run_log_path

__all__ = ["LOG_TAIL_BYTES", "list_imported_runs", "run_log_tail"]

logger = logging.getLogger(__name__)

LOG_TAIL_BYTES = 16_384
"""Bytes read from the end of a raw log for a page (the whole log stays downloadable)."""


def list_imported_runs(*, session: Session, limit: int = 200) -> list[RunPublic]:
    """Runs imported with ``axbgate import`` / ``POST /runs/import``, newest first."""
    rows = store.runs.imported_runs(session=session, limit=limit)
    return [RunPublic.model_validate({**{k: getattr(r, k) for k in RunPublic.model_fields
                                         if k != "slowest_rank_step_s"},
                                      "slowest_rank_step_s": []}) for r in rows]


def run_log_tail(*, session: Session, run_id: int, artifacts_dir: Path, data_dir: Path,
                 num_lines: int = 40) -> str | None:
    """The last ``num_lines`` lines of a run's raw log (at most :data:`LOG_TAIL_BYTES`), or
    None when the run has no log (an artifact, see :func:`views.run_log_path`, or the raw
    log in its gate folder).

    Raises:
        NotFound: No run has that id.
    """
    try:
        path, _art = run_log_path(session=session, run_id=run_id, artifacts_dir=artifacts_dir,
                                  data_dir=data_dir)
    except NotFound:
        run = store.runs.get_run(session=session, run_id=run_id)
        if run.gate_id is None:
            return None
        # A run that failed before its outcome was stored has its raw log only in the gate
        # folder (executors/plan.py GatePaths), not yet an artifact.
        path = GatePaths.of(data_dir, run.gate_id).run_log(run.order, run.role or "X")
        if not path.is_file():
            return None
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(size - LOG_TAIL_BYTES, 0))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        logger.warning("run=%s log %s unreadable: %s", run_id, path, exc)
        return None
    return "\n".join(text.splitlines()[-num_lines:])
