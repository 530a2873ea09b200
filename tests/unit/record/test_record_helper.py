"""axbgate_record: the rule from the environment, the timer's decisions and its records.

The timer runs on a fake clock here (every number known); the real clock, real ranks and
real frameworks are in tests/integration/test_integrations_gate.py.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest

from axbgate_record import MeasureRule, StepTimer, total_steps
from orchestrator.domain.measure import measure_run
from orchestrator.domain.records import parse


class FakeClock:
    """A clock that advances only when told: each step's duration is set by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _loop(timer: StepTimer, clock: FakeClock, durations) -> int:
    steps = 0
    for seconds in durations:
        if timer.done():
            break
        clock.now += seconds
        timer.step(loss=1.0 / (steps + 1), grad_norm=2.0)
        steps += 1
    return steps


def _timer(env: dict[str, str], **kw) -> tuple[StepTimer, FakeClock, io.StringIO]:
    clock, out = FakeClock(), io.StringIO()
    return StepTimer(environ=env, clock=clock, stream=out, sync=None, **kw), clock, out


def test_rule_from_the_drivers_variables():
    env = MeasureRule(warmup_mode="steady", warmup_steps=3, max_warmup_steps=40, measured_steps=7,
                      measured_seconds=2.5).to_env()
    assert env["AXBGATE_TOTAL_STEPS"] == str(40 + 100000)
    rule = MeasureRule.from_env(env)
    assert (rule.warmup_mode, rule.warmup_steps, rule.max_warmup_steps, rule.measured_steps,
            rule.measured_seconds, rule.steady_window, rule.steady_tolerance_pct) == (
        "steady", 3, 40, 7, 2.5, 5, 1.0)
    assert MeasureRule.from_env({}) is None
    fixed = MeasureRule.from_env({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "2",
                                  "AXBGATE_MEASURED_STEPS": "5", "AXBGATE_MEASURED_SECONDS": ""})
    assert fixed.fixed and fixed.total_steps == 7
    assert total_steps(30, {}) == 30 and total_steps(30, {"AXBGATE_TOTAL_STEPS": "12"}) == 12


@pytest.mark.parametrize("env, fragment", [
    ({"AXBGATE_WARMUP_MODE": "sometimes"}, "AXBGATE_WARMUP_MODE='sometimes'"),
    ({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "ten"}, "AXBGATE_WARMUP_STEPS='ten'"),
    ({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_MEASURED_STEPS": "0"}, "AXBGATE_MEASURED_STEPS=0"),
    ({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_MEASURED_SECONDS": "-1"}, "AXBGATE_MEASURED_SECONDS"),
    ({"AXBGATE_WARMUP_MODE": "steady", "AXBGATE_WARMUP_STEPS": "9", "AXBGATE_MAX_WARMUP_STEPS": "4"},
     "AXBGATE_MAX_WARMUP_STEPS"),
])
def test_bad_variables_are_named(env, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        MeasureRule.from_env(env)


def test_fixed_rule_counts_and_records_parse_and_measure():
    timer, clock, out = _timer({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "2",
                                "AXBGATE_MEASURED_STEPS": "4"}, local_batch_size=3, tokens_per_sample=10)
    assert timer.gated and timer.total_steps == 6
    steps = _loop(timer, clock, [0.5, 0.2, 0.11, 0.13, 0.12, 0.10, 9.0])
    assert steps == 6 and timer.done()
    summary = timer.finish()
    assert summary["slowest_rank_step_s"] == pytest.approx([0.5, 0.2, 0.11, 0.13, 0.12, 0.10])
    parsed = parse(out.getvalue())
    outcome = measure_run(parsed, expected_warmup_steps=2, expected_measured_steps=4,
                          require_slowest_rank=True)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.fields["median_step_s"] == pytest.approx(0.115)
    assert not outcome.median_mismatch
    assert parsed.result["samples_per_s"] == pytest.approx(3 / 0.115)
    assert parsed.result["tokens_per_s"] == pytest.approx(30 / 0.115)
    assert parsed.semantics["loss"] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6])
    assert parsed.semantics["tokens_per_step"] == 30 and parsed.semantics["samples_per_step"] == 3
    assert [s.phase for s in parsed.steps] == ["warmup"] * 2 + ["measured"] * 4


def test_steady_warmup_ends_when_five_steps_agree_and_the_window_is_sized_once():
    env = MeasureRule(warmup_mode="steady", warmup_steps=2, max_warmup_steps=30, measured_steps=3,
                      measured_seconds=0.95).to_env()
    timer, clock, out = _timer(env)
    # steps 0-3 settle down, 4-8 agree within 1% (median 0.1): warmup ends before step 9
    warm = [0.9, 0.4, 0.2, 0.15, 0.100, 0.1005, 0.0995, 0.1, 0.1002]
    steps = _loop(timer, clock, warm + [0.1] * 40)
    assert timer.num_warmup_steps == 9
    assert timer.total_steps == 9 + 10  # ceil(0.95 s / median 0.1 s of the settled steps)
    assert steps == 19
    timer.finish()
    outcome = measure_run(parse(out.getvalue()), warmup_bounds=(2, 30), min_measured_steps=3,
                          require_slowest_rank=True)
    assert outcome.status == "succeeded" and outcome.fields["num_measured_steps"] == 10
    assert outcome.fields["result_extra"]["warmup_rule"]["mode"] == "steady"


def test_steady_warmup_stops_at_its_maximum():
    env = MeasureRule(warmup_mode="steady", warmup_steps=1, max_warmup_steps=6, measured_steps=2).to_env()
    timer, clock, _ = _timer(env)
    _loop(timer, clock, [0.1, 0.2] * 20)  # never settles
    assert (timer.num_warmup_steps, timer.total_steps) == (6, 8)


def test_outside_a_gate_default_rule_or_noop():
    timer, clock, out = _timer({})
    assert not timer.gated and timer.total_steps == 30  # DESIGN 10 + 20
    idle, clock2, out2 = _timer({}, noop_outside_gate=True)
    assert _loop(idle, clock2, [0.1] * 50) == 50 and not idle.done()
    assert idle.finish() is None and out2.getvalue() == ""
    inside, clock3, out3 = _timer({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "0",
                                   "AXBGATE_MEASURED_STEPS": "1"}, noop_outside_gate=True)
    assert _loop(inside, clock3, [0.1] * 5) == 1 and inside.finish() is not None


def test_a_short_loop_and_an_exception_print_failed_results():
    timer, clock, out = _timer({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "1",
                                "AXBGATE_MEASURED_STEPS": "5"})
    _loop(timer, clock, [0.1, 0.1])
    assert timer.finish() is None
    outcome = measure_run(parse(out.getvalue()))
    assert outcome.status == "failed" and "loop ended after 2 steps" in outcome.error
    timer2, _, out2 = _timer({})
    with pytest.raises(RuntimeError):
        with timer2:
            raise RuntimeError("CUDA out of memory")
    assert "RuntimeError: CUDA out of memory" in measure_run(parse(out2.getvalue())).error


def test_late_metrics_and_gaps_in_the_series():
    timer, clock, out = _timer({"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "0",
                                "AXBGATE_MEASURED_STEPS": "3"})
    for _ in range(3):
        clock.now += 0.1
        timer.step()
    timer.record(0, loss=3.0, grad_norm=1.0)
    timer.record(1, loss=2.0, grad_norm=1.0)
    timer.record(2, loss=1.0)
    timer.finish()
    semantics = parse(out.getvalue()).semantics
    assert semantics["loss"] == [3.0, 2.0, 1.0]
    assert semantics["grad_norm"] == []  # a series with a gap is not compared


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="reduce='max'"):
        StepTimer(reduce="max", environ={})
    with pytest.raises(ValueError, match="local_batch_size=0"):
        StepTimer(local_batch_size=0, environ={})


def test_more_ranks_than_a_process_group_is_refused():
    timer, clock, _ = _timer({"WORLD_SIZE": "2", "RANK": "1"})
    clock.now += 0.1
    with pytest.raises(ValueError, match="torch.distributed is not initialised"):
        timer.step()


def test_imports_without_torch_and_without_the_server_stack():
    code = textwrap.dedent("""
        import importlib.abc, sys
        class _Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "orchestrator", "fastapi", "sqlalchemy", "transformers",
                                          "lightning", "numpy"):
                    raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
                return None
        sys.meta_path.insert(0, _Block())
        import io
        from axbgate_record import StepTimer
        out = io.StringIO()
        timer = StepTimer(environ={"AXBGATE_WARMUP_MODE": "fixed", "AXBGATE_WARMUP_STEPS": "1",
                                   "AXBGATE_MEASURED_STEPS": "2"}, stream=out)
        while not timer.done():
            timer.step(loss=1.0)
        timer.finish()
        assert out.getvalue().count("AXBGATE_STEP ") == 3, out.getvalue()
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
