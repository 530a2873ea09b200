"""MASTER_PORT: a run that dies on EADDRINUSE is retried once on the next port (local
executor; the two-node port check is in test_trays_faults.py)."""

from __future__ import annotations


import pytest

from orchestrator.executors.plan import GatePaths, read_json
from orchestrator.runtime.gates import dispatch_pass
from tests.factories import harness_gate, open_ledger, submit, wait_for_gate

pytestmark = [pytest.mark.slow]


def _wait(engine, settings, gate_id: int, timeout_s: float = 120.0):
    return wait_for_gate(engine, settings, gate_id, timeout_s=timeout_s, dispatch=False)


def test_eaddrinuse_is_retried_once_on_the_next_port(tmp_path):
    engine, settings = open_ledger()
    gate_in = harness_gate()
    gate_in.control.env["HARNESS_FAULT"] = "eaddrinuse-once"
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    paths = GatePaths.of(settings.data_dir, gate_id)
    status = read_json(paths.status)
    retries = [t for t in status["timeline"] if t["phase"] == "port_retry"]
    # Each run works in its own folder, so each control (A and B) collides once.
    assert [r["order"] for r in retries] == [0, 2] and all(r["retry_error"] is None for r in retries)
    for retry, (order, role) in zip(retries, [(0, "A"), (2, "B")]):
        first = retry["port"]
        assert (paths.run_out(order, role) / "eaddrinuse.done").read_text() == str(first)
        assert retry["retry_port"] != first and 20000 <= retry["retry_port"] < 32768
        assert "Address already in use" in paths.run_log(order, role).with_suffix(".attempt1.log").read_text()
    ports = [p["master_port"] for p in status["preamble"]]
    assert len(set(ports)) == len(ports) == 5  # A, its retry, X, B, its retry


def test_a_second_collision_fails_the_run_naming_it(tmp_path):
    engine, settings = open_ledger()
    gate_in = harness_gate()
    gate_in.control.env["HARNESS_FAULT"] = "eaddrinuse"
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id)
    assert gate.status == "failed"
    assert "run 0 (A) failed: port collision: MASTER_PORT" in gate.status_reason
    assert "on the retry" in gate.status_reason
    status = read_json(GatePaths.of(settings.data_dir, gate_id).status)
    assert [t["phase"] for t in status["timeline"]].count("port_retry") == 1
