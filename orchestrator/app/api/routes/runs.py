"""``/runs``: show a run, stream its raw log, import a log."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path as FsPath
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from orchestrator.app.api.deps import ReadAccessDep, SessionDep, SettingsDep, SubmitTokenDep
from orchestrator.domain.errors import ValidationFailed
from orchestrator.schemas.imports import RunImportPublic
from orchestrator.schemas.views import RunDetailPublic
from orchestrator.usecases import views
from orchestrator.usecases.imports import import_log

__all__ = ["router"]

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/runs", tags=["runs"])

RunId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Run id.")]


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    response_model=RunImportPublic,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "text/plain": {"schema": {"type": "string"}},
            },
        }
    },
)
async def import_run_log(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    _token: SubmitTokenDep,
    response: Response,
    filename: Annotated[
        str, Query(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._+-]+$")
    ] = "upload.log",
    log_format: Annotated[
        Literal["record", "torchtitan", "megatron"],
        Query(alias="format", description="How the log is read: the record contract, or a framework's "
                                          "own log lines (docs/integrations.md).")] = "record",
    warmup_steps: Annotated[int | None, Query(
        ge=0, le=100000, description="Warmup steps of a torchtitan/megatron log (default 10).")] = None,
) -> RunImportPublic:
    """Upload a run log (raw body, e.g. ``curl --data-binary @run.log``) and store it like
    ``axbgate import-log`` (``?format=torchtitan`` like ``--format``): the log is kept with
    its SHA-256 and the run stored. A log
    imported before answers 200 with the stored run. The body is streamed to a temporary
    file (at most ``limits.max_import_bytes``, default 512 MiB: 413 past it) and read line
    by line; a malformed record answers 422 naming the line, and nothing of it is kept."""
    limit = settings.limits.max_import_bytes
    upload_dir = settings.artifacts_dir / "uploads"
    upload_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=upload_dir, prefix=".upload-", suffix=".log")
    tmp = FsPath(tmp_name)
    try:
        size = 0
        with os.fdopen(fd, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HTTPException(status_code=413, detail=f"log is larger than {limit} bytes "
                                                                "(limits.max_import_bytes)")
                out.write(chunk)
        if size == 0:
            raise ValidationFailed("body", "the request body is empty; send the log's bytes")
        try:
            # Parsing a large log is CPU work: run it in the thread pool so the event loop
            # keeps answering other requests.
            summary = await run_in_threadpool(
                _import_and_commit, session, tmp, settings.artifacts_dir, log_format, warmup_steps
            )
        except ValidationFailed as exc:
            raise ValidationFailed("body", exc.message.replace(str(tmp), filename)) from None
    finally:
        tmp.unlink(missing_ok=True)
    if summary.already_imported:
        response.status_code = status.HTTP_200_OK
    return summary.model_copy(update={"path": filename})


def _import_and_commit(session, path, artifacts_dir, log_format="record",
                       warmup_steps=None) -> RunImportPublic:
    try:
        summary = import_log(session=session, path=path, artifacts_dir=artifacts_dir,
                             log_format=log_format, warmup_steps=warmup_steps)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return summary


@router.get("/{run_id}", response_model=RunDetailPublic)
def get_run(
    run_id: RunId,
    session: SessionDep,
    _read: ReadAccessDep,
    steps_offset: Annotated[int, Query(ge=0, le=2**62, description="Step records to skip.")] = 0,
    steps_limit: Annotated[int, Query(ge=0, le=10_000, description="Step records per page.")] = (
        views.DEFAULT_STEPS_PAGE),
) -> RunDetailPublic:
    """One run: median, MFU, provenance, artifact hashes and ONE PAGE of its per-step
    records: ``steps`` and ``slowest_rank_step_s`` hold entries ``steps_offset`` to
    ``steps_offset + steps_limit`` (default 1000); ``num_steps`` and ``num_series_steps``
    are the totals."""
    return views.get_run_view(session=session, run_id=run_id, steps_offset=steps_offset,
                              steps_limit=steps_limit)


@router.get(
    "/{run_id}/log",
    response_class=FileResponse,
    responses={200: {"content": {"text/plain": {}}, "description": "The raw log."}},
)
def get_run_log(
    run_id: RunId,
    session: SessionDep,
    settings: SettingsDep,
    _read: ReadAccessDep,
    artifact_id: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
) -> FileResponse:
    """Stream the stored raw log of a run. Only files recorded as the run's artifacts and
    kept under the artifact folder (imported logs) or the run's gate folder are served."""
    path, artifact = views.run_log_path(
        session=session,
        run_id=run_id,
        artifacts_dir=settings.artifacts_dir,
        data_dir=settings.data_dir,
        artifact_id=artifact_id,
    )
    return FileResponse(
        path,
        media_type="text/plain; charset=utf-8",
        headers={"X-Content-SHA256": artifact.sha256},
        content_disposition_type="inline",
        filename=f"run-{run_id}-{artifact.kind}-{artifact.sha256[:12]}.log",
    )
