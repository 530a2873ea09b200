"""The FastAPI application: ``create_app()``, lifespan and exception handlers."""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI
from sqlalchemy.orm import sessionmaker

from orchestrator.app.api.body_limit import BodyLimitMiddleware
from orchestrator.app.api.errors import install_error_handlers
from orchestrator.app.api.metrics import router as metrics_router
from orchestrator.app.api.openapi import declare_errors
from orchestrator.app.api.routes import (
    alerts,
    allocations,
    gates,
    health,
    repos,
    runs,
    stopping_points,
    verdicts,
)
from orchestrator.db.session import get_engine
from orchestrator.settings import Settings, get_settings

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API and web ledger.

    Args:
        settings: Settings to use (default: :func:`get_settings`).

    Returns:
        The application. Its lifespan makes sure the schema is current (the embedded
        SQLite ledger is migrated automatically) and starts the background services of
        :func:`orchestrator.runtime.build_services` (stopped in reverse order).
    """
    from orchestrator.app.web import mount_web
    from orchestrator.domain.secrets import configure_masking

    settings = settings or get_settings()
    configure_masking(settings.security.secret_patterns)
    engine = get_engine(settings.database_url, settings.database.echo)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from orchestrator.db.migrate import ensure_schema
        from orchestrator.runtime import build_services
        from orchestrator.runtime.private_files import check_private_files, prepare_private_files

        prepare_private_files(settings)  # under run_as_user: umask, ledger 0600 (issue 24)
        ensure_schema(settings.database_url)
        settings.artifacts_dir.mkdir(parents=True, exist_ok=True)
        check_private_files(settings)  # refuses a run account that could read the ledger
        app.state.services = build_services(settings)
        started = []
        try:
            for service in app.state.services:
                await _maybe_await(service.start())
                started.append(service)
                logger.info("service %s started", type(service).__name__,
                            extra={"event": "service.started", "service": type(service).__name__})
            yield
        finally:
            for service in reversed(started):
                try:
                    await _maybe_await(service.stop())
                    logger.info("service %s stopped", type(service).__name__,
                                extra={"event": "service.stopped", "service": type(service).__name__})
                except Exception:  # a failing stop must not keep the others running
                    logger.exception("service %s failed to stop", type(service).__name__)

    app = FastAPI(
        title="axbgate",
        version="0.1.0",
        description=(
            "A/X/B performance gates for GPU training on Slurm. Reads are open unless "
            "`AXBGATE_AUTH__READ_OPEN=false`; writes need `Authorization: Bearer <token>` "
            "with the route's scope: `submit` (gates, cancel, import, check), `decide` "
            "(decisions), `admin` (tracked repositories) (`axbgate token create NAME "
            "--scope submit`); 401 without a valid token, 403 without the scope. Secret-looking "
            "env values are masked in every answer (docs/security.md). Errors are JSON: "
            '`{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`.'
        ),
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from app/web/docs.py with vendored assets
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = sessionmaker(engine, expire_on_commit=False)
    app.state.services = []
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, default_bytes=settings.limits.max_body_bytes,
                       path_bytes={"/runs/import": settings.limits.max_import_bytes})
    for module in (gates, runs, allocations, stopping_points, verdicts, repos, alerts, health):
        app.include_router(declare_errors(module.router))
    app.include_router(declare_errors(metrics_router))
    mount_web(app)
    return app
