"""The shared deployment runs for real: docker-compose.yml on a private Docker daemon.

Images build FROM a Debian bookworm base made with debootstrap (no registry is reachable
here; users build FROM the official python/postgres images with the same Dockerfiles), the
stack comes up (db -> one-shot migrate -> api), and everything after that goes over HTTP
from the host, as a user would: a token made with the CLI inside the api container, a gate
submitted through REST that runs on the HOST's Slurm cluster (scripts/slurm_up.sh) through
the mounted slurm.conf and munge socket as the mapped account (`nobody`), its verdict read
from the Postgres container with psql, the ledger pages, then the stack torn down and
brought up again with the gate still there (the pgdata volume), migrations not re-applied.
The fixture removes the daemon, its containers, networks, volumes and data-root even when
a step fails. Phase timings (cold and warm) are printed in the run's summary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from orchestrator.db.migrate import head_revision
from tests.compose_stack import PREFIX, ROOT, ComposeStack

pytestmark = [pytest.mark.docker, pytest.mark.slurm, pytest.mark.slow]


def _unusable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (a private dockerd)"
    if shutil.which("apt-get") is None and shutil.which("dockerd") is None:
        return "no dockerd and no apt-get to install it"
    if subprocess.run(["bash", str(ROOT / "scripts/slurm_up.sh"), "--check"],
                      capture_output=True, check=False).returncode != 0:
        return "the Slurm cluster of scripts/slurm_up.sh is not up"
    return None


@pytest.fixture
def stack(wall_time_report):
    reason = _unusable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"compose test cannot run in CI: {reason}")
        pytest.skip(reason)
    started = time.monotonic()
    stack = ComposeStack()
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
        left = stack.leftovers()
        phases = ", ".join(f"{k} {v:.0f} s" for k, v in stack.timings.items())
        wall_time_report(f"compose stack: total {time.monotonic() - started:.0f} s ({phases})")
        assert not left, f"docker_down left behind: {left}"


def _gate_body() -> dict:
    harness = PREFIX / "data" / "harness.py"  # on the path host and container share
    shutil.copy(ROOT / "tests/fixtures/harness.py", harness)
    harness.chmod(0o644)
    return {
        "title": "compose: slurm gate 50 vs 55 ms",
        "workload": {"command": ["/usr/bin/python3", str(harness), "{warmup_steps}",
                                 "{measured_steps}"]},
        "control": {"env": {"HARNESS_STEP_MS": "50"}},
        "candidate": {"env": {"HARNESS_STEP_MS": "55"}},
        "warmup_steps": 2, "measured_steps": 5,
        "executor": "slurm", "health": {"enabled": False},
        "topology": {"time_limit_min": 5}, "run_timeout_s": 60, "policy": "drift",
    }


def _wait_gate(client: httpx.Client, gate_id: int, timeout_s: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        gate = client.get(f"/gates/{gate_id}").json()["gate"]
        if gate["status"] in ("succeeded", "failed", "cancelled"):
            return gate
        assert time.monotonic() < deadline, f"gate {gate_id} still {gate['status']}"
        time.sleep(1.0)


def _host_cluster() -> str:
    """ClusterName of the host's default Slurm cluster (/etc/slurm/slurm.conf)."""
    for line in Path("/etc/slurm/slurm.conf").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() == "clustername":
            return value.strip()
    raise AssertionError("/etc/slurm/slurm.conf names no ClusterName")


def _sacct_user(job_id: str, timeout_s: float = 120.0) -> str:
    """The account Slurm ran the job as, from the HOST's accounting.

    Polled until the job's record is final (slurmdbd lags, and a CI run once read ``root``
    for a job that sacct later showed as ``nobody``); on a timeout, every record seen is in
    the returned text so that the assertion says what accounting held.
    """
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while True:
        # The trays cluster shares this slurmdbd and numbers its jobs from 1 too: name the
        # host cluster explicitly, never rely on sacct's default.
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-D", "-o", "User,State,Submit",
                              "-M", _host_cluster(), "-j", job_id],
                             capture_output=True, text=True, check=False).stdout.splitlines()
        seen.append(" ; ".join(out))
        rows = [line.split("|") for line in out if line.count("|") == 2]
        final = [row for row in rows if (row[1].split() or [""])[0] in _FINAL_STATES]
        if final:
            return final[-1][0]
        if time.monotonic() > deadline:
            return f"no final record of job {job_id}; sacct said: {seen[-5:]}"
        time.sleep(1.0)


_FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                           "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


@pytest.mark.timeout(1800)  # cold: debootstrap + image builds take minutes on 2 cores
def test_compose_stack_runs_a_slurm_gate_and_keeps_it_across_a_restart(stack):
    stack.up()
    assert stack.wait_ready() == {"status": "ok", "database": "ok"}
    # The one-shot migrate service brought the schema to head and exited 0; the api never migrates.
    assert stack.psql("SELECT version_num FROM alembic_version") == [[head_revision()]]

    created = json.loads(stack.compose("exec", "-T", "api", "axbgate", "token", "create", "ci",
                                       "--scope", "submit", "--json", name="token").stdout)
    assert created["scopes"] == ["submit"]
    auth = {"Authorization": f"Bearer {created['token']}"}
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        assert client.post("/gates", json=_gate_body()).status_code == 401
        answer = client.post("/gates", json=_gate_body(), headers=auth)
        assert answer.status_code == 201, answer.text
        gate_id = answer.json()["id"]
        start = time.monotonic()
        gate = _wait_gate(client, gate_id)
        stack.timings["gate"] = time.monotonic() - start
        assert gate["status"] == "succeeded", gate["status_reason"]
        assert [r["status"] for r in gate["runs"]] == ["succeeded"] * 3
        primary = [v for v in gate["verdicts"] if v["is_primary"]]
        assert [v["verdict"] for v in primary] == ["reject"]
        assert abs(primary[0]["numbers"]["delta_pct"] - 10.0) < 0.5
        # It ran on the host's cluster, as the account the containers run as.
        assert _sacct_user(gate["job_ref"]) == "nobody"
        assert (PREFIX / "data" / "gates" / f"{gate_id:06d}" / "plan.json").stat().st_uid == stack.uid

        rows = stack.psql(f"SELECT g.status, v.verdict, v.is_primary FROM gates g JOIN verdicts v "
                          f"ON v.gate_id = g.id WHERE g.id = {gate_id} ORDER BY v.id")
        assert rows == [["succeeded", v["verdict"], "t" if v["is_primary"] else "f"]
                        for v in sorted(gate["verdicts"], key=lambda v: v["id"])]
        ledger = client.get("/ledger")
        assert ledger.status_code == 200 and "compose: slurm gate 50 vs 55 ms" in ledger.text
        page = client.get(f"/ledger/gates/{gate_id}")
        assert page.status_code == 200 and "reject" in page.text

    # Restart: containers and network removed, the pgdata volume kept.
    stack.compose("down", "-t", "5", name="compose down")
    stack.up()
    stack.wait_ready()
    migrate_log = stack.compose("logs", "--no-color", "migrate", name="logs").stdout
    assert f"database at revision {head_revision()}" in migrate_log
    assert stack.psql("SELECT count(*) FROM alembic_version") == [["1"]]
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        again = client.get(f"/gates/{gate_id}").json()["gate"]
        assert again["status"] == "succeeded"
        assert [v["verdict"] for v in again["verdicts"]] == [v["verdict"] for v in gate["verdicts"]]
    tokens = json.loads(stack.compose("exec", "-T", "api", "axbgate", "token", "list", "--json",
                                      name="token").stdout)
    assert [(t["name"], t["revoked_at"]) for t in tokens] == [("ci", None)]
