"""Background services started in the FastAPI lifespan (dispatcher, poller, nightly).

Each service is an object with ``start()`` and ``stop()`` (Prefect ``services/base.py``).
:func:`build_services` is the single hook the API lifespan calls; it returns the services
enabled by the settings, started in list order and stopped in reverse order.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["BaseService", "build_services"]


class BaseService(Protocol):
    """What the lifespan needs from a background service."""

    def start(self) -> Any:
        """Start the service's loop (may return an awaitable)."""

    def stop(self) -> Any:
        """Stop the loop and wait for the current pass to finish (may return an awaitable)."""


def build_services(settings: Any) -> list[BaseService]:
    """Return the background services to run inside ``axbgate serve``.

    The dispatcher submits queued gates and the poller ingests gates in flight (both
    gated by ``settings.gates.enabled``, each pass idempotent so a restarted server
    re-attaches to gates already running). The nightly re-gate scheduler (gated by
    ``settings.nightly.enabled``) runs APScheduler only while it holds the database
    lease, so several API workers still make one scheduler.

    Args:
        settings: The :class:`~orchestrator.settings.Settings` of the process.

    Returns:
        The services in start order.
    """
    from orchestrator.db.session import get_engine
    from orchestrator.runtime.gates import Dispatcher, Poller

    services: list[BaseService] = []
    engine = get_engine(settings.database_url, settings.database.echo)
    if settings.gates.enabled:
        services.append(Dispatcher(engine, settings, loop_seconds=settings.gates.loop_seconds))
        services.append(Poller(engine, settings, loop_seconds=settings.gates.loop_seconds))
    if settings.nightly.enabled:
        from orchestrator.runtime.nightly import NightlyScheduler

        services.append(NightlyScheduler(engine, settings))
    return services
