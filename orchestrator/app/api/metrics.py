"""``GET /metrics``: the Prometheus scrape endpoint (definitions in ``runtime/metrics.py``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from orchestrator.app.api.deps import require_read_access
from orchestrator.runtime import metrics

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/metrics", response_class=Response, dependencies=[Depends(require_read_access)],
            responses={200: {"content": {"text/plain": {}},
                             "description": "Prometheus text exposition format 0.0.4."}})
def prometheus_metrics(request: Request) -> Response:
    """Prometheus metrics: gates by state and queue depth (read from the ledger now), pass,
    dispatch and scheduler-call latencies, run durations, webhook deliveries and failures,
    re-gate checks (definitions: ``orchestrator/runtime/metrics.py``). Open when reads are
    open (``auth.read_open``), otherwise a token is needed."""
    return Response(content=metrics.render(request.app.state.engine),
                    media_type=metrics.CONTENT_TYPE_LATEST)
