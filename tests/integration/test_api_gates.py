"""Gate routes against SQLite and the real PostgreSQL: submit, idempotency, list filters,
gate view, cancel, decisions, stopping points."""

from __future__ import annotations

import threading

import httpx

from tests.ledger_factories import WORKED_ACCEPT, finish_gate, make_gate

GATE = {
    "title": "packed qkv",
    "family": "ltx2-qkv",
    "tags": ["qkv"],
    "workload": {"command": ["true"]},
    "candidate": {"env": {"NCCL_ALGO": "Tree"}},
    "health": {"enabled": False},
}


def test_submit_queues_gate_with_runs(client, auth):
    resp = client.post("/gates", json=GATE, headers=auth)
    assert resp.status_code == 201, resp.text
    gate = resp.json()
    assert gate["status"] == "queued"
    assert [r["role"] for r in gate["runs"]] == ["A", "A", "X", "B"]  # the default (sequential) policy plans a conditioning run
    assert gate["candidate_spec"]["env"] == {"NCCL_ALGO": "Tree"}
    view = client.get(f"/gates/{gate['id']}").json()
    assert view["summary"]["candidate"]["overrides"] == ["NCCL_ALGO=Tree"]
    assert view["summary"]["decision"] is None


def test_submit_validation_errors_name_the_field(client, auth):
    bad = {**GATE, "candidate": {"env": {"MASTER_ADDR": "1.2.3.4"}}}
    resp = client.post("/gates", json=bad, headers=auth)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"][:3] == ["body", "candidate", "env"]
    resp = client.post("/gates", json={**GATE, "title": "a\x00b"}, headers=auth)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "title"]
    resp = client.post("/gates", content=b"{not json", headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == 422


def test_idempotency_key_returns_first_gate(client, auth):
    headers = {**auth, "Idempotency-Key": "pr-1234-run-1"}
    first = client.post("/gates", json=GATE, headers=headers)
    again = client.post("/gates", json=GATE, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert client.get("/gates").json()["count"] == 1


def test_concurrent_duplicates_create_one_gate(app, auth):
    from tests.live_server import serve

    num_threads = 8
    barrier = threading.Barrier(num_threads)
    results: list[tuple[int, int]] = []
    lock = threading.Lock()
    with serve(app) as base:

        def post() -> None:
            with httpx.Client(base_url=base, timeout=60) as http:
                barrier.wait()
                resp = http.post("/gates", json=GATE, headers={**auth, "Idempotency-Key": "same"})
                with lock:
                    results.append((resp.status_code, resp.json().get("id")))

        threads = [threading.Thread(target=post) for _ in range(num_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        listing = httpx.get(f"{base}/gates").json()
    codes = sorted(code for code, _ in results)
    assert codes == [200] * (num_threads - 1) + [201], results
    assert len({gid for _, gid in results}) == 1
    assert listing["count"] == 1


def test_list_filters_and_pagination(client, seeded):
    def ids(**params):
        resp = client.get("/gates", params=params)
        assert resp.status_code == 200, resp.text
        return [g["id"] for g in resp.json()["data"]]

    everything = ids()
    assert everything == sorted(seeded.values(), reverse=True)
    assert ids(status="queued") == [seeded["queued"]]
    assert ids(verdict="accept") == [seeded["degraded"], seeded["accept"]]
    assert ids(decision="neutral") == [seeded["neutral"]]
    assert ids(kind="regate") == [seeded["regate"]]
    assert ids(tag="qkv") == [seeded["degraded"], seeded["accept"]]
    assert ids(tag="qk") == []
    assert ids(family="ltx2-qkv") == [seeded["degraded"], seeded["accept"]]
    assert ids(topology="1x8 H200 NVLink", baseline_eligible="true") == [
        seeded["regate"], seeded["neutral"], seeded["accept"]
    ]
    assert set(ids(baseline_eligible="false")) == {seeded["degraded"], seeded["queued"]}
    assert ids(recipe="tiny") == []
    assert ids(q="QKV V2") == [seeded["degraded"]]
    assert ids(q="100%_") == []
    assert ids(repository="/nowhere") == []
    assert ids(created_after="2000-01-01T00:00:00Z", created_before="2999-01-01") == everything
    assert ids(created_after="2999-01-01") == []
    page = client.get("/gates", params={"skip": 1, "limit": 2}).json()
    assert page["count"] == len(everything)
    assert [g["id"] for g in page["data"]] == everything[1:3]
    assert client.get("/gates", params={"limit": 0}).status_code == 422
    assert client.get("/gates", params={"bogus": 1}).status_code == 422
    assert client.get("/gates", params={"status": "a\x00"}).status_code == 422


def test_gate_view_has_numbers_health_provenance_artifacts(client, seeded):
    view = client.get(f"/gates/{seeded['accept']}").json()
    s = view["summary"]
    assert s["verdict"] == "accept" and s["decision"] == "accept" and not s["decision_recorded"]
    assert abs(s["delta_ms"] - (-12.609296)) < 1e-6
    assert abs(s["delta_pct"] - (-2.950009)) < 1e-6
    assert abs(s["drift_pct"] - 0.455109) < 1e-6
    assert s["baseline_eligible"] is True
    assert [r["role"] for r in view["runs"]] == ["A", "X", "B"]
    assert len(view["runs"][1]["slowest_rank_step_s"]) == 3 + 6
    assert view["allocation"]["health_verdict"] == "healthy"
    assert [c["name"] for c in view["allocation"]["health_checks"]] == ["clocks", "sustained_all_reduce"]
    assert len(view["artifacts"]) == 3
    assert all(len(a["sha256"]) == 64 and a["log_url"] for a in view["artifacts"])
    later = client.get(f"/gates/{seeded['degraded']}").json()
    assert [g["id"] for g in later["family_history"]] == [seeded["accept"]]
    assert later["summary"]["baseline_eligible"] is False


def test_cancel(client, auth, seeded):
    resp = client.post(f"/gates/{seeded['queued']}/cancel", headers=auth)
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "cancelled"
    assert {r["status"] for r in resp.json()["runs"]} == {"cancelled"}
    again = client.post(f"/gates/{seeded['accept']}/cancel", json={"reason": "late"}, headers=auth)
    assert again.status_code == 409
    assert again.json()["detail"][0]["type"] == "invalid_transition"


def test_decisions_are_append_only_history(client, auth, seeded):
    gid = seeded["accept"]
    url = f"/gates/{gid}/decisions"
    no_reason = client.post(url, json={"decision": "reject"}, headers=auth)
    assert no_reason.status_code == 422
    assert no_reason.json()["detail"][0]["loc"] == ["body", "reason"]
    first = client.post(url, json={"decision": "reject", "reason": "+3 GiB memory"}, headers=auth)
    assert first.status_code == 201, first.text
    assert first.json()["decided_by"] == "tester"
    # The client cannot choose the name a decision is recorded under; it may add a note.
    impostor = client.post(
        url, json={"decision": "accept", "reason": "memory fixed", "decided_by": "alice"}, headers=auth
    )
    assert impostor.status_code == 422 and impostor.json()["detail"][0]["loc"] == ["body", "decided_by"]
    second = client.post(
        url, json={"decision": "accept", "reason": "memory fixed", "note": "for alice"}, headers=auth
    )
    assert second.status_code == 201
    assert second.json()["decided_by"] == "tester" and second.json()["note"] == "for alice"
    view = client.get(f"/gates/{gid}").json()
    assert [d["decision"] for d in view["decisions"]] == ["reject", "accept"]
    assert view["summary"]["decision"] == "accept" and view["summary"]["decision_recorded"]
    queued = client.post(
        f"/gates/{seeded['queued']}/decisions", json={"decision": "accept", "reason": "x"}, headers=auth
    )
    assert queued.status_code == 409
    bad = client.post(url, json={"decision": "maybe"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "decision"]


def test_stopping_points_only_eligible_accepts(client, auth, seeded, db_session):
    points = client.get("/stopping-points").json()["data"]
    assert len(points) == 1
    assert points[0]["gate"]["id"] == seeded["accept"]
    assert points[0]["topology"] == "1x8 H200 NVLink" and points[0]["recipe"] == "command:true"
    faster = make_gate(db_session, title="faster", family="ltx2-qkv")
    finish_gate(db_session, faster, medians_s=(0.4284, 0.4000, 0.4264))
    db_session.commit()
    points = client.get("/stopping-points").json()["data"]
    assert points[0]["gate"]["id"] == faster and points[0]["num_accepted"] == 2
    rejected = client.post(
        f"/gates/{faster}/decisions", json={"decision": "reject", "reason": "numerics"}, headers=auth
    )
    assert rejected.status_code == 201
    points = client.get("/stopping-points").json()["data"]
    assert points[0]["gate"]["id"] == seeded["accept"]


def test_verdict_preview_matches_design_examples(client):
    accept = client.post("/verdicts/preview", json={"medians_s": list(WORKED_ACCEPT)}).json()
    assert accept["verdict"] == "accept"
    assert abs(accept["delta_ms"] - (-12.609296)) < 1e-6
    neutral = client.post(
        "/verdicts/preview", json={"medians_s": [0.435652742, 0.434923236, 0.440625450]}
    ).json()
    assert neutral["verdict"] == "neutral"
    assert abs(neutral["drift_pct"] - 1.134961) < 1e-6
    longer = client.post(
        "/verdicts/preview", json={"pattern": "A X B X A", "medians_s": [1.0, 0.9, 1.0, 0.9, 1.0]}
    ).json()
    assert longer["verdict"] == "accept" and longer["num_candidate_copies"] == 2
    mismatch = client.post("/verdicts/preview", json={"pattern": "A X B X A", "medians_s": [1, 1, 1]})
    assert mismatch.status_code == 422 and mismatch.json()["detail"][0]["loc"] == ["body", "pattern"]
    bad_policy = client.post("/verdicts/preview", json={"medians_s": [1, 1, 1], "policy": "vibes"})
    assert bad_policy.status_code == 422 and bad_policy.json()["detail"][0]["loc"] == ["body", "policy"]
    bad_param = client.post(
        "/verdicts/preview", json={"medians_s": [1, 1, 1], "policy_params": {"nonsense": 1}}
    )
    assert bad_param.status_code == 422
    assert client.post("/verdicts/preview", json={"medians_s": [1, -1, 1]}).status_code == 422


def test_probes(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ok", "database": "ok"}
