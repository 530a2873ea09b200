"""Webhook notifications of re-gate events: queued in the ledger, POSTed with retries.

An event that needs attention (regression, improvement, no verdict, failed check,
bisection result) queues one delivery per URL of the repository's ``notify`` list in
the same transaction as the event, so a crash never loses or duplicates one. The
scheduler's delivery pass POSTs due deliveries; each attempt is recorded with its status
code or error. A failed attempt is retried after ``webhook_backoff_seconds`` x 2^(n-1)
(n = attempts so far) until ``webhook_max_attempts``; then the delivery is ``failed``.
Nothing here raises into the scheduler.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Bisection, RepoEvent, TrackedRepository, WebhookDelivery
from orchestrator.settings import Settings

__all__ = ["build_payload", "deliver_due", "enqueue_notifications"]

logger = logging.getLogger(__name__)


def _link(settings: Settings, gate_id: int | None, repo_id: int) -> str:
    base = (settings.nightly.public_url or "").rstrip("/")
    path = f"/ledger/gates/{gate_id}" if gate_id is not None else f"/ledger/repos/{repo_id}"
    return base + path


def build_payload(*, session: Session, repo: TrackedRepository, event: RepoEvent,
                  settings: Settings) -> dict[str, Any]:
    """The JSON body of a notification.

    Keys: ``event`` (kind), ``event_id``, ``gate_id``, ``repository_id``, ``repo`` (URL),
    ``branch``, ``control_sha``, ``candidate_sha``, ``verdict``, ``delta_pct`` and
    ``drift_pct`` (percent, None without a verdict), ``message``, ``link`` (web ledger
    page) and, for bisection events, ``bisection`` (id, status, first bad commit, number
    of gates).
    """
    gate_id = event.gate_id
    bisection = session.get(Bisection, event.bisection_id) if event.bisection_id else None
    if gate_id is None and bisection is not None:
        gate_id = bisection.first_bad_gate_id or bisection.regression_gate_id
    payload: dict[str, Any] = {
        "event": event.kind,
        "event_id": event.id,
        "gate_id": gate_id,
        "repository_id": repo.id,
        "repo": repo.url,
        "branch": repo.branch,
        "control_sha": event.control_sha,
        "candidate_sha": event.candidate_sha,
        "verdict": event.verdict,
        "delta_pct": event.delta_pct,
        "drift_pct": event.drift_pct,
        "message": event.message,
        "link": _link(settings, gate_id, repo.id),
    }
    if bisection is not None:
        payload["bisection"] = {
            "id": bisection.id, "status": bisection.status, "first_bad_sha": bisection.first_bad_sha,
            "num_gates": bisection.num_gates, "regression_gate_id": bisection.regression_gate_id,
        }
    return payload


def enqueue_notifications(*, session: Session, repo: TrackedRepository, event: RepoEvent,
                          settings: Settings) -> list[WebhookDelivery]:
    """Queue one delivery of ``event`` per webhook URL of ``repo`` (due now).

    Returns:
        The queued deliveries (none when the repository has no targets).
    """
    if not repo.notify:
        return []
    payload = build_payload(session=session, repo=repo, event=event, settings=settings)
    return [store.webhooks.create_delivery(session=session, event_id=event.id, url=url, payload=payload)
            for url in dict.fromkeys(repo.notify)]


def _post(client: httpx.Client, delivery: WebhookDelivery) -> tuple[int | None, str | None]:
    try:
        resp = client.post(delivery.url, json=delivery.payload,
                           headers={"User-Agent": "axbgate-webhook/1", "X-Axbgate-Event": str(delivery.payload.get("event"))})
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:2000]
    if 200 <= resp.status_code < 300:
        return resp.status_code, None
    return resp.status_code, f"HTTP {resp.status_code}: {resp.text[:500]}"


def deliver_due(*, engine: Engine, settings: Settings, now: dt.datetime | None = None,
                transport: httpx.BaseTransport | None = None) -> int:
    """POST every due pending delivery once (one transaction per delivery).

    Args:
        engine: Ledger engine.
        settings: ``nightly.webhook_*`` settings.
        now: Current time (tests).
        transport: httpx transport (tests); the default is the network.

    Returns:
        Number of attempts made.
    """
    now = now or dt.datetime.now(dt.UTC)
    nightly = settings.nightly
    with Session(engine) as session:
        ids = [d.id for d in store.webhooks.due_deliveries(session=session, now=now)]
    if not ids:
        return 0
    count = 0
    with httpx.Client(timeout=nightly.webhook_timeout_seconds, transport=transport,
                      follow_redirects=False) as client:
        for delivery_id in ids:
            try:
                with Session(engine, expire_on_commit=False) as session:
                    delivery = session.get(WebhookDelivery, delivery_id)
                    if delivery is None or delivery.status != "pending":
                        continue
                    start = time.monotonic()
                    code, error = _post(client, delivery)
                    store.webhooks.add_attempt(session=session, delivery=delivery, status_code=code,
                                               error=error, duration_s=time.monotonic() - start)
                    count += 1
                    if error is None:
                        delivery.status = "delivered"
                        delivery.delivered_at = dt.datetime.now(dt.UTC)
                        logger.info("delivery=%s event=%s delivered to %s", delivery.id,
                                    delivery.event_id, delivery.url)
                    elif delivery.num_attempts >= nightly.webhook_max_attempts:
                        delivery.status = "failed"
                        logger.warning("delivery=%s to %s failed after %d attempts: %s", delivery.id,
                                       delivery.url, delivery.num_attempts, error)
                    else:
                        delay = nightly.webhook_backoff_seconds * 2 ** (delivery.num_attempts - 1)
                        delivery.next_attempt_at = now + dt.timedelta(seconds=delay)
                        logger.info("delivery=%s to %s attempt %d failed (%s); retry in %.1f s",
                                    delivery.id, delivery.url, delivery.num_attempts, error, delay)
                    session.commit()
            except Exception:  # a broken row or database hiccup must not stop the pass
                logger.exception("delivery=%s: delivery pass failed", delivery_id)
    return count
