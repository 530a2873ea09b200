"""The nightly re-gate flow through the REAL Slurm cluster (scripts/slurm_up.sh).

A tracked harness repository gets a neutral commit and then a slowdown; the scheduler
(time-compressed trigger) re-gates the head through `sbatch`, flags the regression,
bisects the two commits (one more Slurm gate) and POSTs the result to a webhook
receiver. Fails in CI (``CI`` set) when Slurm is down, skips elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.migrate import upgrade
from orchestrator.db.models import Bisection, Gate, TrackedRepository
from orchestrator.db.session import build_engine
from orchestrator.runtime.nightly import NightlyScheduler
from orchestrator.settings import Settings
from tests.factories import make_harness_repo
from tests.regate_support import WebhookReceiver, add_tracked_repo, commit_step_ms, drive_until

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _slurm_up() -> bool:
    if shutil.which("sbatch") is None:
        return False
    out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    return "UP" in out.stdout


def test_regate_regression_and_bisection_through_slurm(tmp_path):
    if not _slurm_up():
        if os.environ.get("CI"):
            pytest.fail("Slurm is not up in CI: scripts/slurm_up.sh should have started it")
        pytest.skip("Slurm is not up (run scripts/slurm_up.sh as root)")
    settings = Settings(
        data_dir=tmp_path / "data", gates={"enabled": False},
        executor={"slurm_partition": "debug"},
        nightly={"interval_seconds": 1.0, "loop_seconds": 0.5, "lease_seconds": 5.0},
        security={"webhook_allow_private": True},  # the receiver listens on 127.0.0.1
    )
    upgrade(settings.database_url)
    engine = build_engine(settings.database_url)
    repo, shas = make_harness_repo(tmp_path, [50.0])
    with WebhookReceiver().running() as hook:
        repo_id = add_tracked_repo(engine, repo, executor="slurm", notify=[hook.url], bisect=True,
                                   topology={"ntasks_per_node": 1, "time_limit_min": 5})
        scheduler = NightlyScheduler(engine, settings)
        scheduler.start()
        try:
            def measured():
                with Session(engine) as session:
                    return session.get(TrackedRepository, repo_id).last_measured_sha

            drive_until(engine, settings, lambda: measured() == shas[0], timeout_s=30)
            neutral = commit_step_ms(repo, 50.0, "neutral")
            slow = commit_step_ms(repo, 60.0, "slowdown +20%")

            def done():
                return [b for b in hook.bodies if b["event"] == "bisect_found"]

            drive_until(engine, settings, done, timeout_s=420)
        finally:
            scheduler.stop()
    with Session(engine) as session:
        gates = list(session.scalars(select(Gate).where(Gate.repository_id == repo_id).order_by(Gate.id)))
        assert [(g.kind, g.executor, g.status) for g in gates] == [
            ("regate", "slurm", "succeeded"), ("bisect", "slurm", "succeeded")]
        assert all(g.job_ref and g.job_ref.isdigit() for g in gates)  # real Slurm job ids
        bisection = session.scalars(select(Bisection)).one()
        assert bisection.status == "found" and bisection.first_bad_sha == slow
        assert bisection.commits == [neutral, slow] and bisection.num_gates == 1
        assert gates[1].candidate_spec["source"]["sha"] == neutral
    regression = next(b for b in hook.bodies if b["event"] == "regression")
    assert regression["gate_id"] == gates[0].id and regression["candidate_sha"] == slow
    assert regression["delta_pct"] == pytest.approx(20.0, abs=1.0)
    assert done()[0]["bisection"]["first_bad_sha"] == slow
    engine.dispose()
