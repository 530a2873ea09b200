"""The REST API (FastAPI)."""

from orchestrator.app.api.main import create_app

__all__ = ["create_app"]
