"""Replays the attack classes of issue 16 against the real parts (API over both database
backends, the CLI, a real local gate, a real HTTP webhook receiver): tokens and scopes,
secret values, a run's environment, decision identity, webhook SSRF and signing, path
fields, the debug executor, control characters, HTML injection and the CLI error path.
docs/security.md describes the model these tests hold the code to."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.factories import FIXTURES, make_harness_repo
from tests.ledger_factories import finish_gate, make_gate

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = 987654321
GATE_BODY = {"title": "t", "workload": {"command": ["true"]}, "health": {"enabled": False}}
WRITE_SCOPES = {  # every write route and the scope it needs
    ("POST", "/gates"): ("submit", GATE_BODY),
    ("POST", "/gates/{gate_id}/cancel"): ("submit", {"reason": "stop"}),
    ("POST", "/gates/{gate_id}/decisions"): ("decide", {"decision": "accept", "reason": "ok"}),
    ("POST", "/runs/import"): ("submit", None),
    ("POST", "/repos"): ("admin", {"url": "/nonexistent/repo", "workload": {"command": ["true"]}}),
    ("PATCH", "/repos/{repo_id}"): ("admin", {"enabled": False}),
    ("DELETE", "/repos/{repo_id}"): ("admin", None),
    ("POST", "/repos/{repo_id}/check"): ("submit", None),
    ("POST", "/repos/{repo_id}/webhook-secret"): ("admin", None),
    ("POST", "/alerts/{event_id}/acknowledge"): ("admin", None),
}
SECRETS = {  # gate env values that must never be shown
    "HF_TOKEN": "hf_GATE_SECRET_0001", "DB_PASSWORD": "pw_GATE_SECRET_0002",
    "AWS_SECRET_ACCESS_KEY": "aws_GATE_SECRET_0003", "WANDB_API_KEY": "wandb_GATE_SECRET_0004",
}
EVIL = "<script>alert('x')</script>"
CONTROL = "\x1b[31mRED\x1b[0m\x07bell\rOVER\x1b]0;title\x07\x9b2Jend"


def _tokens(db_session) -> dict[str, str]:
    from orchestrator.usecases.tokens import create_token, revoke_token

    out = {}
    for scope in ("read", "submit", "decide", "admin"):
        _row, out[scope] = create_token(session=db_session, name=f"only-{scope}", scopes=[scope])
    _row, out["revoked"] = create_token(session=db_session, name="gone", scopes=["admin"])
    revoke_token(session=db_session, ident="gone")
    db_session.commit()
    return out


def _call(client, method, path, body, secret=None):
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    if body is None:
        return client.request(method, path, content=b"x", headers=headers)
    return client.request(method, path, json=body, headers=headers)


def test_every_write_route_needs_a_valid_token_with_its_scope(client, seeded, db_session):
    routes = {(m.upper(), p) for p, item in client.app.openapi()["paths"].items() for m in item
              if m.upper() != "GET" and p != "/verdicts/preview"}
    assert routes == set(WRITE_SCOPES), "a write route is missing from WRITE_SCOPES"
    tokens = _tokens(db_session)
    for (method, template), (scope, body) in WRITE_SCOPES.items():
        path = template.format(gate_id=seeded["accept"], repo_id=UNKNOWN, event_id=UNKNOWN)
        for secret in (None, "not-a-token", tokens["revoked"]):
            resp = _call(client, method, path, body, secret)
            assert resp.status_code == 401, (method, template, secret, resp.text)
        for other in ("read", "submit", "decide"):
            if other == scope:
                continue
            resp = _call(client, method, path, body, tokens[other])
            assert resp.status_code == 403, (method, template, other, resp.text)
            assert f"lacks the '{scope}' scope" in resp.json()["detail"][0]["msg"]
        for allowed in {scope, "admin"}:
            resp = _call(client, method, path, body, tokens[allowed])
            assert resp.status_code not in (401, 403), (method, template, allowed, resp.text)
        print(f"{method} {template}: 401 without/unknown/revoked, 403 without '{scope}', "
              f"{resp.status_code} with it")


def test_closed_reads_need_any_valid_token(db_url, tmp_path, seeded, db_session):
    from orchestrator.app.api import create_app
    from orchestrator.settings import Settings

    tokens = _tokens(db_session)
    closed = create_app(Settings(data_dir=tmp_path / "closed", database={"url": db_url},
                                 auth={"read_open": False}, gates={"enabled": False},
                                 nightly={"enabled": False}))
    with TestClient(closed) as client:
        for path in ("/gates", f"/gates/{seeded['accept']}", "/repos", "/ledger",
                     f"/ledger/gates/{seeded['accept']}", "/stopping-points", "/alerts",
                     "/ledger/alerts", "/ledger/history"):
            assert client.get(path).status_code == 401, path
            assert client.get(path, headers={"Authorization": f"Bearer {tokens['revoked']}"}
                              ).status_code == 401, path
            ok = client.get(path, headers={"Authorization": f"Bearer {tokens['read']}"})
            assert ok.status_code == 200, (path, ok.text)
        assert client.get("/healthz").status_code == 200


def _secret_gate(client, auth, repo_secret_env=None) -> int:
    body = {"title": "secrets", "workload": {"command": ["true"]}, "health": {"enabled": False},
            "control": {"env": {**SECRETS, "NCCL_ALGO": "Ring"}},
            "candidate": {"env": {"HF_TOKEN": "secret://HF_TOKEN", "DB_PASSWORD": SECRETS["DB_PASSWORD"]}}}
    resp = client.post("/gates", json=body, headers=auth)
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


def _cli(capsys, monkeypatch, db_url, tmp_path, args: list[str]) -> tuple[int, str]:
    from orchestrator.app.cli import main
    from orchestrator.settings import get_settings

    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    monkeypatch.setenv("AXBGATE_DATA_DIR", str(tmp_path / "cli-data"))
    get_settings.cache_clear()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_secret_values_never_appear_in_answers_pages_cli_or_exports(
        client, auth, db_session, db_url, tmp_path, capsys, monkeypatch, api_settings):
    from orchestrator.db.models import Run
    from orchestrator.usecases.tokens import create_token

    api_settings.security.secret_refs.append("HF_TOKEN")
    gate_id = _secret_gate(client, auth)
    refused = client.post("/gates", json={**GATE_BODY, "candidate": {"env": {"X": "secret://AXBGATE_API_TOKEN"}}},
                          headers=auth)
    assert refused.status_code == 422 and "not offered" in refused.json()["detail"][0]["msg"]
    finished = make_gate(db_session, title="measured", candidate_env={**SECRETS, "NCCL_ALGO": "Ring"})
    finish_gate(db_session, finished)
    run = db_session.query(Run).filter_by(gate_id=finished, role="X").one()
    run.provenance = {"env": {"TORCH_HUB_TOKEN": "torch_PROV_SECRET_0005", "NCCL_DEBUG": "WARN"}}
    db_session.commit()
    repo, _ = make_harness_repo(tmp_path, [50.0])
    made = client.post("/repos", headers=auth, json={
        "url": str(repo), "workload": {"command": ["true"]},
        "options": {"env": {"HF_TOKEN": SECRETS["HF_TOKEN"]}, "health": {"enabled": False}}})
    assert made.status_code == 201, made.text
    repo_id, webhook_secret = made.json()["id"], made.json()["webhook_secret"]
    all_secrets = [*SECRETS.values(), "torch_PROV_SECRET_0005", webhook_secret]
    shown: dict[str, str] = {}
    for path in ("/gates", f"/gates/{gate_id}", f"/gates/{finished}", f"/runs/{run.id}",
                 "/stopping-points", "/repos", f"/repos/{repo_id}", "/ledger", "/ledger/decisions",
                 f"/ledger/gates/{gate_id}", f"/ledger/gates/{finished}", "/ledger/repos",
                 f"/ledger/repos/{repo_id}"):
        resp = client.get(path)
        assert resp.status_code == 200, (path, resp.text)
        shown[path] = resp.text
    _row, reader = create_token(session=db_session, name="reader", scopes=["read"])
    db_session.commit()
    export = tmp_path / "REPORT.md"
    for args in (["show", str(finished)], ["show", str(finished), "--json"], ["show", str(gate_id)],
                 ["ledger"], ["ledger", "--json"], ["report"], ["report", "--json"],
                 ["report", str(finished), "-o", str(export)], ["repo", "list", "--json"],
                 ["repo", "show", str(repo_id), "--json"], ["token", "list", "--json"]):
        code, text = _cli(capsys, monkeypatch, db_url, tmp_path, args)
        assert code == 0, (args, text)
        shown["axbgate " + " ".join(args)] = text
    shown["export REPORT.md"] = export.read_text()
    for where, text in shown.items():
        leaked = [s for s in [*all_secrets, reader] if s in text]
        assert not leaked, f"{where} shows {leaked}"
    assert "***" in shown[f"/gates/{gate_id}"] and "NCCL_ALGO" in shown["/ledger"]
    assert "Ring" in shown[f"/ledger/gates/{finished}"], "masking hides only secret names"
    assert "secret://HF_TOKEN" in shown[f"/gates/{gate_id}"], "a reference is not a secret"
    print(f"{len(shown)} answers, pages, CLI outputs and exports checked: no secret value shown")


def _wait_for_gate(engine, settings, gate_id: int, timeout_s: float = 180.0) -> str:
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases.gates import get_gate

    deadline = time.monotonic() + timeout_s
    while True:
        dispatch_pass(engine, settings, gate_ids=[gate_id])
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine) as session:
            gate = get_gate(session=session, gate_id=gate_id)
        if gate.status in ("succeeded", "failed", "cancelled"):
            return gate.status + (f": {gate.status_reason}" if gate.status_reason else "")
        assert time.monotonic() < deadline, f"gate {gate_id} still {gate.status}"
        time.sleep(0.5)


SERVER_SECRETS = {
    "AXBGATE_API_TOKEN": "axb_SERVER_TOKEN_0101",
    "AXBGATE_DATABASE__URL": "postgresql+psycopg://axb:pg_SERVER_PASSWORD_0102@127.0.0.1:5432/axb",
    "AWS_SECRET_ACCESS_KEY": "aws_SERVER_SECRET_0103",
    "AWS_ACCESS_KEY_ID": "AKIA_SERVER_0104",
    "TORCH_HUB_TOKEN": "torchhub_SERVER_0105",
    "HF_TOKEN": "hf_SERVER_REFERENCED_0106",
}


def _run_env_gate(tmp_data: Path, monkeypatch, python: str = sys.executable, **security):
    from sqlalchemy import create_engine

    from orchestrator.db.migrate import upgrade
    from orchestrator.domain.gate_spec import GateCreate
    from orchestrator.settings import Settings
    from orchestrator.usecases.gates import submit_gate

    settings = Settings(data_dir=tmp_data, security={"secret_refs": ["HF_TOKEN"],
                                                     "run_env_passthrough": ["WANDB_API_KEY"], **security})
    # The server's environment from here on (Settings above were read before it).
    for name, value in {**SERVER_SECRETS, "NCCL_DEBUG": "WARN", "WANDB_API_KEY": "wandb_PASSED_0107",
                        "UNRELATED_SERVER_VAR": "x"}.items():
        monkeypatch.setenv(name, value)
    upgrade(settings.database_url)
    engine = create_engine(settings.database_url)
    gate_in = GateCreate.model_validate({
        "title": "what a run sees", "executor": "local", "health": {"enabled": False},
        "workload": {"command": [python, str(FIXTURES / "env_harness.py"), "{warmup_steps}",
                                 "{measured_steps}"]},
        "control": {"env": {"HARNESS_STEP_MS": "20", "DB_PASSWORD": SECRETS["DB_PASSWORD"]}},
        "candidate": {"env": {"HARNESS_STEP_MS": "20", "HF_TOKEN": "secret://HF_TOKEN"}},
        "warmup_steps": 1, "measured_steps": 3, "run_timeout_s": 60})
    with Session(engine) as session:
        gate, _ = submit_gate(session=session, gate_in=gate_in, secret_refs=["HF_TOKEN"])
        session.commit()
    status = _wait_for_gate(engine, settings, gate.id)
    return settings, gate.id, status


def _reported(log: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in log.read_text().splitlines()
                if re.match(r"^(ENV_KEYS|DRIVER_ENV_KEYS|CONTROLLER_ENV_KEYS|RUN_UID|HF_TOKEN_SHA256) ", line))


def test_a_run_environment_holds_no_server_secret(tmp_path, monkeypatch):
    from orchestrator.executors.plan import GatePaths

    settings, gate_id, status = _run_env_gate(tmp_path / "data", monkeypatch)
    assert status == "succeeded", status
    paths = GatePaths.of(settings.data_dir, gate_id)
    control, candidate = _reported(paths.run_log(0, "A")), _reported(paths.run_log(2, "X"))  # A A X B: sequential
    print("run env keys (A):", control["ENV_KEYS"])
    print("driver env keys:", control["DRIVER_ENV_KEYS"])
    print("controller env keys:", control["CONTROLLER_ENV_KEYS"])
    from axbgate_record.rule import ENV_NAMES

    # The driver's own AXBGATE_* variables (the masked names, and in a run the gate's
    # measurement rule, docs/record-contract.md) are the only ones: no server setting passes.
    driver_set = {"AXBGATE_MASKED_ENV", *ENV_NAMES}
    assert set(ENV_NAMES) <= set(json.loads(control["ENV_KEYS"]))
    for label in ("ENV_KEYS", "DRIVER_ENV_KEYS", "CONTROLLER_ENV_KEYS"):
        keys = set(json.loads(control[label]))
        allowed = driver_set if label == "ENV_KEYS" else set()
        assert not [k for k in keys if k.startswith("AXBGATE_") and k not in allowed], label
        assert not keys & {"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "TORCH_HUB_TOKEN",
                           "UNRELATED_SERVER_VAR"}, (label, keys)
        assert {"PATH", "NCCL_DEBUG", "WANDB_API_KEY"} <= keys, (label, keys)
    run_keys = set(json.loads(control["ENV_KEYS"]))
    assert "DB_PASSWORD" in run_keys and "HF_TOKEN" not in run_keys  # the gate's own env only
    assert candidate["HF_TOKEN_SHA256"] == hashlib.sha256(SERVER_SECRETS["HF_TOKEN"].encode()).hexdigest()
    values = [*SERVER_SECRETS.values()]
    for path in paths.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [v for v in values if v.encode() in data], path


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (CI runs as root)")
def test_run_as_user_runs_steps_unprivileged(monkeypatch):
    from orchestrator.executors.plan import GatePaths

    # The run user must reach the data directory (a world-traversable one under /tmp) and
    # its interpreter (this venv's lives under /root, 0700: the system one, stdlib only).
    closed = [str(p) for p in FIXTURES.resolve().parents if not p.stat().st_mode & 0o001]
    if closed:  # e.g. a checkout under a 0700 mktemp folder: nobody cannot read the harness
        pytest.skip(f"the run user cannot reach the test harness: {closed[0]} is not o+x")
    data = Path(tempfile.mkdtemp(prefix="axbgate-runas-"))
    data.chmod(0o755)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    try:
        settings, gate_id, status = _run_env_gate(data, monkeypatch, python=python, run_as_user="nobody")
        assert status == "succeeded", status
        reported = _reported(GatePaths.of(settings.data_dir, gate_id).run_log(0, "A"))
        print("run as nobody:", reported["RUN_UID"], reported["DRIVER_ENV_KEYS"])
        assert reported["RUN_UID"] == "65534"
        assert reported["DRIVER_ENV_KEYS"].startswith("UNREADABLE")
    finally:
        subprocess.run(["rm", "-rf", str(data)], check=False)


def test_decisions_are_recorded_under_the_token_identity(client, seeded, db_session, db_url, tmp_path,
                                                         capsys, monkeypatch):
    import getpass

    from orchestrator.usecases.tokens import create_token

    token, secret = create_token(session=db_session, name="alice", scopes=["decide"])
    db_session.commit()
    url, headers = f"/gates/{seeded['accept']}/decisions", {"Authorization": f"Bearer {secret}"}
    forged = client.post(url, headers=headers, json={"decision": "reject", "reason": "r", "decided_by": "bob"})
    assert forged.status_code == 422 and forged.json()["detail"][0]["loc"] == ["body", "decided_by"]
    made = client.post(url, headers=headers, json={"decision": "reject", "reason": "+3 GiB", "note": "for bob"})
    assert made.status_code == 201, made.text
    assert (made.json()["decided_by"], made.json()["token_id"], made.json()["note"]) == ("alice", token.id, "for bob")
    same = client.post(url, headers=headers, json={"decision": "accept", "reason": "ok", "decided_by": "alice"})
    assert same.status_code == 201 and same.json()["decided_by"] == "alice"
    code, text = _cli(capsys, monkeypatch, db_url, tmp_path,
                      ["decide", str(seeded["neutral"]), "--decision", "neutral", "--json"])
    assert code == 0 and json.loads(text)["decided_by"] == getpass.getuser()
    code, text = _cli(capsys, monkeypatch, db_url, tmp_path,
                      ["decide", str(seeded["neutral"]), "--decision", "reject", "--by", "bob"])
    assert code == 2 and "--by" in text


class _Receiver:
    """Records raw bodies and headers of POSTs on 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[tuple[bytes, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append((body, dict(self.headers.items())))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.parametrize("target", [
    "http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:5432/", "http://10.1.2.3/hook",
    "http://[::1]/hook", "http://0.0.0.0/hook", "http://224.0.0.1/hook", "http://localhost:8000/x",
    "http://2130706433/hook", "http://[::ffff:127.0.0.1]/hook", "http://192.168.1.10/hook"])
def test_webhook_targets_on_internal_addresses_are_refused(client, auth, tmp_path, target):
    repo, _ = make_harness_repo(tmp_path, [50.0])
    resp = client.post("/repos", headers=auth, json={"url": str(repo), "workload": {"command": ["true"]},
                                                     "notify": [target]})
    assert resp.status_code == 422, resp.text
    assert resp.json()["detail"][0]["loc"] == ["body", "notify"]
    assert "WEBHOOK_ALLOW_PRIVATE" in resp.json()["detail"][0]["msg"]


def test_webhook_delivery_rechecks_the_address_and_signs_the_body(tmp_path, monkeypatch):
    import socket

    from sqlalchemy import create_engine
    from standardwebhooks.webhooks import Webhook

    from orchestrator.db.migrate import upgrade
    from orchestrator.db.models import RepoEvent, WebhookDelivery
    from orchestrator.schemas.repos import RepoCreate
    from orchestrator.settings import Settings
    from orchestrator.usecases import regate
    from orchestrator.usecases.notify import deliver_due, enqueue_notifications

    receiver = _Receiver()
    answers = {"hooks.example.test": "93.184.216.34"}  # public at registration
    real = socket.getaddrinfo

    def fake_getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return real(answers[host], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    strict = Settings(data_dir=tmp_path / "d")
    upgrade(strict.database_url)
    engine = create_engine(strict.database_url)
    repo, _ = make_harness_repo(tmp_path, [50.0])
    target = f"http://hooks.example.test:{receiver.port}/hook"
    with Session(engine, expire_on_commit=False) as session:
        created = regate.add_repository(session=session, repo_in=RepoCreate.model_validate(
            {"url": str(repo), "workload": {"command": ["true"]}, "notify": [target]}))
        session.commit()
        answers["hooks.example.test"] = "127.0.0.1"  # DNS rebinding: now it points inside
        from orchestrator.db.models import TrackedRepository

        row = session.get(TrackedRepository, created.id)
        event = RepoEvent(repository_id=row.id, kind="regression", message="slower")
        session.add(event)
        session.flush()
        [delivery] = enqueue_notifications(session=session, repo=row, event=event, settings=strict)
        session.commit()
    assert deliver_due(engine=engine, settings=strict) == 1
    with Session(engine) as session:
        refused = session.get(WebhookDelivery, delivery.id)
        assert refused.status == "failed" and "127.0.0.1, a loopback address" in refused.attempts[0].error
    assert receiver.requests == [], "nothing was sent to the internal address"
    allowed = Settings(data_dir=tmp_path / "d", security={"webhook_allow_private": True})
    with Session(engine) as session:
        session.get(WebhookDelivery, delivery.id).status = "pending"
        session.commit()
    assert deliver_due(engine=engine, settings=allowed) == 1
    [(body, headers)] = receiver.requests
    assert Webhook(created.webhook_secret).verify(body, headers)["event"] == "regression"
    msg = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    import base64
    import hmac

    key = base64.b64decode(created.webhook_secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"] == f"v1,{expected}"
    print("delivery refused after rebinding, then delivered and signed:", headers["webhook-signature"][:16])


def test_path_fields_accept_shipped_names_or_the_files_dir_only(db_url, tmp_path, db_session):
    from orchestrator.app.api import create_app
    from orchestrator.settings import Settings
    from orchestrator.usecases.tokens import create_token

    files = tmp_path / "files"
    files.mkdir()
    (files / "mine.toml").write_text((ROOT / "trainer/recipes/tiny.toml").read_text())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.toml").write_text('[model]\nsecret_key_name = "hunter2"\n')
    (files / "link.toml").symlink_to(outside / "private.toml")
    _row, secret = create_token(session=db_session, name="p", scopes=["submit"])
    db_session.commit()
    app = create_app(Settings(data_dir=tmp_path / "data", database={"url": db_url}, gates={"enabled": False},
                              nightly={"enabled": False}, security={"files_dir": files}))
    auth = {"Authorization": f"Bearer {secret}"}

    def post(recipe=None, criteria=None):
        body = {"title": "p", "health": {"enabled": True, **({"criteria": criteria} if criteria else {})}}
        body["workload"] = {"recipe": recipe} if recipe else {"command": ["true"]}
        return client.post("/gates", json=body, headers=auth)

    with TestClient(app) as client:
        assert post(recipe="tiny").status_code == 201
        ok = post(recipe="mine.toml")
        assert ok.status_code == 201 and ok.json()["workload"]["recipe"] == str(files / "mine.toml")
        assert post(criteria="cpu-gloo").status_code == 201, post(criteria="cpu-gloo").text
        messages = set()
        for field, value in [("recipe", str(outside / "private.toml")), ("recipe", "/etc/passwd"),
                             ("recipe", str(outside / "absent.toml")), ("recipe", "../outside/private.toml"),
                             ("recipe", "link.toml"), ("criteria", str(outside / "private.toml")),
                             ("criteria", "/etc/nonexistent.toml")]:
            resp = post(**{field: value})
            assert resp.status_code == 422, (value, resp.text)
            msg = resp.json()["detail"][0]["msg"]
            assert "hunter2" not in msg and "secret_key_name" not in msg and "outside" not in msg
            messages.add((field, msg))
        assert len(messages) == 2, messages  # one message per field, whatever the file
        print("path refusals:", *sorted(m for _, m in messages), sep="\n  ")


def test_debug_executor_refused_by_the_api_and_never_claimed_by_a_server(client, auth, db_session, api_settings):
    from orchestrator.runtime.gates import SERVER_EXECUTORS, dispatch_pass, poll_pass
    from orchestrator.usecases.gates import get_gate

    resp = client.post("/gates", json={**GATE_BODY, "executor": "debug"}, headers=auth)
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "executor"]
    from orchestrator.db.models import Gate

    gate_id = make_gate(db_session, title="cli debug gate")

    db_session.get(Gate, gate_id).executor = "debug"  # as `axbgate gate --executor debug` stores it
    db_session.commit()
    engine = client.app.state.engine
    assert dispatch_pass(engine, api_settings, kinds=SERVER_EXECUTORS) == 0
    poll_pass(engine, api_settings, kinds=SERVER_EXECUTORS)
    db_session.expire_all()
    assert get_gate(session=db_session, gate_id=gate_id).status == "queued"


def _evil_ledger(client, auth, db_session, tmp_path) -> dict[str, int]:
    """Gates, runs, decisions and a repository whose user text is HTML and control codes."""
    from orchestrator.db.models import Allocation, Gate, RepoEvent, Run
    from orchestrator.usecases.tokens import create_token

    ids = {}
    text = EVIL + CONTROL
    made = client.post("/gates", headers=auth, json={"title": text, "family": text,
                                                    "workload": {"command": [EVIL]}, "health": {"enabled": False}})
    assert made.status_code == 201, made.text
    ids["gate"] = made.json()["id"]
    assert client.post("/gates", headers=auth, json={**GATE_BODY, "tags": [EVIL]}).status_code == 422
    assert client.post(f"/gates/{ids['gate']}/cancel", headers=auth, json={"reason": text}).status_code == 200
    ids["done"] = make_gate(db_session, title=text, family=text, tags=["ok"])
    finish_gate(db_session, ids["done"])
    run = db_session.query(Run).filter_by(gate_id=ids["done"], role="X").one()
    run.error = text
    gate = db_session.get(Gate, ids["done"])
    gate.tags = ["ok", text]  # the API refuses such a tag; the page must cope with a stored one
    db_session.get(Allocation, gate.allocation_id).topology = text
    _row, evil_token = create_token(session=db_session, name=EVIL, scopes=["decide"])
    db_session.commit()
    resp = client.post(f"/gates/{ids['done']}/decisions", headers={"Authorization": f"Bearer {evil_token}"},
                       json={"decision": "reject", "reason": text, "note": text})
    assert resp.status_code == 201, resp.text
    repo, _ = make_harness_repo(tmp_path, [50.0])
    made = client.post("/repos", headers=auth, json={"url": str(repo), "workload": {"command": [EVIL]}})
    ids["repo"] = made.json()["id"]
    db_session.add(RepoEvent(repository_id=ids["repo"], kind="regression", message=text, alert=True))
    db_session.commit()
    return ids


def test_html_in_every_user_text_field_is_escaped_on_every_page(client, auth, db_session, tmp_path):
    ids = _evil_ledger(client, auth, db_session, tmp_path)
    pages = ["/ledger", "/ledger/decisions", f"/ledger/gates/{ids['gate']}", f"/ledger/gates/{ids['done']}",
             "/ledger/repos", f"/ledger/repos/{ids['repo']}", f"/ledger?q={EVIL}", f"/ledger?family={EVIL}",
             "/ledger/gates/999999", "/ledger/repos/999999"]
    for page in pages:
        resp = client.get(page)
        assert resp.status_code in (200, 404), (page, resp.status_code)
        assert "<script>alert" not in resp.text, page
    gate_page = client.get(f"/ledger/gates/{ids['done']}").text
    assert gate_page.count("&lt;script&gt;alert(") >= 6  # title, family, error, topology, reason, note, by
    print(f"{len(pages)} pages: every <script> arrived escaped")


def test_control_characters_are_stripped_from_terminal_output(client, auth, db_session, db_url, tmp_path,
                                                              capsys, monkeypatch):
    ids = _evil_ledger(client, auth, db_session, tmp_path)
    outputs = {}
    for args in (["show", str(ids["done"])], ["show", str(ids["gate"])], ["ledger"], ["report"],
                 ["watch", str(ids["done"])], ["watch", str(ids["gate"])], ["repo", "show", str(ids["repo"])],
                 ["repo", "list"], ["token", "list"]):
        code, text = _cli(capsys, monkeypatch, db_url, tmp_path, args)
        assert code in (0, 1), (args, text)
        outputs[" ".join(args)] = text
    for args, text in outputs.items():
        bad = sorted({f"{ord(c):#04x}" for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0})
        assert not bad, f"axbgate {args} printed control characters {bad}"
    assert "REDbellOVER" in outputs[f"show {ids['done']}"] and "REDbellOVER" in outputs["report"]
    print(f"{len(outputs)} CLI outputs free of control characters")


def test_cli_failures_are_one_line_with_the_traceback_in_a_file(capsys, monkeypatch, tmp_path):
    from orchestrator.app.cli import main
    from orchestrator.settings import get_settings
    from orchestrator.usecases import views

    monkeypatch.setenv("AXBGATE_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()

    def boom(**_kw):
        raise RuntimeError("the ledger view broke")

    monkeypatch.setattr(views, "list_gates", boom)
    assert main(["ledger"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("axbgate: error: RuntimeError: the ledger view broke"), err
    trace = Path(err[0].rsplit("full traceback in ", 1)[1])
    assert trace.is_relative_to(tmp_path / "data" / "logs") and "Traceback" in trace.read_text()


@pytest.mark.parametrize("args", [["db", "upgrade"], ["serve", "--port", "1"], ["ledger"]])
def test_an_unreachable_database_is_one_clear_line(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AXBGATE_")}
    env.update(AXBGATE_DATABASE__URL="postgresql+psycopg://axb:pg_SECRET_0201@127.0.0.1:1/axb",
               AXBGATE_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([str(Path(sys.executable).with_name("axbgate")), *args], env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    print(f"axbgate {' '.join(args)} -> exit {proc.returncode}: {lines}")
    assert proc.returncode in (1, 2), proc.stderr
    assert len(lines) == 1 and lines[0].startswith("axbgate: error:"), proc.stderr
    assert "127.0.0.1" in lines[0] and "Traceback" not in proc.stderr and "pg_SECRET_0201" not in proc.stderr
