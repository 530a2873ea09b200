"""Alerts of the re-gate scheduler across tracked repositories (``GET /alerts``)."""

from __future__ import annotations

from orchestrator.domain.api_model import PublicModel
from orchestrator.schemas.repo_events import RepoEventPublic

__all__ = ["AlertPublic", "AlertsPublic"]


class AlertPublic(RepoEventPublic):
    """An alert event with the repository it is about."""

    repository_url: str
    """URL or local path of the tracked repository."""
    branch: str
    """The tracked branch."""


class AlertsPublic(PublicModel):
    """Alerts, newest first."""

    data: list[AlertPublic]
    """The alerts, newest first."""
    num_open: int
    """Alerts in ``data`` not acknowledged yet."""
