"""Server-rendered decision ledger (Jinja2 templates, local static assets only)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

__all__ = ["mount_web"]

STATIC_DIR = Path(__file__).parent / "static"


def mount_web(app: FastAPI) -> None:
    """Add the ledger pages, the offline API docs (``/docs``, ``/redoc``) and ``/static`` to
    ``app`` (built with ``docs_url=None, redoc_url=None``)."""
    from orchestrator.app.web.docs import router as docs_router
    from orchestrator.app.web.entities import router as entities_router
    from orchestrator.app.web.history import router as history_router
    from orchestrator.app.web.pages import router
    from orchestrator.app.web.repos import router as repos_router

    app.include_router(docs_router)
    app.include_router(router)
    app.include_router(history_router)
    app.include_router(entities_router)
    app.include_router(repos_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
