"""Structured logs of a real ``axbgate --log-format json serve``: every stderr line is one
JSON object, and the dispatcher, poller and services report a gate's life at INFO (gate
id, state, run durations), not only access lines."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from orchestrator.app.logsetup import JsonFormatter
from tests.factories import harness_gate
from tests.live_server import free_port


def _axbgate(*args: str, env: dict[str, str], **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.app.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.slow
def test_serve_writes_json_lines_with_dispatcher_and_poller_events(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AXBGATE_")}
    env.update(AXBGATE_DATA_DIR=str(tmp_path / "data"), AXBGATE_GATES__LOOP_SECONDS="0.2",
               AXBGATE_NIGHTLY__ENABLED="false")
    token = json.loads(_axbgate("token", "create", "ci", "--json", env=env).stdout)["token"]
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.app.cli", "--log-format", "json",
                             "serve", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "serve did not start"
            time.sleep(0.2)
        body = harness_gate(control_ms=50.0, candidate_ms=50.0).model_dump(mode="json")
        created = httpx.post(f"{url}/gates", json=body, headers={"Authorization": f"Bearer {token}"})
        assert created.status_code == 201, created.text
        gate_id = created.json()["id"]
        deadline = time.monotonic() + 120
        while httpx.get(f"{url}/gates/{gate_id}").json()["status"] not in (
                "succeeded", "failed", "cancelled"):
            assert time.monotonic() < deadline
            time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line is JSON
    assert lines and all({"ts", "level", "logger", "message"} <= set(r) for r in lines)
    events = [r for r in lines if r.get("event")]
    kinds = [r["event"] for r in events]
    assert kinds[0] == "serve.start"
    assert {"Dispatcher", "Poller"} <= {r["service"] for r in events if r["event"] == "service.started"}
    dispatched = [r for r in events if r["event"] == "gate.dispatched"]
    assert [(r["gate_id"], r["state"], r["executor"]) for r in dispatched] == [(gate_id, "submitted", "local")]
    assert 0.0 < dispatched[0]["duration_s"] < 30.0
    runs = [r for r in events if r["event"] == "run.ended"]
    assert [(r["gate_id"], r["run_order"], r["role"], r["state"]) for r in runs] == [
        (gate_id, 0, "A", "succeeded"), (gate_id, 1, "X", "succeeded"), (gate_id, 2, "B", "succeeded")]
    assert all(0.0 < r["duration_s"] < 60.0 for r in runs)
    finished = [r for r in events if r["event"] == "gate.finished"]
    assert [(r["gate_id"], r["state"], r["level"]) for r in finished] == [(gate_id, "succeeded", "INFO")]
    assert any(r["logger"] == "uvicorn.access" and f"/gates/{gate_id}" in r["message"] for r in lines)
    assert {"service.stopped"} <= set(kinds)


def test_json_formatter_keeps_extras_and_exceptions():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("t").makeRecord("t", logging.ERROR, __file__, 1, "gate=%s failed",
                                                   (7,), sys.exc_info(),
                                                   extra={"gate_id": 7, "duration_s": float("nan")})
    out = json.loads(JsonFormatter().format(record))
    assert out["message"] == "gate=7 failed" and out["level"] == "ERROR" and out["gate_id"] == 7
    assert out["duration_s"] == "nan"  # JSON has no NaN: the value is kept as text
    assert "ValueError: boom" in out["exception"]


def test_cli_switches_its_own_handler_and_leaves_foreign_ones_alone(monkeypatch):
    from orchestrator.app.logsetup import configure_logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    configure_logging(level=logging.INFO, fmt="json")
    configure_logging(level=logging.WARNING, fmt="text")
    assert len(root.handlers) == 1 and not isinstance(root.handlers[0].formatter, JsonFormatter)
    assert root.level == logging.WARNING
    foreign = logging.NullHandler()
    root.handlers = [foreign]
    configure_logging(level=logging.INFO, fmt="json")  # someone else configured logging
    assert root.handlers == [foreign] and root.level == logging.WARNING
