"""How a gate hands its rule and its log format to a run (issue 26): the AXBGATE_*
variables of every run, {total_steps}, workload.log_format checks, and import-log --format."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from axbgate_record import MeasureRule
from orchestrator.app.cli import main
from orchestrator.db.models import Run, RunStep
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.executors.plan import GatePlan
from orchestrator.executors.runenv import RunEnvPolicy, measure_env, step_env
from orchestrator.settings import get_settings

FRAMEWORKS = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"
TITAN = ["torchrun", "-m", "torchtitan.train", "--training.steps", "{total_steps}"]


def _plan(tmp_path, **kw) -> GatePlan:
    base = dict(gate_id=1, gate_dir=str(tmp_path), executor="local", roles=["A", "X", "B"], sides={},
                workload={"command": ["x"]}, nodes=1, ranks_per_node=2, gpus_per_node=0,
                num_warmup_steps=3, num_measured_steps=12, health={}, run_timeout_s=60, max_extend=0,
                policy="drift", policy_params={}, kind="candidate")
    base.update(kw)
    return GatePlan(**base)


def test_every_run_gets_the_gates_rule(tmp_path):
    env = measure_env(_plan(tmp_path))
    assert env["AXBGATE_WARMUP_MODE"] == "fixed" and env["AXBGATE_TOTAL_STEPS"] == "15"
    assert env["AXBGATE_MEASURED_SECONDS"] == ""
    steady = measure_env(_plan(tmp_path, warmup_mode="steady", max_warmup_steps=40, measured_seconds=7.5))
    rule = MeasureRule.from_env(steady)
    assert (rule.warmup_mode, rule.warmup_steps, rule.max_warmup_steps, rule.measured_steps,
            rule.measured_seconds) == ("steady", 3, 40, 12, 7.5)
    # the rule is set after the side's env: a side cannot measure itself by another rule
    full = step_env({"PATH": "/bin", "AXBGATE_WARMUP_MODE": "steady"}, RunEnvPolicy(allow=("PATH",)),
                    preamble={}, side_env={"FOO": "1"}, compile_cache=tmp_path, python_root="/r",
                    run_as_env={}, measure=env)
    assert full["AXBGATE_WARMUP_STEPS"] == "3" and full["AXBGATE_WARMUP_MODE"] == "fixed"
    health = step_env({}, RunEnvPolicy(), preamble={}, side_env={}, compile_cache=tmp_path,
                      python_root="/r", run_as_env={})
    assert "AXBGATE_WARMUP_MODE" not in health


def test_gate_requests_with_a_log_format():
    gate = GateCreate.model_validate({"workload": {"command": TITAN, "log_format": "torchtitan"},
                                      "policy": "drift", "warmup_steps": 1, "measured_steps": 9})
    assert gate.workload.stored()["log_format"] == "torchtitan"
    plain = GateCreate.model_validate({"workload": {"command": ["python", "b.py", "{total_steps}"]}})
    assert "log_format" not in plain.workload.stored()  # earlier gates' identities stay equal
    for body, fragment in [
        ({"workload": {"command": TITAN, "log_format": "deepspeed"}}, "log_format"),
        ({"workload": {"recipe": "tiny", "log_format": "megatron"}}, "prints the record contract"),
        ({"workload": {"command": TITAN, "log_format": "torchtitan"}, "warmup_mode": "steady"},
         "warmup_mode 'fixed'"),
        ({"workload": {"command": TITAN, "log_format": "torchtitan"}, "measured_seconds": 30},
         "no measured_seconds"),
        ({"workload": {"command": ["torchrun", "train.py"], "log_format": "megatron"}},
         "pass {total_steps}"),
        ({"workload": {"command": ["x"]}, "candidate": {"env": {"AXBGATE_MEASURED_STEPS": "3"}}},
         "set by the launcher"),
    ]:
        with pytest.raises(ValidationError, match=fragment.replace("{", r"\{").replace("}", r"\}")):
            GateCreate.model_validate(body)


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_log_with_a_format(capsys, tmp_path):
    log = tmp_path / "titan.log"
    shutil.copy(FRAMEWORKS / "torchtitan/run217_logfreq1.log", log)
    code, out, err = _cli(capsys, "import-log", "--format", "torchtitan", "--warmup-steps", "2", str(log), "--json")
    assert code == 0, err
    [summary] = json.loads(out)
    assert summary["status"] == "succeeded" and summary["dialect"] == "torchtitan"
    assert (summary["warmup_steps"], summary["measured_steps"], summary["num_steps"]) == (2, 8, 10)
    assert summary["step_series"] == "torchtitan_rank0_interval_mean"
    assert "not the slowest rank" in err  # notes go to stderr
    with Session(create_engine(get_settings().database_url)) as s:
        run = s.get(Run, summary["run_id"])
        assert run.semantics["loss"][0] == 12.55223 and run.world_size == 8
        rows = list(s.scalars(select(RunStep).where(RunStep.run_id == run.id).order_by(RunStep.step)))
        assert [r.step for r in rows] == list(range(10))
        assert rows[2].rank_step_s == pytest.approx(160 * 128 / 9893) and rows[2].slowest_rank_step_s is None
    meg = tmp_path / "meg.log"
    shutil.copy(FRAMEWORKS / "megatron/issue449_iterations_100-200.log", meg)
    code, out, err = _cli(capsys, "import-log", "--format", "megatron", "--warmup-steps", "100", str(meg), "--json")
    assert code == 0, err
    [summary] = json.loads(out)
    assert summary["median_step_s"] == pytest.approx(4.2708) and summary["step_series"] == "megatron_interval_mean"
    assert "skipped 17 iteration(s)" in err


def test_import_log_refuses_what_it_cannot_read(capsys, tmp_path):
    notes = tmp_path / "notes.txt"
    shutil.copy(FRAMEWORKS / "megatron/t5_draft_notes.txt", notes)
    code, _, err = _cli(capsys, "import-log", "--format", "megatron", str(notes))
    assert code == 2 and "step 2500 after step 4000" in err
    code, _, err = _cli(capsys, "import-log", "--format", "deepspeed", str(notes))
    assert code == 2 and "--format 'deepspeed' must be one of record, torchtitan, megatron" in err
    code, _, err = _cli(capsys, "import-log", "--warmup-steps", "3", str(notes))
    assert code == 2 and "--warmup-steps applies to --format torchtitan/megatron" in err
    titan = tmp_path / "wrong.log"
    shutil.copy(FRAMEWORKS / "torchtitan/run217_logfreq1.log", titan)
    code, _, err = _cli(capsys, "import-log", "--format", "megatron", str(titan))
    assert code == 2 and "holds no megatron metric lines" in err
    with Session(create_engine(get_settings().database_url)) as s:
        assert list(s.scalars(select(Run))) == []  # nothing of a refused log is stored


def test_the_server_never_imports_a_framework():
    code = textwrap.dedent("""
        import importlib.abc, sys
        class _Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("transformers", "lightning", "pytorch_lightning", "accelerate"):
                    raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
                return None
        sys.meta_path.insert(0, _Block())
        import orchestrator.app.api.main, orchestrator.app.cli, orchestrator.runtime
        import orchestrator.usecases.imports, orchestrator.executors.driver.gate
        import orchestrator.domain.framework_logs, axbgate_record
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
