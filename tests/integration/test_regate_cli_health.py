"""``axbgate regate --once`` exits non-zero when a tracked repository's check failed, and
the repository lists (CLI and API) show that repository as failing, with the reason."""

from __future__ import annotations

import json
import shutil

from fastapi.testclient import TestClient

from orchestrator.app.api import create_app
from orchestrator.app.cli import main
from orchestrator.settings import get_settings
from tests.factories import make_harness_repo, open_ledger
from tests.regate_support import add_tracked_repo


def _repo_list(capsys) -> list[dict]:
    assert main(["repo", "list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["data"]


def test_failed_check_exits_1_and_the_repo_lists_show_it_failing(tmp_path, capsys):
    engine, settings = open_ledger()
    repo, shas = make_harness_repo(tmp_path, [50.0])
    good = add_tracked_repo(engine, repo)
    (tmp_path / "other").mkdir()
    other_path, _ = make_harness_repo(tmp_path / "other", [50.0])
    bad = add_tracked_repo(engine, other_path)
    engine.dispose()
    assert [(r["id"], r["health"]) for r in _repo_list(capsys)] == [(good, "unchecked"), (bad, "unchecked")]

    assert main(["regate", "--once"]) == 0  # first checks: both heads become the baseline
    out = capsys.readouterr().out
    assert f"repository {good}: baseline" in out and f"repository {bad}: baseline" in out
    assert [r["health"] for r in _repo_list(capsys)] == ["healthy", "healthy"]

    shutil.rmtree(other_path)  # the second repository can no longer be read
    code = main(["regate", "--once"])
    captured = capsys.readouterr()
    assert code == 1
    assert f"repository {good}: unchanged {shas[0][:12]}" in captured.out
    assert f"repository {bad}: check_failed" in captured.out
    assert f"the check of repositories [{bad}] failed" in captured.err
    rows = {r["id"]: r for r in _repo_list(capsys)}
    assert rows[good]["health"] == "healthy" and rows[good]["health_reason"] is None
    assert rows[bad]["health"] == "failing" and str(other_path) in rows[bad]["health_reason"]
    assert main(["repo", "list"]) == 0
    table = capsys.readouterr().out
    assert "failing" in table and f"repository {bad} failing: cannot read" in table

    get_settings.cache_clear()
    with TestClient(create_app(settings)) as client:
        listed = client.get("/repos").json()["data"]
        one = client.get(f"/repos/{bad}").json()
    assert [(r["id"], r["health"]) for r in listed] == [(good, "healthy"), (bad, "failing")]
    assert one["repo"]["health"] == "failing"
