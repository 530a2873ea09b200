"""Gate requests for the fixture harness (``tests/fixtures/harness.py``) and a temporary
git repository holding it. Ledger-row factories live in ``tests/ledger_factories.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchestrator.domain.gate_spec import GateCreate

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HARNESS = FIXTURES / "harness.py"


def harness_gate(*, control_ms: float = 100.0, candidate_ms: float = 100.0, health: bool = False,
                 executor: str = "local", **extra: Any) -> GateCreate:
    """A gate whose workload is the fixture harness; sides differ by $HARNESS_STEP_MS."""
    data: dict[str, Any] = {
        "title": f"harness {control_ms} vs {candidate_ms} ms",
        "workload": {"command": [sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}"]},
        "control": {"env": {"HARNESS_STEP_MS": str(control_ms)}},
        "candidate": {"env": {"HARNESS_STEP_MS": str(candidate_ms)}},
        "warmup_steps": 2,
        "measured_steps": 5,
        "executor": executor,
        "health": {"enabled": health},
        "run_timeout_s": 60,
        # Fixed-pattern tests use the campaign rule; the sequential default has its own tests.
        "policy": "drift",
    }
    data.update(extra)
    return GateCreate.model_validate(data)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_harness_repo(root: Path, step_ms: list[float]) -> tuple[Path, list[str]]:
    """A git repository with one commit per entry of ``step_ms`` (the harness's speed).

    Returns:
        (repository path, commit SHAs oldest first).
    """
    repo = root / "harness-repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    shutil.copy(HARNESS, repo / "harness.py")
    shas = []
    for i, ms in enumerate(step_ms):
        (repo / "step_ms.txt").write_text(f"{ms}\n")
        (repo / "CHANGES").write_text(f"change {i}\n")  # a neutral commit still changes a file
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"commit {i}: {ms} ms")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def open_ledger():
    """Migrate the test's embedded ledger and return ``(engine, settings)``."""
    from sqlalchemy import create_engine

    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import get_settings

    settings = get_settings()
    upgrade(settings.database_url)
    return create_engine(settings.database_url), settings


def submit(engine, gate_in: GateCreate) -> int:
    """Store a gate through the real use case and return its id."""
    from sqlalchemy.orm import Session

    from orchestrator.usecases.gates import submit_gate

    with Session(engine) as session:
        gate, created = submit_gate(session=session, gate_in=gate_in)
        session.commit()
    assert created
    return gate.id


def wait_for_gate(engine, settings, gate_id: int, *, timeout_s: float = 120.0,
                  dispatch: bool = False, interval_s: float = 0.3):
    """Drive a gate through real dispatcher and poller passes until it ends.

    Args:
        engine, settings: The ledger engine and service settings.
        gate_id: The gate to drive.
        timeout_s: Deadline in seconds.
        dispatch: Run one dispatch pass first (the gate is still queued).
        interval_s: Seconds between poll passes.

    Returns:
        The ended ``Gate`` row (detached).

    Raises:
        AssertionError: The gate did not end within ``timeout_s``.
    """
    import time

    from sqlalchemy.orm import Session

    from orchestrator.db.models import Gate
    from orchestrator.runtime.gates import dispatch_pass, poll_pass

    if dispatch:
        dispatch_pass(engine, settings, gate_ids=[gate_id])
    deadline = time.monotonic() + timeout_s
    status = None
    while time.monotonic() < deadline:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine, expire_on_commit=False) as session:
            gate = session.get(Gate, gate_id)
            status = gate.status
            if status in ("succeeded", "failed", "cancelled"):
                return gate
        time.sleep(interval_s)
    raise AssertionError(f"gate {gate_id} did not finish in {timeout_s} s (still {status})")
