"""Webhook notifications of re-gate events: queued in the ledger, POSTed with retries.

An event that needs attention (regression, improvement, no verdict, failed check,
bisection result) queues one delivery per URL of the repository's ``notify`` list in
the same transaction as the event, so a crash never loses or duplicates one. The
scheduler's delivery pass POSTs due deliveries; each attempt is recorded with its status
code or error. A failed attempt is retried after ``webhook_backoff_seconds`` x 2^(n-1)
(n = attempts so far) until ``webhook_max_attempts``; then the delivery is ``failed``.
Nothing here raises into the scheduler.

Security (docs/security.md): a target whose host is, or resolves to, a private,
loopback, link-local (169.254.x), unspecified, reserved or multicast address is refused at
registration and again at every delivery (the request then goes to the address that was
checked, with the original ``Host`` and TLS server name, so a DNS answer that changes in
between cannot redirect it), unless ``security.webhook_allow_private`` is set. Bodies are
signed with the repository's secret, Standard Webhooks style: ``webhook-id``,
``webhook-timestamp`` and ``webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">``.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import logging
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Bisection, RepoEvent, TrackedRepository, WebhookDelivery
from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.secrets import mask_url
from orchestrator.settings import Settings

__all__ = ["TargetRefused", "build_payload", "check_webhook_targets", "deliver_due",
           "enqueue_notifications", "new_webhook_secret", "resolve_public_target",
           "sign_body"]

logger = logging.getLogger(__name__)


class TargetRefused(ValueError):
    """A webhook target that must not be contacted (private address, unresolvable host).

    Attributes:
        permanent: True for a refused address (no retry); False when the host did not
            resolve (retried like a failed POST).
    """

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message)
        self.permanent = permanent


def new_webhook_secret() -> str:
    """A fresh Standard Webhooks signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def sign_body(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` header value (``v1,<base64>``) of one message.

    Args:
        secret: The repository's ``whsec_...`` secret.
        msg_id: The ``webhook-id`` (the same for every retry of a delivery).
        timestamp: The ``webhook-timestamp``, Unix seconds.
        body: The exact request body.
    """
    from standardwebhooks.webhooks import Webhook

    when = dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)
    return Webhook(secret).sign(msg_id=msg_id, timestamp=when, data=body)


def _refused_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address may not be a webhook target, or ``None`` when it may."""
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    for attr, why in (("is_loopback", "loopback"), ("is_link_local", "link-local"),
                      ("is_unspecified", "unspecified"), ("is_multicast", "multicast"),
                      ("is_private", "private"), ("is_reserved", "reserved")):
        if getattr(ip, attr):
            return why
    return None if ip.is_global else "not globally routable"


def resolve_public_target(url: str, *, allow_private: bool) -> list[str]:
    """Resolve a webhook URL's host and check every address it has.

    Args:
        url: An ``http(s)://`` URL.
        allow_private: Skip the check (``security.webhook_allow_private``).

    Returns:
        The addresses to connect to (empty when ``allow_private``: connect by name).

    Raises:
        TargetRefused: The host does not resolve, or one of its addresses is private,
            loopback, link-local, unspecified, reserved or multicast.
    """
    if allow_private:
        return []
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise TargetRefused(f"host {host!r} does not resolve ({exc})", permanent=False) from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    for address in addresses:
        why = _refused_address(ipaddress.ip_address(address.split("%", 1)[0]))
        if why is not None:
            raise TargetRefused(
                f"{host} resolves to {address}, a {why} address; webhook targets must be public "
                "(the operator may allow private ones with AXBGATE_SECURITY__WEBHOOK_ALLOW_PRIVATE=true)")
    return addresses


def check_webhook_targets(urls: list[str], *, allow_private: bool) -> None:
    """Refuse webhook targets on non-public addresses at registration.

    A host that does not resolve now is accepted (it is checked again at delivery).

    Raises:
        ValidationFailed: ``notify`` names a target on a refused address.
    """
    for url in urls:
        try:
            resolve_public_target(url, allow_private=allow_private)
        except TargetRefused as exc:
            if not exc.permanent:
                logger.warning("webhook target %s does not resolve now; checked again at delivery", url)
                continue
            raise ValidationFailed("notify", f"{url}: {exc}") from None


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
        "repo": mask_url(repo.url),
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


def _pinned(url: str, address: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The URL with its host replaced by the checked address, the ``Host`` header and the
    TLS server name, so the connection goes where the check looked."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = host + (f":{parts.port}" if parts.port else "")
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return urlunsplit(parts._replace(netloc=netloc)), {"Host": parts.netloc.rsplit("@", 1)[-1]}, extensions


def _post(client: httpx.Client, delivery: WebhookDelivery, secret: str | None,
          allow_private: bool) -> tuple[int | None, str | None]:
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True, default=str)
    msg_id = f"msg_axbgate_{delivery.id}"
    timestamp = int(time.time())
    headers = {"User-Agent": "axbgate-webhook/1", "Content-Type": "application/json",
               "X-Axbgate-Event": str(delivery.payload.get("event")),
               "webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if secret:
        headers["webhook-signature"] = sign_body(secret, msg_id, timestamp, body)
    url, extensions = delivery.url, {}
    addresses = resolve_public_target(delivery.url, allow_private=allow_private)
    if addresses:
        url, host_header, extensions = _pinned(delivery.url, addresses[0])
        headers.update(host_header)
    try:
        resp = client.post(url, content=body.encode(), headers=headers, extensions=extensions)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:2000]
    if 200 <= resp.status_code < 300:
        return resp.status_code, None
    return resp.status_code, f"HTTP {resp.status_code}: {resp.text[:500]}"


def deliver_due(*, engine: Engine, settings: Settings, now: dt.datetime | None = None,
                transport: httpx.BaseTransport | None = None,
                on_attempt: Callable[[str], None] | None = None) -> int:
    """POST every due pending delivery once (one transaction per delivery).

    Args:
        engine: Ledger engine.
        settings: ``nightly.webhook_*`` settings.
        now: Current time (tests).
        transport: httpx transport (tests); the default is the network.
        on_attempt: Called once per attempt with its outcome: ``delivered``, ``retry``
            (failed, tried again later), ``failed`` (last attempt failed) or ``refused``
            (the target's address is not allowed).

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
                    refused = False
                    try:
                        code, error = _post(client, delivery, store.webhooks.secret_of_delivery(
                            session=session, delivery=delivery), settings.security.webhook_allow_private)
                    except TargetRefused as exc:
                        code, error, refused = None, f"target refused: {exc}", exc.permanent
                    store.webhooks.add_attempt(session=session, delivery=delivery, status_code=code,
                                               error=error, duration_s=time.monotonic() - start)
                    count += 1
                    outcome = "refused" if refused else "delivered" if error is None else (
                        "failed" if delivery.num_attempts >= nightly.webhook_max_attempts else "retry")
                    if refused:
                        delivery.status = "failed"
                        logger.warning("delivery=%s to %s refused: %s", delivery.id, delivery.url, error)
                    elif error is None:
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
                if on_attempt is not None:
                    on_attempt(outcome)
            except Exception:  # a broken row or database hiccup must not stop the pass
                logger.exception("delivery=%s: delivery pass failed", delivery_id)
    return count
