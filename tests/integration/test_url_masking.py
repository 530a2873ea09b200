"""URL credentials are masked on every surface (issue 24 point 5): a database URL with a
password in an env value of a non-secret name, credentials in ``source.repo`` (also in the
422 message of a repository that cannot be read) and webhook ``notify`` URLs with a token
query string, through the real API on both database backends, the pages and the CLI. The
ledger keeps the real values: the run needs them."""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate
from orchestrator.db.service_models import TrackedRepository
from tests.factories import make_harness_repo

DB_PW = "DbPw_URL_SECRET_0202"
REPO_PW = "RepoPw_URL_SECRET_0201"
HOOK_TOKEN = "HookTok_URL_SECRET_0204"
SAS_SIG = "SasSig_URL_SECRET_0205"
LEAKS = (DB_PW, REPO_PW, HOOK_TOKEN, SAS_SIG)
DB_URL = f"postgresql://u:{DB_PW}@db.example.com/results"
BUCKET_URL = f"https://store.example.com/c/ckpt?sv=2024&sig={SAS_SIG}"
REMOTE = f"https://deploy:{REPO_PW}@git.example.com/team/"
HOOK = f"http://127.0.0.1:9/hook?token={HOOK_TOKEN}&team=perf"


@pytest.fixture
def remote_repo(tmp_path, monkeypatch) -> str:
    """A real git repository reached through a credentialed URL (git's ``insteadOf``)."""
    repo, _ = make_harness_repo(tmp_path, [50.0])
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "{repo.parent}/"]\n\tinsteadOf = {REMOTE}\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    url = REMOTE + repo.name
    assert subprocess.run(["git", "ls-remote", "--", url, "HEAD"], capture_output=True, check=True).stdout
    return url


def _cli(capsys, monkeypatch, db_url, tmp_path, args: list[str]) -> tuple[int, str]:
    from orchestrator.app.cli import main
    from orchestrator.settings import get_settings

    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    monkeypatch.setenv("AXBGATE_DATA_DIR", str(tmp_path / "cli-data"))
    get_settings.cache_clear()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_url_credentials_are_masked_on_every_surface(client, auth, db_session, db_url, tmp_path, capsys,
                                                     monkeypatch, api_settings, remote_repo):
    from orchestrator.db.models import Run

    api_settings.security.webhook_allow_private = True
    body = {"title": "masking", "workload": {"command": ["true", "--results", DB_URL]},
            "health": {"enabled": False},
            "control": {"env": {"RESULTS_DB": DB_URL, "NCCL_ALGO": "Ring"}},
            "candidate": {"source": {"repo": remote_repo, "ref": "main"},
                          "env": {"RESULTS_DB": DB_URL, "CKPT_BUCKET": BUCKET_URL}}}
    made = client.post("/gates", json=body, headers=auth)
    assert made.status_code == 201, made.text
    gate_id = made.json()["id"]
    refused = client.post("/gates", headers=auth, json={
        **body, "candidate": {"source": {"repo": REMOTE + "missing.git", "ref": "main"}}})
    assert refused.status_code == 422
    [detail] = refused.json()["detail"]
    assert detail["loc"][-3:] == ["candidate", "source", "ref"] or "source" in detail["loc"]
    assert "deploy:***@git.example.com/team/missing.git" in detail["msg"], detail
    repo_made = client.post("/repos", headers=auth, json={
        "url": remote_repo, "workload": {"command": ["true"]}, "notify": [HOOK],
        "options": {"env": {"RESULTS_DB": DB_URL}, "health": {"enabled": False}}})
    assert repo_made.status_code == 201, repo_made.text
    repo_id = repo_made.json()["id"]
    run = db_session.query(Run).filter_by(gate_id=gate_id, role="X").one()
    run.provenance = {"env": {"RESULTS_DB": DB_URL}, "command": ["true", "--results", DB_URL]}
    run.error = f"could not reach {DB_URL}"
    db_session.commit()

    # The ledger keeps the real values: the run and the notifier need them.
    with Session(db_session.get_bind()) as s:
        gate = s.get(Gate, gate_id)
        assert gate.candidate_spec["env"]["RESULTS_DB"] == DB_URL
        assert gate.candidate_spec["source"]["repo"] == remote_repo
        assert s.get(TrackedRepository, repo_id).notify == [HOOK]

    shown: dict[str, str] = {"POST /gates": made.text, "POST /gates (422)": refused.text,
                             "POST /repos": repo_made.text}
    for path in ("/gates", f"/gates/{gate_id}", f"/runs/{run.id}", "/repos", f"/repos/{repo_id}",
                 "/ledger", f"/ledger/gates/{gate_id}", f"/ledger/runs/{run.id}", "/ledger/repos",
                 f"/ledger/repos/{repo_id}"):
        resp = client.get(path)
        assert resp.status_code == 200, (path, resp.text)
        shown["GET " + path] = resp.text
    export = tmp_path / "GATE.md"
    for args in (["show", str(gate_id)], ["show", str(gate_id), "--json"], ["report", str(gate_id)],
                 ["report", str(gate_id), "--json"], ["report", str(gate_id), "-o", str(export)],
                 ["ledger"], ["ledger", "--json"], ["repo", "list", "--json"],
                 ["repo", "show", str(repo_id), "--json"]):
        code, text = _cli(capsys, monkeypatch, db_url, tmp_path, args)
        assert code == 0, (args, text)
        shown["axbgate " + " ".join(args)] = text
    shown["export GATE.md"] = export.read_text()
    for where, text in shown.items():
        leaked = [s for s in LEAKS if s in text]
        assert not leaked, f"{where} shows {leaked}"
    # The mask is shown where the value was (and the rest of the URL stays readable).
    masked_db = "postgresql://u:***@db.example.com/results"
    for where in ("GET /gates/%d" % gate_id, "GET /runs/%d" % run.id, "axbgate show %d --json" % gate_id,
                  "axbgate ledger --json", "axbgate report %d --json" % gate_id):
        assert masked_db in shown[where], where
    assert "deploy:***@git.example.com/team/harness-repo" in shown[f"GET /gates/{gate_id}"]
    assert "sig=***" in shown[f"GET /gates/{gate_id}"] and "sv=2024" in shown[f"GET /gates/{gate_id}"]
    for where in ("GET /ledger/repos", f"GET /ledger/repos/{repo_id}", f"GET /repos/{repo_id}"):
        assert "deploy:***@git.example.com/team/harness-repo" in shown[where], where
    for where in ("GET /repos", f"GET /repos/{repo_id}", "POST /repos", "axbgate repo list --json"):
        assert "http://127.0.0.1:9/hook?token=***&team=perf" in shown[where], where
    assert "u:***@db.example.com" in shown[f"GET /ledger/gates/{gate_id}"]
    assert "Ring" in shown[f"GET /ledger/gates/{gate_id}"], "masking hides only credentials"
    print(f"{len(shown)} answers, pages, CLI outputs and exports checked: no URL credential shown")


def test_mask_functions():
    from orchestrator.domain.secrets import mask_text, mask_url, mask_urls_deep

    assert mask_url("postgresql://u:pw@host/db") == "postgresql://u:***@host/db"
    assert mask_url("https://ghp_0123456789abcdefghij@github.com/o/r.git") == "https://***@github.com/o/r.git"
    assert mask_url("https://h/x?access_token=a&page=2#id_token=b") == "https://h/x?access_token=***&page=2#id_token=***"
    assert mask_url("https://h/x?X-Amz-Signature=abc&X-Amz-Date=1") == "https://h/x?X-Amz-Signature=***&X-Amz-Date=1"
    assert mask_url("https://u:p@h?api_key=k") == "https://u:***@h?api_key=***"
    assert mask_url("https://git.example.com/o/r.git") == "https://git.example.com/o/r.git"
    assert mask_url("/srv/repos/r") == "/srv/repos/r"
    text = "cannot read remote https://d:pw@g.example/r.git: fatal: 'https://d:pw@g.example/r.git/' failed"
    assert mask_text(text) == ("cannot read remote https://d:***@g.example/r.git: fatal: "
                               "'https://d:***@g.example/r.git/' failed")
    plain = "no url here"
    assert mask_text(plain) is plain
    series = [0.5] * 1000
    assert mask_urls_deep(series) is series
    assert mask_urls_deep({"a": ("x", "redis://:pw@r:6379/0")}) == {"a": ("x", "redis://:***@r:6379/0")}
