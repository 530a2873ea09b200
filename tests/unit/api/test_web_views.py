"""Web ledger read models and writes on an SQLite ledger (no browser): verdict briefs, the
rerun decision, live progress and ETA, history change points, alerts, bisection conflicts,
commit subjects and the offline API docs."""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def env(tmp_path):
    """``(client, session, settings, auth header)`` on a fresh migrated SQLite ledger."""
    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import Settings
    from orchestrator.usecases.tokens import SCOPES, create_token

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    settings = Settings(data_dir=tmp_path / "data", database={"url": url},
                        gates={"enabled": False}, nightly={"enabled": False})
    app = create_app(settings)
    with TestClient(app) as client:
        session = app.state.session_factory()
        _row, secret = create_token(session=session, name="tester", scopes=SCOPES)
        session.commit()
        yield client, session, settings, {"Authorization": f"Bearer {secret}"}
        session.close()


def test_verdict_brief_hides_absurd_intervals_and_reads_history_ids():
    from orchestrator.schemas.verdicts import VerdictBriefPublic

    wide = VerdictBriefPublic.from_numbers(
        policy="ratio-ci", verdict="inconclusive", is_primary=False,
        numbers={"delta_pct": 13.6, "ci_low_pct": -13.9, "ci_high_pct": 74860.0, "mde_pct": 250.0,
                 "run_sigma_pct": 3.1, "dof": 1, "not_enough_control_pairs": True,
                 "reason": "interval too wide", "midpoint_s": 0.5, "drift_pct": 1.0,
                 "verdict": "inconclusive", "history_gate_ids_used": ["4", "x", 7]})
    assert wide.ci_low_pct is None and wide.ci_high_pct is None and wide.not_enough_control_pairs
    assert wide.mde_pct == 250.0 and wide.dof == 1 and wide.history_gate_ids == [4, 7]
    assert wide.sentence.startswith("The candidate's median step was 13.6% longer")


def test_ledger_rows_carry_every_policy_and_the_disagreement(env):
    from tests.ledger_factories import seed_calibrated

    client, session, _settings, _auth = env
    ids = seed_calibrated(session)
    session.commit()
    rows = {r["id"]: r for r in client.get("/gates?family=ltx2-calibrated").json()["data"]}
    target = rows[ids["target"]]
    assert [(v["policy"], v["verdict"]) for v in target["verdicts"]] == [
        ("sequential", "accept"), ("drift", "accept"), ("ratio-ci", "accept")]
    seq = target["verdicts"][0]
    # v3: the consistent history opens the early look (A X B X A: 2 own dof + 4 history)
    assert seq["ci_low_pct"] < seq["ci_high_pct"] < 0 and seq["dof"] == 6
    assert seq["history_gate_ids"] == ids["history"] and not target["policies_disagree"]
    first = rows[ids["history"][0]]
    assert first["policies_disagree"] and first["verdicts"][0]["verdict"] == "inconclusive"
    page = client.get(f"/ledger/gates/{ids['target']}").text
    for gid in ids["history"]:
        assert f'href="/ledger/gates/{gid}"' in page


def test_rerun_decision_queues_the_same_gate(env):
    from tests.ledger_factories import finish_gate, make_gate

    client, session, _settings, auth = env
    gid = make_gate(session, title="packed qkv", candidate_env={"NCCL_ALGO": "Tree"})
    finish_gate(session, gid)
    session.commit()
    resp = client.post(f"/gates/{gid}/decisions", headers=auth,
                       json={"decision": "rerun", "reason": "drift looked high"})
    assert resp.status_code == 201, resp.text
    new_id = resp.json()["rerun_gate_id"]
    assert new_id is not None and new_id != gid
    old, new = (client.get(f"/gates/{i}").json()["gate"] for i in (gid, new_id))
    assert new["status"] == "queued" and new["run_pattern"] == old["run_pattern"] == "A X B"
    assert [(r["role"], r["status"]) for r in new["runs"]] == [("A", "pending"), ("X", "pending"),
                                                              ("B", "pending")]
    assert new["candidate_spec"]["env"] == {"NCCL_ALGO": "Tree"} and new["title"] == old["title"]
    assert f'href="/ledger/gates/{new_id}">queued as gate #{new_id}' in client.get(
        f"/ledger/gates/{gid}").text
    assert client.post(f"/gates/{gid}/decisions", headers=auth,
                       json={"decision": "accept", "reason": "ok"}).json()["rerun_gate_id"] is None


def test_live_progress_counts_steps_and_estimates_the_rest(env):
    from orchestrator import store
    from orchestrator.domain.lifecycle import transition
    from orchestrator.usecases.live import gate_live
    from tests.ledger_factories import make_gate

    _client, session, _settings, _auth = env
    gid = make_gate(session, warmup_steps=2, measured_steps=4)  # 6 steps per run
    gate = store.gates.get_gate(session=session, gate_id=gid)
    transition(gate, "submitted")
    transition(gate, "running")
    a, x, _b = sorted(gate.runs, key=lambda r: r.order)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    transition(a, "running")
    transition(a, "succeeded")
    store.runs.update_run(session=session, run=a, slowest_rank_step_s=[0.5] * 6, median_step_s=0.5,
                          started_at=t0, ended_at=t0 + dt.timedelta(seconds=5.0))  # 2 s launch
    transition(x, "running")
    store.runs.add_steps(session=session, run=x, steps=[
        {"step": i, "slowest_rank_step_s": 0.5} for i in range(2)])
    session.commit()
    live = gate_live(session=session, gate_id=gid)
    assert live.active and live.num_steps_done == 8 and live.num_steps_planned == 18
    assert [r.num_steps for r in live.runs] == [6, 2, 0]
    # X: 4 steps left x 0.5 s; B: 6 x 0.5 s + the 2 s launch overhead A showed.
    assert [r.eta_s for r in live.runs] == [0.0, pytest.approx(2.0), pytest.approx(5.0)]
    assert live.eta_s == pytest.approx(7.0)


def test_history_finds_the_shift_of_the_controls(env):
    from orchestrator.usecases.history import gate_history
    from tests.ledger_factories import finish_gate, make_gate

    _client, session, _settings, _auth = env
    for i in range(12):
        base = 0.43 if i < 6 else 0.45  # the controls got 4.7% slower after gate 6
        gid = make_gate(session, title=f"h{i}", family="fam-h")
        finish_gate(session, gid, medians_s=(base, base * 0.99, base * 1.001))
    session.commit()
    hist = gate_history(session=session, family="fam-h", tolerance_pct=0.5)
    assert hist.num_shown == 12 and hist.change_points == [6]
    assert hist.points[0].control_min_s < hist.points[0].midpoint_s < hist.points[0].control_max_s
    assert gate_history(session=session, family="fam-h", limit=5).num_shown == 5


def test_alerts_are_listed_across_repositories_and_acknowledged_once(env):
    from tests.ledger_factories import finish_gate, make_gate, seed_repository

    client, session, _settings, auth = env
    gates = []
    for i in range(3):
        gid = make_gate(session, title=f"r{i}")
        finish_gate(session, gid)
        gates.append(gid)
    seed_repository(session, gates, url="/srv/git/one")
    seed_repository(session, [], url="/srv/git/two")
    session.commit()
    alerts = client.get("/alerts").json()
    assert alerts["num_open"] == 3
    assert {a["repository_url"] for a in alerts["data"]} == {"/srv/git/one", "/srv/git/two"}
    event = alerts["data"][0]["id"]
    assert client.post(f"/alerts/{event}/acknowledge").status_code == 401
    done = client.post(f"/alerts/{event}/acknowledge", headers=auth).json()
    again = client.post(f"/alerts/{event}/acknowledge", headers=auth).json()
    assert done["acknowledged_by"] == "tester" and again["acknowledged_at"] == done["acknowledged_at"]
    assert client.get("/alerts").json()["num_open"] == 2
    assert len(client.get("/alerts?include_acknowledged=true").json()["data"]) == 3
    baseline = client.get("/repos/1").json()["events"][-1]
    assert baseline["kind"] == "baseline"
    resp = client.post(f"/alerts/{baseline['id']}/acknowledge", headers=auth)
    assert resp.status_code == 422 and "not an alert" in resp.text


def test_bisections_of_one_regression_that_disagree_are_flagged():
    from orchestrator.schemas.repos import BisectionPublic
    from orchestrator.usecases.regate.repos import bisection_conflicts

    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)

    def bis(i, commits, first_bad, status="found"):
        return BisectionPublic(id=i, repository_id=1, regression_gate_id=10 + i, good_sha="g" * 40,
                               bad_sha=commits[-1], commits=commits, good_index=-1, bad_index=0,
                               status=status, first_bad_sha=first_bad, first_bad_gate_id=None,
                               delta_pct=1.0, drift_pct=0.1, num_gates=3, message="",
                               created_at=now, finished_at=now)

    c = [f"{i:040x}" for i in range(1, 6)]
    agree = [bis(1, c[:3], c[1]), bis(2, c[1:4], c[1])]
    assert bisection_conflicts(agree) == []
    creep = [bis(1, c[:3], c[0]), bis(2, c[1:4], c[2]), bis(3, c[4:], c[4]),
             bis(4, c, None, status="failed")]
    warnings = bisection_conflicts(creep)
    assert len(warnings) == 1 and "bisections 1 and 2" in warnings[0]


def test_commit_subjects_are_read_locally(tmp_path):
    from orchestrator.vcs.history import commit_subjects

    repo = tmp_path / "r"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m",
        "Pack QKV projections")
    sha = run("rev-parse", "HEAD")
    assert commit_subjects(str(repo), [sha, "f" * 40, "not-hex; rm -rf"],
                           mirrors_dir=tmp_path) == {sha: "Pack QKV projections"}
    # A remote repository without a mirror yet: nothing, and no network.
    assert commit_subjects("https://example.invalid/r.git", [sha], mirrors_dir=tmp_path) == {}


def test_api_docs_and_pages_load_only_local_assets(env):
    client, session, _settings, _auth = env
    from tests.ledger_factories import seed_ledger

    ids = seed_ledger(session)
    session.commit()
    for path in ("/docs", "/redoc"):
        html = client.get(path).text
        assert "cdn." not in html and "fonts.googleapis" not in html, path
        for src in ("/static/vendor/swagger-ui/swagger-ui-bundle.js",
                    "/static/vendor/redoc/redoc.standalone.js"):
            if src.split("/")[3] in path or (path == "/docs" and "swagger" in src):
                assert src in html
    for asset in ("swagger-ui/swagger-ui-bundle.js", "swagger-ui/swagger-ui.css",
                  "redoc/redoc.standalone.js", "uplot/uPlot.iife.min.js", "uplot/uPlot.min.css",
                  "uplot/LICENSE", "redoc/LICENSE", "swagger-ui/LICENSE"):
        assert client.get(f"/static/vendor/{asset}").status_code == 200, asset
    assert "cdn.redoc.ly" not in client.get("/static/vendor/redoc/redoc.standalone.js").text
    for path in ("/ledger", f"/ledger/gates/{ids['accept']}", "/ledger/history", "/ledger/imports",
                 "/ledger/alerts", "/ledger/allocations/1", "/ledger/runs/1"):
        resp = client.get(path)
        assert resp.status_code == 200, path
        assert "https://" not in resp.text.split("<main>")[0], path  # nothing from outside
    assert client.get("/ledger/runs/999999").status_code == 404
    assert client.get("/ledger/history?tolerance_pct=0").status_code == 422


def test_binary_segmentation_finds_the_shifts_pelt_finds():
    import numpy as np

    from orchestrator.usecases.drift import detect_change_points, detect_change_points_binseg

    rng = np.random.default_rng(3)
    values = list(np.r_[0.43 + rng.normal(0, 2e-4, 40), 0.44 + rng.normal(0, 2e-4, 40),
                        0.435 + rng.normal(0, 2e-4, 40)])
    assert detect_change_points_binseg(values, tolerance_pct=0.5) == (40, 80)
    assert detect_change_points(values, tolerance_pct=0.5).change_points == (40, 80)
    flat = list(0.43 + rng.normal(0, 2e-4, 200))
    assert detect_change_points_binseg(flat, tolerance_pct=0.5) == ()
