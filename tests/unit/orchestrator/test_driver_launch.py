"""Launch modes of user commands, MASTER_PORT choice and port-collision detection."""

from __future__ import annotations

import socket

import pytest

from health.preamble import PORT_RANGE, derive_master_port
from orchestrator.domain.gate_spec import WorkloadSpec
from orchestrator.executors.driver.launch import choose_port, command_argv, port_collision, port_in_use

ARGV = ["harness", "2", "5"]
M = ("10.0.0.1", "23456")


def test_launch_modes_under_slurm():
    kw = dict(under_slurm=True, nodes=2, ranks_per_node=3, python="py", master=M)
    assert command_argv("per_node", ARGV, **kw)[:3] == ["srun", "--ntasks=2", "--ntasks-per-node=1"]
    assert command_argv("per_rank", ARGV, **kw)[:3] == ["srun", "--ntasks=6", "--ntasks-per-node=3"]
    assert command_argv("per_node", ARGV, **kw)[-3:] == ARGV
    assert "--kill-on-bad-exit=1" in command_argv("per_rank", ARGV, **kw)
    assert command_argv("batch", ARGV, **kw) == ARGV


def test_launch_modes_locally():
    kw = dict(under_slurm=False, nodes=1, ranks_per_node=2, python="py", master=M)
    assert command_argv("per_node", ARGV, **kw) == ARGV
    assert command_argv("batch", ARGV, **kw) == ARGV
    assert command_argv("per_rank", ARGV, **kw) == [
        "py", "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2", "--master_addr",
        "10.0.0.1", "--master_port", "23456", "--no-python", *ARGV]
    with pytest.raises(ValueError, match="workload.launch must be one of per_node, per_rank, batch"):
        command_argv("per_gpu", ARGV, **kw)


def test_workload_launch_default_and_validation():
    assert WorkloadSpec(command=["x"]).launch == "per_node"
    assert WorkloadSpec(command=["x", "{nnodes}", "{nproc_per_node}"], launch="batch").launch == "batch"
    with pytest.raises(ValueError, match="launch"):
        WorkloadSpec(command=["x"], launch="everywhere")


def test_ports_are_below_the_ephemeral_range():
    ports = [derive_master_port("job-1", i) for i in range(2000)]
    assert min(ports) >= 20000 and max(ports) < 32768 == PORT_RANGE[1]


def test_choose_port_skips_busy_ports_and_records_them():
    busy = {derive_master_port("j", 3), derive_master_port("j", 4)}
    choice = choose_port("j", 3, "10.0.0.1", derive=derive_master_port, in_use=lambda _a, p: p in busy)
    assert choice.index == 5 and choice.port == derive_master_port("j", 5)
    assert choice.busy == [derive_master_port("j", 3), derive_master_port("j", 4)]


def test_port_in_use_sees_a_listener_on_any_local_address():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        # checking another address alone would miss it; the wildcard bind does not
        assert port_in_use("127.0.0.2", port)
    assert not port_in_use("127.0.0.1", port)


def test_port_collision_read_from_the_log_tail(tmp_path):
    log = tmp_path / "00-A.log"
    log.write_text("x\n" * 100 + "RuntimeError: The server socket has failed to listen on any "
                   "local network address. port: 23456, useIpv6: 0, code: -98, name: EADDRINUSE, "
                   "message: address already in use\n")
    assert port_collision(log)
    log.write_text("Traceback ... ValueError\n")
    assert not port_collision(log)
    assert not port_collision(tmp_path / "missing.log")


def test_a_requeued_job_never_runs_the_gate_again(tmp_path):
    """A job Slurm requeued after its first allocation started the gate fails it instead of
    mixing runs of two allocations in one verdict."""
    from orchestrator.executors.driver.gate import run_gate
    from orchestrator.executors.plan import GatePlan, read_json, write_json_atomic

    plan = GatePlan(gate_id=1, gate_dir=str(tmp_path / "g"), executor="slurm", roles=["A", "X", "B"],
                    sides={"control": {}, "candidate": {}}, workload={"command": ["true"]}, nodes=2,
                    ranks_per_node=1, gpus_per_node=0, num_warmup_steps=1, num_measured_steps=1,
                    health={"enabled": False}, run_timeout_s=10, max_extend=0, policy="drift",
                    policy_params={}, kind="candidate")
    plan.paths.root.mkdir(parents=True)
    path = plan.save()
    write_json_atomic(plan.paths.status, {"state": "running", "scheduler_job_id": "41",
                                          "hostnames": ["tray1", "tray2"], "timeline": []})
    out = run_gate(str(path))
    assert out["state"] == "failed"
    assert out["reason"].startswith("job was requeued after allocation 41 on tray1,tray2 had started")
    assert read_json(plan.paths.status)["state"] == "failed"
    assert not plan.paths.runs_dir.exists() or not list(plan.paths.runs_dir.iterdir())
