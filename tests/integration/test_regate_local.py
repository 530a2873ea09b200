"""The nightly re-gate end to end through the real `local` executor, with a REAL git
repository whose commits change the fixture harness's step time (tests.factories).

The scheduler runs with the time-compressed trigger (every second); the test drives the
dispatcher and poller passes itself (the lead's services), the scheduler's own loop
processes outcomes, bisects and delivers webhooks.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from orchestrator.app.api import create_app
from orchestrator.db.migrate import upgrade
from orchestrator.db.models import Bisection, Gate, RepoEvent, TrackedRepository, WebhookAttempt
from orchestrator.db.session import build_engine
from orchestrator.runtime.nightly import NightlyScheduler, regate_pass
from orchestrator.settings import Settings
from orchestrator.usecases.drift import drift_of_repository
from tests.factories import make_harness_repo
from tests.regate_support import WebhookReceiver, add_tracked_repo, commit_step_ms, drive_until

BASE_MS = 50.0


@pytest.fixture
def ledger(tmp_path):
    settings = Settings(
        data_dir=tmp_path / "data", gates={"enabled": False},
        nightly={"interval_seconds": 1.0, "loop_seconds": 0.3, "lease_seconds": 5.0,
                 "webhook_backoff_seconds": 0.2, "webhook_timeout_seconds": 5.0},
        security={"webhook_allow_private": True},  # the receiver listens on 127.0.0.1
    )
    upgrade(settings.database_url)
    engine = build_engine(settings.database_url)
    yield engine, settings
    engine.dispose()


def _repo(engine, repo_id) -> TrackedRepository:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(TrackedRepository, repo_id)


def _events(engine, repo_id, kind=None) -> list[RepoEvent]:
    with Session(engine, expire_on_commit=False) as session:
        query = select(RepoEvent).where(RepoEvent.repository_id == repo_id).order_by(RepoEvent.id)
        if kind:
            query = query.where(RepoEvent.kind == kind)
        return list(session.scalars(query))


def _regates(engine, repo_id, kind="regate") -> list[Gate]:
    with Session(engine, expire_on_commit=False) as session:
        return list(session.scalars(select(Gate).where(Gate.repository_id == repo_id, Gate.kind == kind)
                                    .order_by(Gate.id)))


def test_scheduler_passes_neutral_commit_and_flags_slowdown(ledger, tmp_path):
    engine, settings = ledger
    repo, shas = make_harness_repo(tmp_path, [BASE_MS])
    with WebhookReceiver(fail_first=1).running() as hook:
        repo_id = add_tracked_repo(engine, repo, notify=[hook.url])
        scheduler = NightlyScheduler(engine, settings)
        scheduler.start()
        try:
            # First check: the head becomes the measured head, no gate.
            drive_until(engine, settings, lambda: _repo(engine, repo_id).last_measured_sha == shas[0])
            assert _regates(engine, repo_id) == []
            neutral = commit_step_ms(repo, BASE_MS, "neutral: docs only")
            drive_until(engine, settings, lambda: _events(engine, repo_id, "pass"))
            assert _repo(engine, repo_id).last_measured_sha == neutral
            passed = _events(engine, repo_id, "pass")[0]
            assert passed.carries_over and (passed.control_sha, passed.candidate_sha) == (shas[0], neutral)
            assert abs(passed.delta_pct) < 0.5
            slow = commit_step_ms(repo, BASE_MS * 1.10, "injected slowdown +10%")
            drive_until(engine, settings, lambda: len(hook.bodies) >= 1, timeout_s=120)
        finally:
            scheduler.stop()
    regression = _events(engine, repo_id, "regression")[0]
    assert regression.alert and regression.delta_pct == pytest.approx(10.0, abs=0.3)
    assert _repo(engine, repo_id).last_measured_sha == neutral  # a regression does not advance
    gates = _regates(engine, repo_id)
    assert len(gates) == 2  # one re-gate per new head, no duplicates
    assert "flag:regression" in gates[1].tags and gates[1].status == "succeeded"
    body = hook.bodies[0]
    assert body["event"] == "regression" and body["verdict"] == "regression"
    assert body["gate_id"] == gates[1].id and body["repository_id"] == repo_id
    assert (body["control_sha"], body["candidate_sha"]) == (neutral, slow)
    assert body["branch"] == "main" and body["repo"] == str(repo)
    assert body["delta_pct"] == pytest.approx(10.0, abs=0.3) and body["drift_pct"] >= 0
    assert body["link"] == f"/ledger/gates/{gates[1].id}"
    with Session(engine) as session:  # the 500 was recorded, then the retry delivered
        attempts = list(session.scalars(select(WebhookAttempt).order_by(WebhookAttempt.id)))
        assert [a.status_code for a in attempts] == [500, 204]
        assert attempts[0].error.startswith("HTTP 500")
        drift = drift_of_repository(session=session, repo_id=repo_id)
    assert [p.verdict for p in drift.points] == ["pass", "regression"]
    assert drift.points[1].cumulative_delta_pct == pytest.approx(
        drift.points[0].delta_pct + drift.points[1].delta_pct)


def test_bisection_over_seven_commits_finds_the_guilty_one(ledger, tmp_path):
    engine, settings = ledger
    repo, _shas = make_harness_repo(tmp_path, [BASE_MS])
    repo_id = add_tracked_repo(engine, repo, bisect=True)
    assert regate_pass(engine, settings)[0].action == "baseline"
    new = [commit_step_ms(repo, BASE_MS * (1.2 if i >= 3 else 1.0), f"commit {i + 1}") for i in range(7)]
    guilty = new[3]
    first = regate_pass(engine, settings)[0]
    assert first.action == "submitted"

    def found():
        with Session(engine, expire_on_commit=False) as session:
            b = session.scalars(select(Bisection)).first()
            return b if b is not None and b.status != "running" else None

    bisection = drive_until(engine, settings, found, timeout_s=150,
                            step=lambda: regate_pass(engine, settings))
    assert bisection.status == "found", bisection.message
    assert bisection.first_bad_sha == guilty
    assert bisection.commits == new and bisection.num_gates <= 3
    steps = _regates(engine, repo_id, kind="bisect")
    assert len(steps) == bisection.num_gates
    assert {g.parent_gate_id for g in steps} == {first.gate_id}
    assert all(g.status == "succeeded" for g in steps)
    assert bisection.delta_pct == pytest.approx(20.0, abs=0.5)
    # The first bad commit's delta is measured against the last good commit (its parent).
    with Session(engine) as session:
        culprit_gate = session.get(Gate, bisection.first_bad_gate_id)
        assert culprit_gate.candidate_spec["source"]["sha"] == guilty
        assert culprit_gate.control_spec["source"]["sha"] == new[2]
    found_events = _events(engine, repo_id, "bisect_found")
    assert len(found_events) == 1 and found_events[0].candidate_sha == guilty
    # The result is shown by the API and on the repository page.
    page_settings = Settings(data_dir=settings.data_dir, gates={"enabled": False}, nightly={"enabled": False})
    with TestClient(create_app(page_settings)) as client:
        shown = client.get(f"/repos/{repo_id}").json()["bisections"][0]
        assert shown["first_bad_sha"] == guilty and shown["step_gate_ids"] == [g.id for g in steps]
        assert shown["delta_pct"] == pytest.approx(20.0, abs=0.5) and shown["drift_pct"] is not None
        page = client.get(f"/ledger/repos/{repo_id}").text
        assert f'title="{guilty}">{guilty[:12]}</code>' in page


def test_missing_verdict_is_alerted_retried_then_given_up(ledger, tmp_path):
    engine, settings = ledger
    repo, shas = make_harness_repo(tmp_path, [BASE_MS])
    with WebhookReceiver().running() as hook:
        repo_id = add_tracked_repo(engine, repo, notify=[hook.url])
        assert regate_pass(engine, settings)[0].action == "baseline"
        (repo / "step_ms.txt").write_text("not a number\n")  # the candidate's harness crashes
        subprocess.run(["git", "commit", "-qam", "broken harness input"], cwd=repo, check=True)
        broken = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                                text=True).stdout.strip()
        for attempt in (1, 2):
            result = regate_pass(engine, settings)[0]
            assert result.action == "submitted" and result.head_sha == broken
            drive_until(engine, settings, lambda n=attempt: len(_events(engine, repo_id, "no_verdict")) == n,
                        step=lambda: regate_pass(engine, settings, repo_ids=[]))
        assert regate_pass(engine, settings)[0].action == "gave_up"
        drive_until(engine, settings, lambda: len(hook.bodies) == 2,
                    step=lambda: regate_pass(engine, settings, repo_ids=[]))
    events = _events(engine, repo_id, "no_verdict")
    assert all(e.alert and e.verdict is None for e in events)
    assert "attempt 1" in events[0].message and "giving up" in events[1].message
    gates = _regates(engine, repo_id)
    assert len(gates) == 2 and all(g.status == "failed" and "flag:no-verdict" in g.tags for g in gates)
    assert _repo(engine, repo_id).last_measured_sha == shas[0]
    assert [b["event"] for b in hook.bodies] == ["no_verdict", "no_verdict"]
    assert hook.bodies[0]["verdict"] is None and hook.bodies[0]["candidate_sha"] == broken


def test_restart_neither_loses_nor_duplicates_a_scheduled_regate(ledger, tmp_path):
    engine, settings = ledger
    repo, shas = make_harness_repo(tmp_path, [BASE_MS])
    repo_id = add_tracked_repo(engine, repo)
    first = NightlyScheduler(engine, settings, holder="first")
    rival = NightlyScheduler(engine, settings, holder="rival")
    first.start()
    rival.start()
    try:
        drive_until(engine, settings, lambda: _repo(engine, repo_id).last_measured_sha == shas[0])
        assert [first.is_leader, rival.is_leader].count(True) == 1  # one scheduler for two workers
    finally:
        rival.stop()
        first.stop()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM apscheduler_jobs")).scalar() == 1
    # A commit lands while the service is down: the persisted job fires after the restart.
    head = commit_step_ms(repo, BASE_MS, "while down")
    engine2 = build_engine(settings.database_url)
    second = NightlyScheduler(engine2, settings, holder="second")
    second.start()
    try:
        drive_until(engine2, settings, lambda: _regates(engine2, repo_id), timeout_s=60)
    finally:
        second.stop()  # restarted again while the re-gate runs
    third = NightlyScheduler(engine2, settings, holder="third")
    third.start()
    try:
        drive_until(engine2, settings, lambda: _events(engine2, repo_id, "pass"), timeout_s=120)
        time.sleep(2.5)  # more scheduled checks fire: the head is measured, nothing new
    finally:
        third.stop()
    gates = _regates(engine2, repo_id)
    assert len(gates) == 1 and gates[0].candidate_spec["source"]["sha"] == head
    assert len(_events(engine2, repo_id, "pass")) == 1
    assert _repo(engine2, repo_id).last_measured_sha == head
    with engine2.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM apscheduler_jobs")).scalar() == 1
    with Session(engine2) as session:
        assert session.scalar(select(func.count(Gate.id))) == 1
    engine2.dispose()
