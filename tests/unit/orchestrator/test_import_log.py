"""`axbgate import-log`: harness and product logs into the embedded ledger."""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.app.cli import main
from orchestrator.db.models import Allocation, Artifact, HealthCheck, Run, RunStep
from orchestrator.settings import get_settings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _ledger() -> Session:
    return Session(create_engine(get_settings().database_url))


def test_import_harness_log(capsys, tmp_path):
    log = tmp_path / "run.log"
    shutil.copy(FIXTURES / "harness_bf16.log", log)
    code, out, err = _run_cli(capsys, "import-log", str(log), "--json")
    assert code == 0, err
    [summary] = json.loads(out)
    expected_sha = hashlib.sha256(log.read_bytes()).hexdigest()
    assert summary["log_sha256"] == expected_sha
    assert summary["warmup_steps"] == 10 and summary["measured_steps"] == 20
    assert summary["num_steps"] == 30
    # The recomputed median equals the log's own true_wall_median_step_sec.
    assert summary["median_step_s"] == pytest.approx(summary["log_median_step_s"], rel=1e-12)
    assert summary["median_step_s"] == pytest.approx(0.428860612, abs=1e-12)
    assert summary["median_mismatch"] is False
    assert summary["status"] == "succeeded"
    assert summary["health_verdict"] == "unknown" and summary["num_health_checks"] == 2
    with _ledger() as s:
        run = s.get(Run, summary["run_id"])
        assert run.median_step_s == pytest.approx(0.428860612, abs=1e-12)
        assert len(run.slowest_rank_step_s) == 30
        assert run.world_size == 8 and run.peak_allocated_bytes == 61234567890
        assert s.scalar(select(RunStep.id).where(RunStep.run_id == run.id).limit(1)) is not None
        assert len(list(s.scalars(select(RunStep).where(RunStep.run_id == run.id)))) == 30
        art = s.scalars(select(Artifact).where(Artifact.run_id == run.id)).one()
        assert art.sha256 == expected_sha and art.size_bytes == log.stat().st_size
        kept = Path(art.path)
        assert kept.read_bytes() == log.read_bytes()
        checks = list(s.scalars(select(HealthCheck)))
        assert {c.name for c in checks} == {"scalar", "sustained_all_reduce"}
        assert s.get(Allocation, run.allocation_id) is not None


def test_reimport_is_idempotent(capsys, tmp_path):
    log = FIXTURES / "harness_bf16.log"
    code, out, _ = _run_cli(capsys, "import-log", str(log), "--json")
    first = json.loads(out)[0]
    code, out, _ = _run_cli(capsys, "import-log", str(log), "--json")
    second = json.loads(out)[0]
    assert code == 0 and second["already_imported"] is True
    assert second["run_id"] == first["run_id"]
    with _ledger() as s:
        assert len(list(s.scalars(select(Run)))) == 1


def _product_log(path: Path, times, warmup, measured, loss=1.0, result_status=None):
    lines = [f'AXBGATE_STEP {{"v":1,"step":{i},"slowest_rank_step_s":{t},"loss":{loss}}}'
             for i, t in enumerate(times)]
    lines.append("AXBGATE_TIMING " + json.dumps(
        {"v": 1, "slowest_rank_step_s": times, "num_warmup_steps": warmup,
         "num_measured_steps": measured}))
    res = {"v": 1, "median_step_s": statistics.median(times[warmup:]) if len(times) > warmup else 1.0,
           "world_size": 2, "local_batch_size": 1, "grad_accum_steps": 1}
    if result_status:
        res.update(status=result_status, error="CUDA out of memory")
    lines.append("AXBGATE_RESULT " + json.dumps(res))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_short_run_is_failed_not_measured(capsys, tmp_path):
    log = _product_log(tmp_path / "short.log", [1.0, 0.5, 0.6], warmup=2, measured=3)
    code, out, _ = _run_cli(capsys, "import-log", str(log), "--json")
    [summary] = json.loads(out)
    assert code == 0
    assert summary["status"] == "failed" and summary["median_step_s"] is None
    assert "finished 3 of 5 steps" in summary["error"]


def test_nan_loss_fails_the_run(capsys, tmp_path):
    log = _product_log(tmp_path / "nan.log", [1.0, 0.5, 0.6], warmup=1, measured=2, loss="NaN")
    code, out, _ = _run_cli(capsys, "import-log", str(log), "--json")
    [summary] = json.loads(out)
    assert summary["status"] == "failed" and "non-finite loss" in summary["error"]


def test_failed_result_status(capsys, tmp_path):
    log = _product_log(tmp_path / "oom.log", [1.0, 0.5], warmup=1, measured=1, result_status="failed")
    code, out, _ = _run_cli(capsys, "import-log", str(log), "--json")
    assert json.loads(out)[0]["error"] == "CUDA out of memory"


def test_malformed_log_names_line_and_stores_nothing(capsys, tmp_path):
    log = tmp_path / "bad.log"
    log.write_text("hello\nAXBGATE_STEP {oops\n")
    code, out, err = _run_cli(capsys, "import-log", str(log))
    assert code == 2 and "line 2" in err and "invalid JSON" in err
    with _ledger() as s:
        assert list(s.scalars(select(Run))) == [] and list(s.scalars(select(Artifact))) == []


def test_missing_file_and_empty_log(capsys, tmp_path):
    code, _, err = _run_cli(capsys, "import-log", str(tmp_path / "nope.log"))
    assert code == 2 and "not a readable file" in err
    empty = tmp_path / "empty.log"
    empty.write_text("no records here\n")
    code, _, err = _run_cli(capsys, "import-log", str(empty))
    assert code == 2 and "no record lines" in err


def test_median_mismatch_is_reported_and_survives_reimport(capsys, tmp_path):
    log = _product_log(tmp_path / "mm.log", [1.0, 0.5, 0.6, 0.7], warmup=1, measured=3)
    text = log.read_text().replace('"median_step_s": 0.6', '"median_step_s": 0.9')
    log.write_text(text)
    code, out, err = _run_cli(capsys, "import-log", str(log))
    assert code == 0 and "differs from the median recomputed" in err
    code, out, _ = _run_cli(capsys, "import-log", str(log), "--json")
    again = json.loads(out)[0]
    assert again["already_imported"] and again["median_mismatch"] is True
    assert again["log_median_step_s"] == 0.9 and again["median_step_s"] == pytest.approx(0.6)
