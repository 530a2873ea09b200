"""The REST API (FastAPI)."""

from orchestrator.api.main import create_app

__all__ = ["create_app"]
