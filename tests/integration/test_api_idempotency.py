"""An Idempotency-Key names one request: a repeat with a different body is a conflict."""

from __future__ import annotations

GATE = {
    "title": "packed qkv",
    "workload": {"command": ["true"]},
    "candidate": {"env": {"NCCL_ALGO": "Tree"}},
    "health": {"enabled": False},
}


def test_reused_key_with_different_body_is_409(client, auth):
    headers = {**auth, "Idempotency-Key": "pr-77"}
    first = client.post("/gates", json=GATE, headers=headers)
    assert first.status_code == 201
    changed = {**GATE, "measured_steps": 50}
    again = client.post("/gates", json=changed, headers=headers)
    assert again.status_code == 409
    assert "different request" in again.text
    assert client.get("/gates").json()["count"] == 1
    same = client.post("/gates", json=GATE, headers=headers)
    assert same.status_code == 200 and same.json()["id"] == first.json()["id"]
