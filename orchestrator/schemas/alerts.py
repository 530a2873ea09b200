"""Alerts of the re-gate scheduler across tracked repositories (``GET /alerts``)."""

from __future__ import annotations

from pydantic import BaseModel

from orchestrator.schemas.repos import RepoEventPublic

__all__ = ["AlertPublic", "AlertsPublic"]


class AlertPublic(RepoEventPublic):
    """An alert event with the repository it is about."""

    repository_url: str
    branch: str


class AlertsPublic(BaseModel):
    """Alerts, newest first."""

    data: list[AlertPublic]
    num_open: int
    """Alerts in ``data`` not acknowledged yet."""
