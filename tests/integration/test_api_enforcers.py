"""conbench-style enforcers over every API route: 404 for unknown ids, 422 for extra
fields, 401 for writes without a valid token. A route missing from the tables fails."""

from __future__ import annotations

import pytest

UNKNOWN = 987654321
GATE_BODY = {"title": "t", "workload": {"command": ["true"]}, "health": {"enabled": False}}
REPO_BODY = {"url": "/nonexistent/repo", "workload": {"command": ["true"]}}

# (method, path template) -> valid JSON body (None: no body)
WRITE_ROUTES = {
    ("POST", "/gates"): GATE_BODY,
    ("POST", "/gates/{gate_id}/cancel"): {"reason": "stop"},
    ("POST", "/gates/{gate_id}/decisions"): {"decision": "reject", "reason": "memory"},
    ("POST", "/runs/import"): None,
    ("POST", "/repos"): REPO_BODY,
    ("PATCH", "/repos/{repo_id}"): {"enabled": False},
    ("DELETE", "/repos/{repo_id}"): None,
    ("POST", "/repos/{repo_id}/check"): None,
    ("POST", "/repos/{repo_id}/webhook-secret"): None,
    ("POST", "/alerts/{event_id}/acknowledge"): None,
}
READ_ROUTES = {
    ("GET", "/gates"),
    ("GET", "/gates/{gate_id}"),
    ("GET", "/runs/{run_id}"),
    ("GET", "/runs/{run_id}/log"),
    ("GET", "/allocations/{allocation_id}"),
    ("GET", "/stopping-points"),
    ("POST", "/verdicts/preview"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/repos"),
    ("GET", "/repos/{repo_id}"),
    ("GET", "/repos/{repo_id}/drift"),
    ("GET", "/alerts"),
    ("GET", "/metrics"),
}
BODY_ROUTES = {
    ("POST", "/gates"): GATE_BODY,
    ("POST", "/gates/{gate_id}/cancel"): {"reason": "stop"},
    ("POST", "/gates/{gate_id}/decisions"): {"decision": "reject", "reason": "memory"},
    ("POST", "/verdicts/preview"): {"medians_s": [0.43, 0.41, 0.43]},
    ("POST", "/repos"): REPO_BODY,
    ("PATCH", "/repos/{repo_id}"): {"enabled": False},
}


def _api_routes(app) -> set[tuple[str, str]]:
    """Every (method, path) published in the OpenAPI schema."""
    return {
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        for method in item
    }


def test_every_route_is_enforced(app):
    assert _api_routes(app) == set(WRITE_ROUTES) | READ_ROUTES


def test_unknown_ids_are_404(client, auth):
    for method, path in sorted(_api_routes(client.app)):
        if "{" not in path:
            continue
        url = path.format(gate_id=UNKNOWN, run_id=UNKNOWN, allocation_id=UNKNOWN, repo_id=UNKNOWN,
                          event_id=UNKNOWN)
        body = WRITE_ROUTES.get((method, path)) or BODY_ROUTES.get((method, path))
        resp = client.request(method, url, json=body, headers=auth)
        assert resp.status_code == 404, (method, path, resp.text)
        detail = resp.json()["detail"]
        assert detail[0]["type"] == "not_found" and detail[0]["loc"][0] == "path"


def test_extra_fields_are_422(client, auth, seeded):
    for (method, path), body in BODY_ROUTES.items():
        url = path.format(gate_id=seeded["queued"], repo_id=UNKNOWN)
        resp = client.request(method, url, json={**body, "surprise": 1}, headers=auth)
        assert resp.status_code == 422, (method, path, resp.text)
        locs = [e["loc"] for e in resp.json()["detail"]]
        assert ["body", "surprise"] in locs, locs


def test_writes_without_valid_token_are_401(client, seeded, db_session):
    from orchestrator.usecases.tokens import create_token, revoke_token

    _row, revoked = create_token(session=db_session, name="old")
    revoke_token(session=db_session, ident="old")
    db_session.commit()
    headers_list = [
        {},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": f"Bearer {revoked}"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
    ]
    for (method, path), body in WRITE_ROUTES.items():
        url = path.format(gate_id=seeded["queued"], repo_id=UNKNOWN, event_id=UNKNOWN)
        for headers in headers_list:
            if body is None:
                resp = client.request(method, url, content=b"x", headers=headers)
            else:
                resp = client.request(method, url, json=body, headers=headers)
            assert resp.status_code == 401, (method, path, headers, resp.text)
            assert resp.headers["www-authenticate"] == "Bearer"


def test_reads_need_a_token_when_closed(db_url, tmp_path, seeded):
    from fastapi.testclient import TestClient

    from orchestrator.app.api import create_app
    from orchestrator.settings import Settings

    closed = create_app(
        Settings(data_dir=tmp_path / "closed", database={"url": db_url}, auth={"read_open": False},
                 gates={"enabled": False})
    )
    with TestClient(closed) as client:
        assert client.get("/gates").status_code == 401
        assert client.get(f"/gates/{seeded['accept']}").status_code == 401
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("bad", ["0", "-1", "abc", str(2**64)])
def test_bad_ids_are_422_not_500(client, bad):
    for path in ("/gates/{}", "/runs/{}", "/allocations/{}", "/runs/{}/log", "/repos/{}",
                 "/repos/{}/drift"):
        resp = client.get(path.format(bad))
        assert resp.status_code == 422, (path, bad, resp.text)
