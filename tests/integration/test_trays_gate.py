"""Whole gates on the REAL two-node ``trays`` cluster (scripts/slurm_trays.sh): two slurmd
nodes, each in its own network/UTS/mount namespace, whose hosts files map their own
hostname to 127.0.1.1 (the Debian default that breaks Gloo without the preamble)."""

from __future__ import annotations

import sys
import time

import pytest
from sqlalchemy.orm import Session

from orchestrator.db.models import Allocation, Gate
from orchestrator.executors.plan import GatePaths, read_json
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.usecases import gates as use_cases
from tests.factories import FIXTURES, harness_gate, open_ledger, submit
from tests.integration.trays import ADDRS, IFNAME, NODES, require_trays

PROBE = FIXTURES / "launch_probe.py"

pytestmark = [pytest.mark.slurm, pytest.mark.trays, pytest.mark.slow]


@pytest.fixture
def ledger(monkeypatch):
    require_trays(monkeypatch)
    engine, settings = open_ledger()
    yield engine, settings
    engine.dispose()


def wait_gate(engine, settings, gate_id, timeout_s=300.0, until=("succeeded", "failed", "cancelled")):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine, expire_on_commit=False) as session:
            gate = session.get(Gate, gate_id)
            if gate.status in until:
                return gate
        time.sleep(1.0)
    raise AssertionError(f"gate {gate_id} still {gate.status} after {timeout_s} s")


def tiny_two_node(**extra):
    data = {
        "title": "trays tiny",
        "workload": {"recipe": "tiny"},
        "candidate": {"env": {"OMP_NUM_THREADS": "1"}},
        "warmup_steps": 1, "measured_steps": 3,
        "executor": "slurm",
        "topology": {"nodes": 2, "ntasks_per_node": 1, "time_limit_min": 10},
        "run_timeout_s": 180,
        "policy": "drift",
    }
    data.update(extra)
    return use_cases.GateCreate.model_validate(data)


def test_two_node_gate_health_then_axb(ledger):
    engine, settings = ledger
    gate_id = submit(engine, tiny_two_node())
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = wait_gate(engine, settings, gate_id, timeout_s=400)
    assert gate.status == "succeeded", gate.status_reason
    status = read_json(GatePaths.of(settings.data_dir, gate_id).status)
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        runs = sorted(gate.runs, key=lambda r: r.order)
        assert [r.role for r in runs] == ["A", "X", "B"]
        assert all(r.status == "succeeded" and r.world_size == 2 for r in runs)
        assert all(r.provenance.get("hostnames") == list(NODES) for r in runs)
        alloc = session.get(Allocation, gate.allocation_id)
        assert alloc.hostnames == list(NODES)
        assert alloc.health_verdict in ("healthy", "degraded")
    pre = status["preamble"]
    assert {p["interface"] for p in pre} == {IFNAME}
    assert {p["master_addr"] for p in pre} == {ADDRS[0]}
    ports = [p["master_port"] for p in pre]
    assert len(set(ports)) == len(ports) >= 4  # health + 3 runs, a fresh port each


@pytest.mark.parametrize("launch, copies", [
    ("per_node", {("tray1", "0"), ("tray2", "1")}),
    ("per_rank", {("tray1", "0"), ("tray1", "1"), ("tray2", "2"), ("tray2", "3")}),
    ("batch", {("tray1", "0")}),
])
def test_launch_modes_on_two_nodes(ledger, launch, copies):
    """A user command starts once per node, once per rank, or once in the batch step."""
    engine, settings = ledger
    gate_in = harness_gate(executor="slurm", workload={
        "command": [sys.executable, str(PROBE), "{out_dir}", "{run_index}", "{warmup_steps}",
                    "{measured_steps}"], "launch": launch},
        topology={"nodes": 2, "ntasks_per_node": 2, "time_limit_min": 5})
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = wait_gate(engine, settings, gate_id, timeout_s=180)
    assert gate.status == "succeeded", gate.status_reason
    paths = GatePaths.of(settings.data_dir, gate_id)
    for order, role in enumerate(("A", "X", "B")):  # {out_dir} is each run's own folder
        found = {tuple(p.name.split("-")[2:4]) for p in paths.run_out(order, role).glob(f"probe-{order}-*")}
        assert found == copies, (order, found)
