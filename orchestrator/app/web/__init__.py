"""Server-rendered decision ledger (Jinja2 templates, local static assets only)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

__all__ = ["mount_web"]

STATIC_DIR = Path(__file__).parent / "static"


def mount_web(app: FastAPI) -> None:
    """Add the ledger pages and ``/static`` to ``app``."""
    from orchestrator.app.web.pages import router
    from orchestrator.app.web.repos import router as repos_router

    app.include_router(router)
    app.include_router(repos_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
