"""Slurm end states -> gate status and plain reason; pending reasons; the scheduler cache."""

from __future__ import annotations

import datetime as dt
import types

import pytest

from orchestrator.executors.base import JobState
from orchestrator.executors.plan import GatePaths
from orchestrator.executors.scheduler_cache import SchedulerCache
from orchestrator.executors.slurm_states import (
    SlurmJobInfo,
    end_reason,
    external_gate_status,
    parse_sacct,
    parse_squeue_states,
    pending_text,
)


@pytest.mark.parametrize("state, status, words", [
    ("COMPLETED", "failed", "ended normally (Slurm COMPLETED)"),
    ("FAILED", "failed", "batch script exited non-zero (Slurm FAILED), exit code 1:0"),
    ("CANCELLED by 0", "cancelled", "cancelled by root (uid 0"),
    ("CANCELLED by 65534", "cancelled", "cancelled by user nobody (uid 65534)"),
    ("CANCELLED by 4242", "cancelled", "cancelled by uid 4242"),
    ("CANCELLED", "cancelled", "cancelled by someone outside axbgate (scancel)"),
    ("CANCELLED+", "cancelled", "cancelled by someone outside axbgate"),
    ("TIMEOUT", "failed", "reached its time limit (Slurm TIMEOUT)"),
    ("OUT_OF_MEMORY", "failed", "ran out of memory (Slurm OUT_OF_MEMORY)"),
    ("NODE_FAIL", "failed", "a node of the allocation failed (Slurm NODE_FAIL)"),
    ("PREEMPTED", "failed", "preempted by a higher-priority job (Slurm PREEMPTED)"),
    ("REQUEUED", "failed", "was requeued by Slurm (REQUEUED)"),
    ("BOOT_FAIL", "failed", "a node failed to boot (Slurm BOOT_FAIL)"),
    ("DEADLINE", "failed", "missed its deadline (Slurm DEADLINE)"),
])
def test_end_state_reason_and_gate_status(state, status, words):
    info = SlurmJobInfo(state, None, "1:0" if state == "FAILED" else "0:0")
    reason = end_reason("77", info)
    assert reason.startswith("allocation job 77 ")
    assert words in reason
    assert external_gate_status(info) == status


def test_terminal_states_of_jobstate():
    assert JobState("CANCELLED by 0", True).terminal
    assert JobState("CANCELLED+", True).terminal
    assert JobState("TIMEOUT", True).terminal
    assert not JobState("REQUEUED", False).terminal  # it pends again
    assert not JobState("PENDING", False, reason="Resources").terminal


def test_pending_reasons():
    assert pending_text("Resources") == "pending in Slurm: waiting for nodes to become free (Resources)"
    assert pending_text("BeginTime") == "pending in Slurm: waiting for its requested start time (BeginTime)"
    assert pending_text("SomethingNew") == "pending in Slurm: SomethingNew (SomethingNew)"
    assert pending_text(None) == "pending in Slurm"


def test_parsers():
    q = parse_squeue_states("3|PENDING|BeginTime\n4|RUNNING|None\n\n")
    assert q == {"3": SlurmJobInfo("PENDING", "BeginTime"), "4": SlurmJobInfo("RUNNING", None)}
    a = parse_sacct("3|CANCELLED by 0|0:0|None\n5|TIMEOUT|0:15|TimeLimit\n")
    assert a["3"] == SlurmJobInfo("CANCELLED by 0", None, "0:0")
    assert a["5"] == SlurmJobInfo("TIMEOUT", "TimeLimit", "0:15")


class _FakeSlurm:
    def __init__(self, states):
        self.states, self.queries = states, []

    def __call__(self, ids):
        self.queries.append(list(ids))
        return {j: SlurmJobInfo(*self.states[j]) for j in ids if j in self.states}, 1


def test_cache_one_query_per_interval_for_many_pollers(tmp_path):
    slurm = _FakeSlurm({str(i): ("RUNNING", None) for i in range(20)})
    caches = [SchedulerCache(tmp_path / "c.json", query=slurm, min_interval_s=2.0) for _ in range(20)]
    t0 = 1000.0
    for tick in range(60):  # 20 pollers, each polling its own job once a second, 60 s
        for i, cache in enumerate(caches):
            got = cache.states([str(i)], now=t0 + tick + i * 0.01)
            # a newcomer waits for the next query (at most min_interval_s): absent until then
            if tick >= 2:
                assert got[str(i)].state == "RUNNING"
    # the first queries are for newcomers (at most one per min_interval), then one per 2 s
    assert len(slurm.queries) <= 31
    assert max(len(q) for q in slurm.queries) == 20  # one query covers every poller's job


def test_cache_backs_off_while_pending_and_stops_asking_about_ended_jobs(tmp_path):
    slurm = _FakeSlurm({"1": ("PENDING", "Priority")})
    cache = SchedulerCache(tmp_path / "c.json", query=slurm, min_interval_s=2.0, max_interval_s=16.0)
    times = []
    for second in range(120):
        before = len(slurm.queries)
        info = cache.states(["1"], now=5000.0 + second)["1"]
        if len(slurm.queries) > before:
            times.append(second)
    assert info.reason == "Priority"
    assert times[:6] == [0, 2, 6, 14, 30, 46]  # 2, 4, 8, 16, 16 s apart
    slurm.states["1"] = ("CANCELLED by 0", None, "0:0")
    cache.states(["1"], now=6000.0)
    n = len(slurm.queries)
    for second in range(30):
        assert cache.states(["1"], now=6001.0 + second)["1"].state == "CANCELLED by 0"
    assert len(slurm.queries) == n  # an ended job is never asked about again


def _gate(**kw):
    base = dict(id=1, status="submitted", status_reason=None, job_ref="42", job_folder="",
                topology_request={}, submitted_at=dt.datetime.now(dt.timezone.utc), runs=[],
                ended_at=None, started_at=None)
    base.update(kw)
    return type("Gate", (types.SimpleNamespace,), {})(**base)  # transition() keys on the name


def test_ingest_shows_pending_reason_and_maps_end_states(tmp_path):
    from orchestrator.usecases.progress import _before_driver

    gate = _gate()
    now = dt.datetime.now(dt.timezone.utc)
    _before_driver(gate, JobState("PENDING", False, reason="Resources"), None, now,
                   GatePaths.of(tmp_path, 1))
    assert gate.status == "submitted"
    assert gate.status_reason == "pending in Slurm: waiting for nodes to become free (Resources)"


def test_queue_deadline_wins_over_the_pending_reason(tmp_path):
    from orchestrator.usecases.progress import _before_driver

    gate = _gate(topology_request={"queue_deadline_s": 5},
                 submitted_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=10))
    _before_driver(gate, JobState("PENDING", False, reason="BeginTime"), None,
                   dt.datetime.now(dt.timezone.utc), GatePaths.of(tmp_path, 1))
    assert gate.status == "failed"
    assert gate.status_reason == "allocation did not start within the queue deadline of 5 s"
