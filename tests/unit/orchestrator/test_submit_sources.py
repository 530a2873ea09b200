"""What a gate records as the workload's source when the request names no repository:
an external ``--command`` has no known commit (axbgate's own commit is not it), the
bundled trainer's recipe is axbgate's code and records axbgate's commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate, Run
from orchestrator.domain.gate_spec import GateCreate
from tests.factories import harness_gate, open_ledger, submit

ROOT = Path(__file__).resolve().parents[3]


def _sources(engine, gate_id: int):
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        runs = list(session.scalars(select(Run).where(Run.gate_id == gate_id)))
        return (gate.control_spec["source"].get("sha"), gate.candidate_spec["source"].get("sha"),
                {r.source_sha for r in runs})


def test_command_without_repo_records_no_commit_and_a_recipe_records_axbgates():
    engine, _settings = open_ledger()
    command_gate = submit(engine, harness_gate())
    assert _sources(engine, command_gate) == (None, None, {None})
    recipe_gate = submit(engine, GateCreate.model_validate(
        {"workload": {"recipe": "tiny"}, "health": {"enabled": False}}))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert _sources(engine, recipe_gate) == (head, head, {head})
    engine.dispose()
