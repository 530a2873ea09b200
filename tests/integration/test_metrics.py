"""``GET /metrics``: a Prometheus scrape before and after a real gate (fixture harness, local
executor, the server's own dispatcher and poller) shows the counters moving by the right
amounts; the ledger gauges follow the queue; webhook failures are counted."""

from __future__ import annotations

import time

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session

from orchestrator.app.api import create_app
from orchestrator.db.migrate import upgrade
from orchestrator.settings import Settings
from orchestrator.usecases.tokens import create_token
from tests.factories import harness_gate, submit
from tests.live_server import serve


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape keyed by (sample name, label pairs)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.mark.slow
def test_scrape_before_and_after_a_real_gate_moves_the_counters(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": True, "loop_seconds": 0.2})
    upgrade(settings.database_url)
    app = create_app(settings)
    with Session(app.state.engine) as session:
        _row, secret = create_token(session=session, name="ci")
        session.commit()
    # Each run sleeps 7 x 0.1 s (2 warmup + 5 measured steps): >= 0.7 s launch to exit.
    env = {"HARNESS_STEP_MS": "50", "HARNESS_SLEEP_S": "0.1"}
    body = harness_gate(control={"env": env}, candidate={"env": env}).model_dump(mode="json")
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        first = client.get("/metrics")
        assert first.status_code == 200
        assert first.headers["content-type"].startswith("text/plain")
        before = _samples(first.text)
        created = client.post("/gates", json=body, headers={"Authorization": f"Bearer {secret}"})
        assert created.status_code == 201, created.text
        gate_id = created.json()["id"]
        deadline = time.monotonic() + 120
        while (gate := client.get(f"/gates/{gate_id}").json())["status"] not in (
                "succeeded", "failed", "cancelled"):
            assert time.monotonic() < deadline, gate["status"]
            time.sleep(0.3)
        after = _samples(client.get("/metrics").text)
    assert gate["status"] == "succeeded", gate.get("status_reason")

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert _value(before, "axbgate_gates", state="succeeded") == 0.0
    assert _value(after, "axbgate_gates", state="succeeded") == 1.0
    assert _value(after, "axbgate_gates", state="queued") == 0.0
    assert _value(after, "axbgate_queue_depth", executor="local") == 0.0
    assert delta("axbgate_gates_dispatched_total", executor="local", outcome="submitted") == 1.0
    assert delta("axbgate_gates_finished_total", executor="local", state="succeeded") == 1.0
    assert delta("axbgate_dispatch_seconds_count", executor="local") == 1.0
    assert 0.0 < delta("axbgate_dispatch_seconds_sum", executor="local") < 30.0
    assert delta("axbgate_scheduler_calls_total", executor="local", call="submit", outcome="ok") == 1.0
    assert delta("axbgate_scheduler_calls_total", executor="local", call="poll", outcome="ok") >= 1.0
    assert delta("axbgate_pass_seconds_count", pass_name="dispatch") >= 1.0
    assert delta("axbgate_pass_seconds_count", pass_name="poll") >= 1.0
    for role in "AXB":
        assert delta("axbgate_run_seconds_count", role=role, status="succeeded") == 1.0
        assert 0.7 <= delta("axbgate_run_seconds_sum", role=role, status="succeeded") < 60.0
    assert delta("axbgate_run_seconds_bucket", role="X", status="succeeded", le="+Inf") == 1.0


def test_ledger_gauges_count_queued_gates_by_executor_and_state(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": False}, nightly={"enabled": False})
    upgrade(settings.database_url)
    app = create_app(settings)
    submit(app.state.engine, harness_gate(executor="local"))
    submit(app.state.engine, harness_gate(executor="local"))
    submit(app.state.engine, harness_gate(executor="slurm"))
    with TestClient(app) as client:
        samples = _samples(client.get("/metrics").text)
    assert _value(samples, "axbgate_queue_depth", executor="local") == 2.0
    assert _value(samples, "axbgate_queue_depth", executor="slurm") == 1.0
    assert _value(samples, "axbgate_queue_depth", executor="debug") == 0.0
    assert _value(samples, "axbgate_gates", state="queued") == 3.0
    assert _value(samples, "axbgate_gates", state="running") == 0.0


def test_metrics_need_a_token_when_reads_are_closed(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": False}, nightly={"enabled": False},
                        auth={"read_open": False})
    upgrade(settings.database_url)
    with TestClient(create_app(settings)) as client:
        assert client.get("/metrics").status_code == 401


def test_webhook_failures_are_counted_by_outcome(tmp_path):
    from prometheus_client import REGISTRY

    from orchestrator.db.models import RepoEvent, TrackedRepository
    from orchestrator.runtime.nightly import deliver_webhooks
    from orchestrator.store import webhooks

    settings = Settings(data_dir=tmp_path / "data", nightly={"webhook_max_attempts": 1},
                        security={"webhook_allow_private": True})
    upgrade(settings.database_url)
    engine = create_app(settings).state.engine
    with Session(engine) as s:
        repo = TrackedRepository(url="/srv/r", branch="main", notify=["http://hook.test/a"])
        s.add(repo)
        s.flush()
        event = RepoEvent(repository_id=repo.id, kind="regression", message="slower")
        s.add(event)
        s.flush()
        for path in ("ok", "down"):
            webhooks.create_delivery(session=s, event_id=event.id, url=f"http://hook.test/{path}",
                                     payload={"event": "regression"})
        s.commit()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(204 if request.url.path == "/ok" else 503, text="")

    def count(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    failures, delivered = count("axbgate_webhook_failures_total"), count(
        "axbgate_webhook_deliveries_total", outcome="delivered")
    failed = count("axbgate_webhook_deliveries_total", outcome="failed")
    assert deliver_webhooks(engine, settings, transport=httpx.MockTransport(handler)) == 2
    assert count("axbgate_webhook_failures_total") - failures == 1.0
    assert count("axbgate_webhook_deliveries_total", outcome="delivered") - delivered == 1.0
    assert count("axbgate_webhook_deliveries_total", outcome="failed") - failed == 1.0
