"""Run routes: show, log streaming (no path traversal), log import; allocations."""

from __future__ import annotations

from pathlib import Path

from orchestrator import store

FIXTURE_LOG = Path(__file__).parents[1] / "fixtures" / "harness_bf16.log"


def _run_ids(client, gate_id):
    return [r["id"] for r in client.get(f"/gates/{gate_id}").json()["runs"]]


def test_get_run_with_steps_and_artifacts(client, seeded):
    run_id = _run_ids(client, seeded["accept"])[1]
    run = client.get(f"/runs/{run_id}").json()
    assert run["role"] == "X" and run["status"] == "succeeded"
    assert abs(run["median_step_s"] - 0.4148231971) < 1e-12
    assert len(run["artifacts"]) == 1 and run["artifacts"][0]["log_url"].startswith(f"/runs/{run_id}/log")


def test_log_streams_the_kept_bytes(client, seeded):
    import hashlib

    run_id = _run_ids(client, seeded["accept"])[0]
    art = client.get(f"/runs/{run_id}").json()["artifacts"][0]
    resp = client.get(f"/runs/{run_id}/log")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    assert hashlib.sha256(resp.content).hexdigest() == art["sha256"] == resp.headers["x-content-sha256"]
    assert client.get(f"/runs/{run_id}/log", params={"artifact_id": art["id"]}).status_code == 200
    other = _run_ids(client, seeded["accept"])[1]
    assert client.get(f"/runs/{other}/log", params={"artifact_id": art["id"]}).status_code == 404


def test_log_outside_the_artifact_folder_is_never_served(client, seeded, db_session, tmp_path):
    run_ids = _run_ids(client, seeded["neutral"])
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    for i, path in enumerate([str(secret), "/etc/passwd", "../../../../etc/passwd"]):
        store.artifacts.add_artifact(
            session=db_session, path=path, size_bytes=1, sha256=f"{i:064d}", kind="stdout",
            run_id=run_ids[2],
        )
    db_session.commit()
    run = client.get(f"/runs/{run_ids[2]}").json()
    for art in run["artifacts"]:
        resp = client.get(f"/runs/{run_ids[2]}/log", params={"artifact_id": art["id"]})
        if art["kind"] == "log":
            assert resp.status_code == 200
        else:
            assert resp.status_code == 404, art
            assert b"do not serve" not in resp.content and b"root:" not in resp.content
    assert client.get("/runs/1/log/../../etc/passwd").status_code == 404


def test_import_log_upload(client, auth):
    data = FIXTURE_LOG.read_bytes()
    resp = client.post(
        "/runs/import", content=data, params={"filename": "harness.log"},
        headers={**auth, "Content-Type": "application/octet-stream"},
    )
    assert resp.status_code == 201, resp.text
    summary = resp.json()
    assert summary["path"] == "harness.log" and summary["run_id"] is not None
    assert summary["dialect"] == "bf16"
    again = client.post("/runs/import", content=data, headers=auth)
    assert again.status_code == 200 and again.json()["already_imported"]
    run = client.get(f"/runs/{summary['run_id']}").json()
    assert run["median_step_s"] == summary["median_step_s"]
    log = client.get(f"/runs/{summary['run_id']}/log")
    assert log.status_code == 200 and log.content == data
    if summary["allocation_id"]:
        alloc = client.get(f"/allocations/{summary['allocation_id']}").json()
        assert alloc["health_verdict"] == summary["health_verdict"]


def test_import_rejects_empty_and_recordless_logs(client, auth):
    empty = client.post("/runs/import", content=b"", headers=auth)
    assert empty.status_code == 422 and empty.json()["detail"][0]["loc"] == ["body"]
    plain = client.post("/runs/import", content=b"hello\nworld\n", headers=auth)
    assert plain.status_code == 422
    assert "upload.log" in plain.json()["detail"][0]["msg"]
    assert client.post("/runs/import", content=b"x", params={"filename": "../x"}, headers=auth).status_code == 422


def test_allocation_with_health_checks(client, seeded):
    alloc_id = client.get(f"/gates/{seeded['degraded']}").json()["summary"]["allocation_id"]
    alloc = client.get(f"/allocations/{alloc_id}").json()
    assert alloc["health_verdict"] == "degraded" and alloc["baseline_eligible"] is False
    assert {c["status"] for c in alloc["health_checks"]} == {"WARN", "PASS"}
