"""Gates of real framework jobs through ``axbgate gate`` (local executor), issue 26.

Each gate is the CLI a user runs (``axbgate gate --spec ... --json``, a subprocess with its
own embedded ledger), on jobs that use the record helper's integrations or print a
framework's own log:

- two ranks over gloo timed by ``axbgate_record.StepTimer`` with one rank made slower: the
  stored series is that rank's (control: ``reduce="gather"``, candidate: ``"allreduce"``);
- a Hugging Face ``Trainer`` (GPT-2 from a config) with ``axbgate_record.hf.AxbgateCallback``;
- a Lightning fit with ``axbgate_record.lightning.AxbgateCallback``, under a steady warmup
  and a time window read from the ``AXBGATE_*`` variables the driver sets;
- torchtitan's own log (real runs committed to pytorch/torchtitan, replayed) read by the
  ``torchtitan`` adapter: full activation checkpointing against the same recipe without it.

The candidates are slower by a known amount (``STEP_SLEEP_S``, the slow rank's sleep, or
the logs' own times). A/B drift on a loaded 2-core machine can pass the campaign's 2% on
these millisecond steps, so the drift gates of HF and Lightning allow 15% (the effects are
+30-50%): the test checks the integration measures the right thing, not the noise floor.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Run, RunStep

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ROOT / "tests" / "fixtures" / "frameworks"
AXBGATE = str(Path(sys.executable).with_name("axbgate"))

pytestmark = pytest.mark.slow


def _gate(tmp_path: Path, spec: dict, timeout_s: float = 300) -> tuple[dict, list[Run], dict]:
    """Run ``axbgate gate --spec`` to the end; (gate JSON, stored runs, run id -> steps)."""
    data = tmp_path / "ledger"
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AXBGATE_")}
    env["AXBGATE_DATA_DIR"] = str(data)
    out = subprocess.run([AXBGATE, "gate", "--spec", str(tmp_path / "spec.json"), "--json"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=timeout_s)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    gate = json.loads(out.stdout)
    engine = create_engine(f"sqlite:///{data / 'axbgate.db'}")
    with Session(engine) as session:
        runs = list(session.scalars(select(Run).where(Run.gate_id == gate["id"]).order_by(Run.order)))
        steps = {r.id: list(session.scalars(select(RunStep).where(RunStep.run_id == r.id)
                                            .order_by(RunStep.step))) for r in runs}
        session.expunge_all()
    engine.dispose()
    return gate, runs, steps


def _drift(gate: dict) -> dict:
    return next(v for v in gate["verdicts"] if v["policy"] == "drift")


def _timing_record(gate_dir: Path, order: int, role: str) -> dict:
    """The AXBGATE_TIMING record of one run, from the raw log the driver captured."""
    for line in (gate_dir / "runs" / f"{order:02d}-{role}.log").read_text().splitlines():
        if line.startswith("AXBGATE_TIMING "):
            return json.loads(line.split(" ", 1)[1])
    raise AssertionError(f"no AXBGATE_TIMING in run {order}")


def _base(command: list[str], **extra) -> dict:
    spec = {"workload": {"command": command}, "policy": "drift", "run_pattern": "A X B",
            "health": {"enabled": False}, "run_timeout_s": 180, "executor": "local"}
    spec.update(extra)
    return spec


def test_two_ranks_store_the_slow_ranks_series(tmp_path):
    spec = _base([sys.executable, str(FRAMEWORKS / "two_rank_loop.py")], warmup_steps=2, measured_steps=8,
                 topology={"ntasks_per_node": 2},
                 control={"env": {"SLOW_RANK": "1", "SLOW_RANK_SLEEP_S": "0.02", "AXBGATE_TEST_REDUCE": "gather"}},
                 candidate={"env": {"SLOW_RANK": "1", "SLOW_RANK_SLEEP_S": "0.035",
                                    "AXBGATE_TEST_REDUCE": "allreduce"}},
                 # the effect is +50% (15 ms on 30 ms); on a loaded 2-core machine the CPU
                 # controls drifted 2.6% once, above the default 2%: the test is about the series
                 policy_params={"max_drift_pct": 10.0})
    spec["workload"]["launch"] = "per_rank"
    gate, runs, steps = _gate(tmp_path, spec)
    assert gate["status"] == "succeeded", gate["status_reason"]
    gate_dir = tmp_path / "ledger" / "gates" / f"{gate['id']:06d}"
    for run in runs:
        timing = _timing_record(gate_dir, run.order, run.role)
        fast, slow = timing["per_rank_step_s"]
        assert timing["reduce"] == ("allreduce" if run.role == "X" else "gather")
        assert run.world_size == 2 and (run.num_warmup_steps, run.num_measured_steps) == (2, 8)
        # the stored series is the per-step maximum over ranks; every measured step's is rank
        # 1's (rank 0 was faster); the first interval (from the timer's construction, start-up
        # included) may be either rank's
        assert run.slowest_rank_step_s == [max(f, s) for f, s in zip(fast, slow)]
        assert all(s > f for s, f in zip(slow[2:], fast[2:]))
        assert run.slowest_rank_step_s[2:] == slow[2:]
        assert [st.slowest_rank_step_s for st in steps[run.id]] == run.slowest_rank_step_s
        assert [st.rank_step_s for st in steps[run.id]] == fast
        extra = 0.035 if run.role == "X" else 0.02
        assert 0.01 + extra <= run.median_step_s < 0.01 + extra + 0.015, run.median_step_s
    verdict = _drift(gate)
    assert verdict["verdict"] == "reject", verdict["numbers"]["reason"]
    assert 10.0 <= verdict["numbers"]["delta_ms"] <= 20.0


def test_hf_trainer_gate_rejects_the_slower_candidate(tmp_path):
    spec = _base([sys.executable, str(FRAMEWORKS / "hf_train.py")], warmup_steps=3, measured_steps=10,
                 policy_params={"max_drift_pct": 15.0},
                 control={"env": {"STEP_SLEEP_S": "0.03", "HF_OUT_DIR": str(tmp_path / "hf")}},
                 candidate={"env": {"STEP_SLEEP_S": "0.045", "HF_OUT_DIR": str(tmp_path / "hf")}})
    gate, runs, steps = _gate(tmp_path, spec)
    assert gate["status"] == "succeeded", gate["status_reason"]
    verdict = _drift(gate)
    assert verdict["verdict"] == "reject", verdict["numbers"]["reason"]
    assert 10.0 <= verdict["numbers"]["delta_ms"] <= 25.0  # the forward hook's extra 15 ms
    for run in runs:
        assert (run.num_warmup_steps, run.num_measured_steps) == (3, 10)
        assert run.local_batch_size == 4 and run.world_size == 1
        assert run.result_extra["step_series"] == "slowest_rank"
        # every step's loss and gradient norm came from the Trainer's own logs (logging_steps=1)
        assert len(run.semantics["loss"]) == 13 and len(run.semantics["grad_norm"]) == 13
        assert run.semantics["tokens_per_step"] == 4 * 32
        assert all(st.loss is not None for st in steps[run.id])
    # same seed and data: the controls trained the same thing
    assert runs[0].semantics["loss"] == runs[2].semantics["loss"]


def test_lightning_gate_under_a_steady_warmup_and_a_time_window(tmp_path):
    spec = _base([sys.executable, str(FRAMEWORKS / "lightning_train.py")], warmup_steps=3,
                 measured_steps=5, warmup_mode="steady", max_warmup_steps=30, measured_seconds=0.6,
                 policy_params={"max_drift_pct": 15.0},
                 control={"env": {"STEP_SLEEP_S": "0.03"}}, candidate={"env": {"STEP_SLEEP_S": "0.045"}})
    gate, runs, _ = _gate(tmp_path, spec)
    assert gate["status"] == "succeeded", gate["status_reason"]
    verdict = _drift(gate)
    assert verdict["verdict"] == "reject", verdict["numbers"]["reason"]
    assert 10.0 <= verdict["numbers"]["delta_ms"] <= 25.0
    for run in runs:
        assert 3 <= run.num_warmup_steps <= 30
        # the window (0.6 s at the settled step time) decided the count, not the minimum 5
        assert run.num_measured_steps >= 10
        assert 0.5 <= run.num_measured_steps * run.median_step_s <= 1.2
        assert run.result_extra["warmup_rule"]["mode"] == "steady"
        assert run.local_batch_size == 8


def test_torchtitan_log_gate_reads_the_framework_log(tmp_path):
    logs = FRAMEWORKS / "torchtitan"
    spec = _base([sys.executable, str(FRAMEWORKS / "replay_log.py"), "{total_steps}"], warmup_steps=1,
                 measured_steps=9,
                 control={"env": {"REPLAY_LOG": str(logs / "run143_loss_chunks6_color.log")}},
                 candidate={"env": {"REPLAY_LOG": str(logs / "run141_full_ac_color.log")}})
    spec["workload"]["log_format"] = "torchtitan"
    gate, runs, steps = _gate(tmp_path, spec)
    assert gate["status"] == "succeeded", gate["status_reason"]
    assert gate["workload"]["log_format"] == "torchtitan"
    # tokens per step per rank 160 x 128 = 20480; steps 2-10 at tps 10,288 vs 8,462 (full AC)
    assert runs[0].median_step_s == pytest.approx(20480 / 10288, rel=1e-12)
    assert runs[1].median_step_s == pytest.approx(20480 / 8462, rel=1e-12)
    verdict = _drift(gate)
    assert verdict["verdict"] == "reject"
    assert verdict["numbers"]["delta_pct"] == pytest.approx((10288 / 8462 - 1) * 100, rel=1e-9)
    for run in runs:
        assert run.command[-1] == "10"  # {total_steps}: 1 warmup + 9 measured
        assert run.result_extra["step_series"] == "torchtitan_rank0_interval_mean"
        assert any("not the slowest rank" in note for note in run.result_extra["notes"])
        assert run.world_size == 8 and run.peak_reserved_bytes is not None
        rows = steps[run.id]
        assert len(rows) == 10 and all(r.slowest_rank_step_s is None for r in rows)
        assert len({r.rank_step_s for r in rows[1:]}) == 1  # one log line covered steps 2-10


@pytest.mark.slurm
def test_two_ranks_under_srun_one_task_per_rank(tmp_path):
    """The same loop, each rank its own ``srun`` task (no torchrun): RANK from SLURM_PROCID."""
    if shutil.which("sbatch") is None or "UP" not in subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, check=False).stdout:
        if os.environ.get("CI"):
            pytest.fail("Slurm is not up in CI: scripts/slurm_up.sh should have started it")
        pytest.skip("Slurm is not up (run scripts/slurm_up.sh as root)")
    spec = _base([sys.executable, str(FRAMEWORKS / "two_rank_loop.py")], warmup_steps=2, measured_steps=6,
                 executor="slurm", topology={"ntasks_per_node": 2, "time_limit_min": 10},
                 control={"env": {"SLOW_RANK": "0", "SLOW_RANK_SLEEP_S": "0.02"}},
                 candidate={"env": {"SLOW_RANK": "0", "SLOW_RANK_SLEEP_S": "0.04"}})
    spec["workload"]["launch"] = "per_rank"
    gate, runs, _ = _gate(tmp_path, spec, timeout_s=400)
    assert gate["status"] == "succeeded", gate["status_reason"]
    gate_dir = tmp_path / "ledger" / "gates" / f"{gate['id']:06d}"
    for run in runs:
        slow, fast = _timing_record(gate_dir, run.order, run.role)["per_rank_step_s"]
        assert run.world_size == 2
        assert run.slowest_rank_step_s[2:] == slow[2:]  # rank 0 is the slow one this time
        assert all(s > f for s, f in zip(slow[2:], fast[2:]))
        assert run.command[0] == "srun"
    assert _drift(gate)["verdict"] == "reject"
