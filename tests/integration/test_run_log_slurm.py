"""The run logs of a gate on the REAL `slurm` executor download over HTTP (``GET
/runs/{id}/log``), byte for byte: they live in the gate folder's ``runs/``, not in the
submitit job folder."""

from __future__ import annotations

import hashlib

import pytest
from fastapi.testclient import TestClient

from orchestrator.runtime.gates import dispatch_pass
from tests.factories import harness_gate, submit
from tests.integration.test_gate_slurm import _wait, ledger  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_run_logs_of_a_slurm_gate_download_over_http(ledger):  # noqa: F811
    from orchestrator.app.api import create_app
    from orchestrator.settings import Settings

    engine, settings = ledger
    gate_in = harness_gate(control_ms=20.0, candidate_ms=20.0, executor="slurm",
                           topology={"ntasks_per_node": 1, "time_limit_min": 5})
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    app_settings = Settings(data_dir=settings.data_dir, database={"url": settings.database_url},
                            gates={"enabled": False}, nightly={"enabled": False})
    folder = settings.data_dir / "gates" / f"{gate_id:06d}"
    with TestClient(create_app(app_settings)) as client:
        runs = client.get(f"/gates/{gate_id}").json()["runs"]
        assert [r["role"] for r in runs] == ["A", "X", "B"]
        for run in runs:
            [art] = [a for a in run["artifacts"] if a["kind"] == "log"]
            resp = client.get(art["log_url"])
            assert resp.status_code == 200, resp.text
            on_disk = (folder / "runs" / f"{run['order']:02d}-{run['role']}.log").read_bytes()
            assert resp.content == on_disk and b"AXBGATE_STEP" in on_disk
            assert hashlib.sha256(resp.content).hexdigest() == art["sha256"] == resp.headers["x-content-sha256"]
            assert client.get(f"/runs/{run['id']}/log").content == on_disk
