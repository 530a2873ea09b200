"""`axbgate health` output is a log `axbgate import-log` stores (allocation + checks)."""

from __future__ import annotations

import json

from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.app.cli import main
from orchestrator.db.models import Allocation, HealthCheck
from orchestrator.settings import get_settings


def test_health_output_imports_as_allocation_and_checks(tmp_path, capsys):
    code = main(["health", "--json", "--records", "--nproc", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    log = tmp_path / "health.log"
    log.write_text(out)
    assert main(["import-log", str(log), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)[0]
    assert summary["health_verdict"] == "healthy" and summary["run_id"] is None
    engine = create_engine(get_settings().database_url)
    with Session(engine) as session:
        alloc = session.get(Allocation, summary["allocation_id"])
        assert alloc.health_verdict == "healthy" and alloc.num_gpus == 0
        names = {c.name for c in session.scalars(select(HealthCheck).where(
            HealthCheck.allocation_id == alloc.id))}
        assert {"collective_correctness", "busbw_all_reduce"} <= names
        assert summary["num_health_checks"] == len(names)
    engine.dispose()
