"""Failures on the REAL two-node ``trays`` cluster: what the preamble prevents, a busy
rendezvous port, a tray whose processes die mid-run, SIGTERM to the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from health.preamble import derive_master_port
from orchestrator.db.models import Allocation, Gate
from orchestrator.executors.plan import GatePaths, read_json
from orchestrator.runtime.gates import dispatch_pass
from orchestrator.usecases import gates as use_cases
from tests.factories import HARNESS, harness_gate, open_ledger, submit
from tests.integration.test_trays_gate import tiny_two_node, wait_gate
from tests.integration.trays import IFNAME, NETNS, procs_in_netns, require_trays, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.trays, pytest.mark.slow]


@pytest.fixture
def ledger(monkeypatch):
    require_trays(monkeypatch)
    engine, settings = open_ledger()
    yield engine, settings
    engine.dispose()


def _sacct_state(job_id: str) -> str:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", job_id],
                         capture_output=True, text=True, check=False).stdout.split("\n")
    return out[0].strip() if out else ""


def _leftovers(*needles: str) -> dict[str, list[int]]:
    return {ns: pids for ns in NETNS for n in needles if (pids := procs_in_netns(ns, n))}


def test_without_the_preamble_gloo_fails_fast_on_127_0_1_1(ledger):
    """Both trays map their own hostname to 127.0.1.1: gloo without a socket interface
    listens there and the full mesh cannot connect. The gate fails in seconds."""
    engine, settings = ledger
    gate_in = tiny_two_node(health={"enabled": False})
    gate_in.topology.preamble = False
    gate_id = submit(engine, gate_in)
    t0 = time.monotonic()
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = wait_gate(engine, settings, gate_id, timeout_s=240)
    elapsed = time.monotonic() - t0
    assert gate.status == "failed"
    assert gate.status_reason.startswith("run 0 (A) failed:"), gate.status_reason
    assert "gloo could not connect its ranks" in gate.status_reason
    log = GatePaths.of(settings.data_dir, gate_id).run_log(0, "A").read_text()
    assert "connectFullMesh failed" in log and "Connection refused, remote=[127.0.1.1]" in log
    status = read_json(GatePaths.of(settings.data_dir, gate_id).status)
    assert status["preamble"][0]["interface"] is None
    assert status["preamble"][0]["master_addr"] == "tray1"
    print(f"\n[trays] no preamble: gate failed after {elapsed:.1f} s ({gate.status_reason[:120]})")
    assert elapsed < 90  # srun --kill-on-bad-exit ends the hung peer (~100 s otherwise)


def _next_job_id() -> str:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return next(line.split("=")[1].strip() for line in out.splitlines() if line.startswith("NEXT_JOB_ID"))


def test_busy_master_port_is_skipped_on_node_0(ledger):
    """A listener on tray 1 holds the port derived for run A: the driver skips it."""
    engine, settings = ledger
    job_id = _next_job_id()
    held = derive_master_port(job_id, 1)
    holder = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{NETNS[0]}", sys.executable, "-c",
         "import socket,sys,time; s=socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); "
         "s.listen(); print('held', flush=True); time.sleep(600)", str(held)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        gate_in = harness_gate(executor="slurm", topology={"nodes": 2, "ntasks_per_node": 1,
                                                           "time_limit_min": 5})
        gate_in.workload.launch = "batch"  # one harness prints the records
        gate_id = submit(engine, gate_in)
        dispatch_pass(engine, settings, gate_ids=[gate_id])
        gate = wait_gate(engine, settings, gate_id, timeout_s=180)
    finally:
        holder.kill()
        holder.wait()
    assert gate.job_ref == job_id
    assert gate.status == "succeeded", gate.status_reason
    pre = read_json(GatePaths.of(settings.data_dir, gate_id).status)["preamble"]
    assert pre[0]["busy_ports"] == [held] and pre[0]["master_port"] == derive_master_port(job_id, 2)
    assert held not in [p["master_port"] for p in pre]


def test_killing_tray2_mid_run_fails_the_gate_and_leaves_nothing(ledger):
    engine, settings = ledger
    gate_in = tiny_two_node(health={"enabled": False}, measured_steps=20000, run_timeout_s=300)
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    log = GatePaths.of(settings.data_dir, gate_id).run_log(0, "A")
    # rank 0 prints its provenance once both ranks joined the process group (steps follow)
    wait_until("run A's process group", lambda: log.exists() and "AXBGATE_PROVENANCE" in log.read_text(),
               timeout_s=180)
    time.sleep(1.0)
    victims = wait_until("trainer processes on tray2", lambda: procs_in_netns(NETNS[1], "trainer"),
                         timeout_s=10)
    t0 = time.monotonic()
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    gate = wait_gate(engine, settings, gate_id, timeout_s=120)
    elapsed = time.monotonic() - t0
    assert gate.status == "failed"
    assert gate.status_reason.startswith("run 0 (A) failed:"), gate.status_reason
    assert "on node tray2: Killed" in gate.status_reason
    print(f"\n[trays] tray2 killed: gate failed {elapsed:.1f} s later: {gate.status_reason[:160]}")
    wait_until("nothing left on either tray", lambda: not _leftovers("trainer", "axbgate"), timeout_s=60)
    assert wait_until("job end in sacct", lambda: _sacct_state(gate.job_ref) in ("COMPLETED", "FAILED"),
                      timeout_s=60)


def test_sigterm_to_the_cli_cancels_the_gate(ledger, tmp_path):
    engine, settings = ledger
    spec = harness_gate(executor="slurm", topology={"nodes": 2, "ntasks_per_node": 1, "time_limit_min": 5},
                        run_timeout_s=600).model_dump(mode="json", exclude_none=True)
    spec["control"]["env"]["HARNESS_FAULT"] = "hang"
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    argv = [str(Path(sys.executable).parent / "axbgate"), "gate", "--spec", str(tmp_path / "spec.json")]
    proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until("the harness running on both trays",
                   lambda: all(procs_in_netns(ns, str(HARNESS)) for ns in NETNS), timeout_s=120)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    with Session(engine) as session:
        gate = session.get(Gate, 1)
        assert gate.status == "cancelled", err.decode()[-2000:]
        assert gate.status_reason == "cancelled from the CLI (SIGTERM)"
        job = gate.job_ref
    assert wait_until("CANCELLED in sacct", lambda: _sacct_state(job).startswith("CANCELLED"), timeout_s=60)
    wait_until("nothing left on either tray", lambda: not _leftovers(str(HARNESS), "axbgate"), timeout_s=60)
    status = read_json(GatePaths.of(settings.data_dir, 1).status)
    assert status["state"] == "cancelled"


def test_slow_tray_fails_the_health_gate_naming_tray2(ledger):
    """tbf caps tray 2's sending side at 50 Mbit/s (this kernel has no netem): the links
    check names tray2 and no run starts."""
    engine, settings = ledger
    tc = ["nsenter", f"--net=/run/netns/{NETNS[1]}", "tc", "qdisc"]
    subprocess.run([*tc, "del", "dev", IFNAME, "root"], capture_output=True, check=False)
    subprocess.run([*tc, "add", "dev", IFNAME, "root", "tbf", "rate", "50mbit", "burst", "32kbit",
                    "latency", "400ms"], check=True)
    try:
        gate_id = submit(engine, tiny_two_node())
        dispatch_pass(engine, settings, gate_ids=[gate_id])
        gate = wait_gate(engine, settings, gate_id, timeout_s=240)
    finally:
        subprocess.run([*tc, "del", "dev", IFNAME, "root"], check=True)
    assert gate.status == "failed"
    assert "links=FAIL" in gate.status_reason, gate.status_reason
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        alloc = session.get(Allocation, gate.allocation_id)
        links = [c for c in alloc.health_checks if c.name == "links"]
        assert [(c.status, c.host) for c in links] == [("FAIL", "tray2")]
        assert links[0].message.startswith("slow tray tray2 (sending side): tray2->tray1")
        assert {r.status for r in gate.runs} == {"skipped"}
    paths = GatePaths.of(settings.data_dir, gate_id)
    assert not list(paths.runs_dir.glob("*.started.json")) and not list(paths.runs_dir.glob("*.log"))
    print(f"\n[trays] slow tray2: {links[0].message} -- {links[0].measured}")


def test_scancel_outside_axbgate_cancels_the_gate_naming_who(ledger):
    """An operator's ``scancel`` (here root, uid 0) is a cancel, with Slurm's own words."""
    engine, settings = ledger
    gate_in = harness_gate(executor="slurm", topology={"nodes": 2, "ntasks_per_node": 1,
                                                       "time_limit_min": 5}, run_timeout_s=600)
    gate_in.control.env["HARNESS_FAULT"] = "hang"
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = wait_gate(engine, settings, gate_id, until=("running",), timeout_s=120)
    wait_until("the harness on both trays", lambda: all(procs_in_netns(ns, str(HARNESS)) for ns in NETNS),
               timeout_s=60)
    subprocess.run(["scancel", gate.job_ref], check=True)
    gate = wait_gate(engine, settings, gate_id, timeout_s=120)
    assert gate.status == "cancelled"
    assert gate.status_reason.startswith(
        f"allocation job {gate.job_ref} was cancelled by root (uid 0: an administrator or Slurm "
        "itself) (Slurm CANCELLED) (driver: allocation received SIGTERM)"), gate.status_reason
    wait_until("nothing left on either tray", lambda: not _leftovers(str(HARNESS)), timeout_s=60)


def test_preempted_gate_is_resubmitted_once_as_a_new_gate(ledger):
    """A job of partition trays-urgent (higher PriorityTier, PreemptMode=CANCEL) preempts
    the gate's allocation: Slurm says PREEMPTED, the gate fails saying so, and one copy is
    queued as a new gate with fresh runs."""
    engine, settings = ledger
    gate_in = harness_gate(executor="slurm", topology={"nodes": 2, "ntasks_per_node": 1, "time_limit_min": 5,
                                                       "resubmit_on_preemption": True}, run_timeout_s=600)
    gate_in.control.env["HARNESS_FAULT"] = "hang"
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    wait_gate(engine, settings, gate_id, until=("running",), timeout_s=120)
    urgent = subprocess.run(["sbatch", "--parsable", "-p", "trays-urgent", "-N2", "-n4", "-o", "/dev/null", "--wrap", "sleep 1"],
                            capture_output=True, text=True, check=True).stdout.strip()
    gate = wait_gate(engine, settings, gate_id, timeout_s=120)
    assert gate.status == "failed"
    assert f"allocation job {gate.job_ref} was preempted by a higher-priority job (Slurm PREEMPTED)" \
        in gate.status_reason, gate.status_reason
    assert gate.status_reason.endswith("; resubmitted once as gate 2 (its own allocation and verdict: "
                                       "this gate's runs are not judged with it)")
    with Session(engine) as session:
        first, second = session.get(Gate, gate_id), session.get(Gate, 2)
        assert second.status == "queued" and second.job_ref is None
        assert second.topology_request["resubmit_on_preemption"] is False
        assert second.control_spec == first.control_spec and second.run_pattern == first.run_pattern
        assert [(r.order, r.role, r.status) for r in sorted(second.runs, key=lambda r: r.order)] == [
            (0, "A", "pending"), (1, "X", "pending"), (2, "B", "pending")]
        assert not {r.id for r in first.runs} & {r.id for r in second.runs}
        assert not second.verdicts and first.allocation_id is not None
        use_cases.cancel_gate(session=session, gate_id=2, reason="test over")
        session.commit()
    assert wait_until("the urgent job to end", lambda: _sacct_state(urgent) == "COMPLETED", timeout_s=60)
