"""20 concurrent gates on the trays cluster, 10 followed by their own ``axbgate gate`` CLI
process and 10 by one ``axbgate serve``: Slurm is asked at most once per poll interval
per machine (the shared scheduler cache), with backoff while every job is pending.

The gates' jobs pend (``begin=now+3600``), the worst case for polling: nothing ends.
Scheduler calls (squeue, sacct, scontrol) are counted by wrappers first on PATH.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.db.migrate import upgrade
from orchestrator.db.models import Gate
from orchestrator.usecases import gates as use_cases
from tests.factories import harness_gate, submit
from tests.integration.trays import require_trays, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.trays, pytest.mark.postgres, pytest.mark.slow]

MEASURE_S = 60.0
PER_KIND = 10


def _wrappers(folder: Path, counts: Path) -> None:
    folder.mkdir()
    for tool in ("squeue", "sacct", "scontrol"):
        real = subprocess.run(["which", tool], capture_output=True, text=True, check=True).stdout.strip()
        path = folder / tool
        path.write_text(f'#!/bin/sh\necho "$(date +%s.%N) {tool}" >> "{counts}"\nexec {real} "$@"\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pending_gate():
    return harness_gate(executor="slurm", topology={
        "nodes": 2, "ntasks_per_node": 1, "time_limit_min": 5, "extra_slurm": {"begin": "now+3600"}})


def test_twenty_gates_cli_and_server_bounded_scheduler_calls(monkeypatch, tmp_path, postgres_url):
    require_trays(monkeypatch)
    upgrade(postgres_url)
    counts = tmp_path / "calls.txt"
    _wrappers(tmp_path / "bin", counts)
    env = {**os.environ, "AXBGATE_DATABASE__URL": postgres_url,
           "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "TMPDIR": str(tmp_path)}  # a scheduler cache of this test's own
    monkeypatch.setenv("PATH", env["PATH"])
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_pending_gate().model_dump(mode="json", exclude_none=True)))
    engine = create_engine(postgres_url)
    port = _free_port()
    axbgate = str(Path(sys.executable).parent / "axbgate")
    server = subprocess.Popen([axbgate, "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.log", "wb"))
    clis: list[subprocess.Popen] = []
    server_ids: list[int] = []
    try:
        server_ids += [submit(engine, _pending_gate()) for _ in range(PER_KIND)]
        for _ in range(PER_KIND):
            clis.append(subprocess.Popen([axbgate, "gate", "--spec", str(spec)], env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))

        def submitted():
            with Session(engine) as session:
                rows = session.scalars(select(Gate)).all()
                return len(rows) == 2 * PER_KIND and all(g.job_ref for g in rows) and rows

        wait_until("20 gates with a Slurm job", submitted, timeout_s=180, every=1.0)
        t0 = time.time()
        time.sleep(MEASURE_S)
        t1 = time.time()
        calls = [line.split() for line in counts.read_text().splitlines()]
        window = [c for c in calls if t0 <= float(c[0]) < t1]
        per_tool = {tool: sum(1 for c in window if c[1] == tool) for tool in ("squeue", "sacct", "scontrol")}
        rate = len(window) / (t1 - t0)
        print(f"\n[trays] 20 pending gates (10 CLI processes + 1 server), {t1 - t0:.0f} s: "
              f"{len(window)} scheduler calls = {rate * 60:.1f}/min ({per_tool}); "
              f"{len(calls)} calls since the first submission")
        assert rate <= 2.0
        assert len(window) <= MEASURE_S / 2 + 2  # one squeue per >= 2 s at most, and backoff
        with Session(engine) as session:
            gate = session.get(Gate, server_ids[0])
            assert gate.status == "submitted"
            assert gate.status_reason == "pending in Slurm: waiting for its requested start time (BeginTime)"
    finally:
        for proc in clis:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        with Session(engine) as session:
            for gate in session.scalars(select(Gate)).all():  # the CLIs cancel their own
                if gate.id in server_ids and gate.status not in ("succeeded", "failed", "cancelled"):
                    use_cases.cancel_gate(session=session, gate_id=gate.id, reason="test over")
            session.commit()

        def all_cancelled():
            with Session(engine) as session:
                jobs = [g.job_ref for g in session.scalars(select(Gate)).all() if g.job_ref]
            out = subprocess.run(["squeue", "-h", "-t", "PENDING,RUNNING", "-o", "%i"],
                                 capture_output=True, text=True).stdout.split()
            return not set(jobs) & set(out)

        try:
            wait_until("every gate's job gone from the queue", all_cancelled, timeout_s=90, every=1.0)
        finally:
            for proc in clis:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
            engine.dispose()
    errors = [p.stderr.read().decode(errors="replace") for p in clis]
    assert [p.returncode for p in clis] == [1] * PER_KIND, errors  # 1: the gate did not succeed
    assert not any("axbgate: error" in e for e in errors), errors
    engine = create_engine(postgres_url)
    with Session(engine) as session:
        cli_gates = [g for g in session.scalars(select(Gate)).all() if g.id not in server_ids]
        assert {(g.status, g.status_reason) for g in cli_gates} == {
            ("cancelled", "cancelled from the CLI (SIGTERM)")}
    engine.dispose()
