"""Re-gate pieces on SQLite without gates: request validation, change points, the
scheduler lease, webhook retries with backoff, the re-gate gate request."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.migrate import upgrade
from orchestrator.db.models import RepoEvent, TrackedRepository, WebhookAttempt, WebhookDelivery
from orchestrator.db.session import build_engine
from orchestrator.schemas.repos import RepoCreate, RepoUpdate
from orchestrator.settings import Settings
from orchestrator.store import webhooks
from orchestrator.usecases.drift import detect_change_points
from orchestrator.usecases.notify import deliver_due
from orchestrator.usecases.regate import build_gate_request

UTC = dt.UTC
BODY = {"url": "/srv/repo", "workload": {"command": ["python", "bench.py"]}}


@pytest.mark.parametrize("field, value", [
    ("url", "-oProxyCommand=x"), ("url", "relative/path"), ("url", "/srv/../etc"),
    ("url", "ftp://host/repo"), ("branch", "-evil"), ("branch", "a..b"), ("branch", "x.lock"),
    ("schedule", "61 * * * *"), ("schedule", "* * *"), ("notify", ["file:///etc/passwd"]),
    ("notify", ["http://"]), ("tolerance_pct", -1), ("options", {"env": {"MASTER_PORT": "1"}}),
    ("options", {"run_pattern": "X A B"}),
])
def test_repo_create_rejects_bad_values(field, value):
    with pytest.raises(ValidationError) as info:
        RepoCreate.model_validate({**BODY, field: value})
    assert info.value.errors()[0]["loc"][0] == field


@pytest.mark.parametrize("url", ["/srv/repo", "https://github.com/o/r.git", "git@github.com:o/r.git",
                                 "ssh://git@host:22/o/r", "file:///srv/repo.git"])
def test_repo_create_accepts_git_urls(url):
    repo = RepoCreate.model_validate({**BODY, "url": url, "schedule": "*/15  * * * 1-5",
                                      "notify": ["https://hooks.example.org/x?y=1"]})
    assert repo.url == url and repo.schedule == "*/15 * * * 1-5"


def test_repo_update_needs_a_field_and_a_full_sha():
    with pytest.raises(ValidationError):
        RepoUpdate.model_validate({})
    with pytest.raises(ValidationError):
        RepoUpdate.model_validate({"last_measured_sha": "abc123"})
    assert RepoUpdate.model_validate({"enabled": False}).model_fields_set == {"enabled"}


def test_change_points_find_a_step_and_ignore_a_flat_series():
    step = detect_change_points([0.1] * 6 + [0.1008] * 6, tolerance_pct=0.5)
    assert step.change_points == (6,)
    assert step.segments[1][3] == pytest.approx(0.8, abs=1e-6)
    flat = detect_change_points([0.1, 0.10001, 0.09999, 0.1, 0.10002, 0.1], tolerance_pct=0.5)
    assert flat.change_points == () and len(flat.segments) == 1
    ramp = detect_change_points([0.1 * (1 + 0.003 * i) for i in range(12)], tolerance_pct=0.5)
    assert ramp.change_points and ramp.segments[-1][3] > 2.0  # slow drift shows as shifts
    assert detect_change_points([0.1, 0.2], tolerance_pct=0.5).penalty is None
    with pytest.raises(ValueError):
        detect_change_points([0.1, float("nan"), 0.1, 0.1], tolerance_pct=0.5)


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    eng = build_engine(url)
    yield eng
    eng.dispose()


def test_lease_has_one_holder_until_it_expires(engine):
    now = dt.datetime(2026, 1, 1, tzinfo=UTC)
    with Session(engine) as s:
        assert webhooks.try_acquire_lease(session=s, name="nightly", holder="a", now=now, duration_s=10)
        s.commit()
        assert not webhooks.try_acquire_lease(session=s, name="nightly", holder="b", now=now, duration_s=10)
        assert webhooks.try_acquire_lease(session=s, name="nightly", holder="a",
                                          now=now + dt.timedelta(seconds=5), duration_s=10)  # renew
        s.commit()
        later = now + dt.timedelta(seconds=14)
        assert not webhooks.try_acquire_lease(session=s, name="nightly", holder="b", now=later, duration_s=10)
        after = now + dt.timedelta(seconds=16)
        assert webhooks.try_acquire_lease(session=s, name="nightly", holder="b", now=after, duration_s=10)
        s.commit()
        webhooks.release_lease(session=s, name="nightly", holder="b")
        s.commit()
        assert webhooks.try_acquire_lease(session=s, name="nightly", holder="a", now=after, duration_s=10)


def _delivery(engine) -> int:
    with Session(engine) as s:
        repo = TrackedRepository(url="/srv/r", branch="main", notify=["http://hook.test/x"])
        s.add(repo)
        s.flush()
        event = RepoEvent(repository_id=repo.id, kind="regression", message="slower")
        s.add(event)
        s.flush()
        row = webhooks.create_delivery(session=s, event_id=event.id, url="http://hook.test/x",
                                       payload={"event": "regression"})
        s.commit()
        return row.id


def test_webhook_retries_with_backoff_then_fails_recording_every_attempt(engine):
    # hook.test does not resolve; the mock transport answers, so the address check is off.
    settings = Settings(nightly={"webhook_max_attempts": 3, "webhook_backoff_seconds": 10.0},
                        security={"webhook_allow_private": True})
    delivery_id = _delivery(engine)
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 2:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(503, text="busy")

    transport = httpx.MockTransport(handler)
    t0 = dt.datetime.now(UTC)
    assert deliver_due(engine=engine, settings=settings, transport=transport) == 1
    assert deliver_due(engine=engine, settings=settings, transport=transport) == 0  # not due yet
    with Session(engine) as s:
        first_retry = s.get(WebhookDelivery, delivery_id).next_attempt_at.replace(tzinfo=UTC)
    assert 9.0 <= (first_retry - t0).total_seconds() <= 12.0
    far = t0 + dt.timedelta(hours=1)
    assert deliver_due(engine=engine, settings=settings, transport=transport, now=far) == 1
    with Session(engine) as s:
        second_retry = s.get(WebhookDelivery, delivery_id).next_attempt_at.replace(tzinfo=UTC)
    assert (second_retry - far).total_seconds() == pytest.approx(20.0)  # doubled
    assert deliver_due(engine=engine, settings=settings, transport=transport, now=far) == 0
    farther = far + dt.timedelta(hours=1)
    assert deliver_due(engine=engine, settings=settings, transport=transport, now=farther) == 1
    assert deliver_due(engine=engine, settings=settings, transport=transport, now=farther) == 0
    with Session(engine) as s:
        delivery = s.get(WebhookDelivery, delivery_id)
        attempts = list(s.scalars(select(WebhookAttempt).order_by(WebhookAttempt.id)))
        assert delivery.status == "failed" and delivery.num_attempts == 3
        assert [a.status_code for a in attempts] == [503, None, 503]
        assert "ConnectError" in attempts[1].error and "HTTP 503" in attempts[0].error
    assert calls[0].headers["content-type"] == "application/json"


def test_regate_request_uses_the_repository_workload_and_tolerance():
    repo = TrackedRepository(id=7, url="/srv/r", branch="main", workload={"command": ["python", "b.py"]},
                             topology={"nodes": 1}, executor="local", tolerance_pct=1.5,
                             options={"warmup_steps": 2, "measured_steps": 5, "env": {"A": "1"},
                                      "health": {"enabled": False}, "run_pattern": "A X B X A"})
    gate_in = build_gate_request(repo, "a" * 40, "b" * 40, kind="regate", title="t")
    assert gate_in.kind == "regate" and gate_in.policy_params == {"tolerance_pct": 1.5}
    assert gate_in.control.source.sha == "a" * 40 and gate_in.candidate.source.sha == "b" * 40
    assert gate_in.control.source.repo == "/srv/r" and gate_in.candidate.env == {"A": "1"}
    assert gate_in.run_pattern == "A X B X A" and gate_in.warmup_steps == 2
    assert gate_in.health.enabled is False and "repo-7" in gate_in.tags


def _drift_repo(engine, medians: list[float], verdicts: list[str], branch: str) -> int:
    """A repository whose pass/regression events step the measured head through ``medians``."""
    from orchestrator.db.models import Gate

    with Session(engine) as s:
        repo = TrackedRepository(url="/srv/r", branch=branch, tolerance_pct=0.5)
        s.add(repo)
        s.flush()
        s.add(RepoEvent(repository_id=repo.id, kind="baseline", candidate_sha="0" * 40))
        for i, (median, verdict) in enumerate(zip(medians, verdicts)):
            gate = Gate(kind="regate", repository_id=repo.id)
            s.add(gate)
            s.flush()
            prev = medians[i - 1] if i else medians[0]
            s.add(RepoEvent(repository_id=repo.id, gate_id=gate.id, kind=verdict, verdict=verdict,
                            control_sha=f"{i:040x}", candidate_sha=f"{i + 1:040x}",
                            candidate_median_s=median, delta_pct=(median / prev - 1) * 100))
        s.commit()
        return repo.id


def test_slow_drift_below_tolerance_is_flagged(engine):
    from orchestrator.usecases.drift import drift_of_repository

    creep = [0.1 * (1 + 0.003 * i) for i in range(10)]  # +0.3% per commit, each re-gate passes
    repo_id = _drift_repo(engine, creep, ["pass"] * 10, "creep")
    with Session(engine) as s:
        drift = drift_of_repository(session=s, repo_id=repo_id)
    assert drift.drift_flag and drift.change_points
    assert drift.points[-1].cumulative_delta_pct == pytest.approx(2.7, abs=0.05)
    step = [0.1] * 5 + [0.11] * 5  # one regression flagged by its re-gate: not slow drift
    repo_id = _drift_repo(engine, step, ["pass"] * 5 + ["regression"] + ["pass"] * 4, "step")
    with Session(engine) as s:
        drift = drift_of_repository(session=s, repo_id=repo_id)
    assert drift.change_points == [5] and not drift.drift_flag


@pytest.mark.parametrize("address, netloc", [("93.184.216.34", "93.184.216.34"),
                                             ("2606:2800:220:1::1", "[2606:2800:220:1::1]")])
def test_webhook_delivery_goes_to_the_checked_address(engine, monkeypatch, address, netloc):
    """The POST connects to the address that passed the check (no second DNS lookup), with
    the original Host header and TLS server name, and carries the signature headers."""
    import socket

    from standardwebhooks.webhooks import Webhook

    from orchestrator.usecases.notify import new_webhook_secret

    secret = new_webhook_secret()
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: [
        (family, socket.SOCK_STREAM, 6, "", (address, port))])
    with Session(engine) as s:
        repo = TrackedRepository(url="/srv/r", branch="main", notify=["https://hooks.example.org/x"],
                                 webhook_secret=secret)
        s.add(repo)
        s.flush()
        event = RepoEvent(repository_id=repo.id, kind="regression", message="slower")
        s.add(event)
        s.flush()
        webhooks.create_delivery(session=s, event_id=event.id, url="https://hooks.example.org:8443/x",
                                 payload={"event": "regression"})
        s.commit()
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    assert deliver_due(engine=engine, settings=Settings(), transport=httpx.MockTransport(handler)) == 1
    [request] = seen
    assert request.url.netloc.decode() == f"{netloc}:8443" and request.url.path == "/x"
    assert request.headers["host"] == "hooks.example.org:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.org"
    assert Webhook(secret).verify(request.content, dict(request.headers))["event"] == "regression"
