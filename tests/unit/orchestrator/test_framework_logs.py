"""The torchtitan and Megatron-LM adapters on logs those projects printed themselves
(tests/fixtures/frameworks/SOURCES.md: repository, path, commit of every file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.errors import RecordError
from orchestrator.domain.framework_logs import check_gate_log_format, log_parser
from orchestrator.domain.measure import measure_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"
# tps of run217's ten lines (--metrics.log_freq=1), read off the log by eye
RUN217_TPS = [968, 9891, 9893, 10139, 10280, 10231, 10318, 10332, 10368, 10550]
RUN217_LOSS = [12.55223, 10.60813, 15.82324, 12.13735, 11.69579, 10.92376, 8.50657, 7.25867,
               5.66325, 6.92163]
TOKENS_PER_RANK_STEP = 160 * 128  # local batch 160 x sequence length 128 x accumulation 1


def _read(fmt: str, name: str, **kw):
    parser = log_parser(fmt, keep_steps=True, **kw)
    streamed = []
    for line in (FIXTURES / name).read_bytes().split(b"\n"):
        streamed += parser.feed(line) or []
    streamed += parser.drain()
    return parser, streamed, parser.finish()


def test_torchtitan_every_step_logged():
    parser, streamed, parsed = _read("torchtitan", "torchtitan/run217_logfreq1.log", warmup_steps=2)
    expected = [TOKENS_PER_RANK_STEP / tps for tps in RUN217_TPS]
    assert parsed.timing["slowest_rank_step_s"] == pytest.approx(expected, rel=1e-12)
    assert [s.rank_step_s for s in streamed] == pytest.approx(expected, rel=1e-12)
    assert all(s.slowest_rank_step_s is None for s in streamed)  # rank 0's, never "slowest"
    # independent check of the tps arithmetic: the lines' own timestamps (1 ms) agree
    stamps = [p.stamp_s for p in parser.points]
    for i in range(1, 10):
        assert stamps[i] - stamps[i - 1] == pytest.approx(expected[i], abs=2e-3)
    outcome = measure_run(parsed, expected_warmup_steps=2, expected_measured_steps=8)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.fields["median_step_s"] == pytest.approx(
        sorted(expected[2:])[3] / 2 + sorted(expected[2:])[4] / 2, rel=1e-12)
    assert outcome.fields["result_extra"]["step_series"] == "torchtitan_rank0_interval_mean"
    assert any("not the slowest rank" in n for n in outcome.notes)
    assert outcome.fields["world_size"] == 8  # pp=1 dp_replicate=1 dp_shard=8 cp=1 tp=1
    assert outcome.fields["local_batch_size"] == 160 and outcome.fields["grad_accum_steps"] == 1
    assert outcome.fields["peak_reserved_bytes"] == round(169.10 * 2**30)
    sem = outcome.fields["semantics"]
    assert sem["loss"] == RUN217_LOSS and sem["grad_norm"][1] == 49.25
    assert (sem["global_batch_size"], sem["tokens_per_step"]) == (1280, 1280 * 128)


def test_torchtitan_log_interval_is_expanded_and_labelled():
    _, streamed, parsed = _read("torchtitan", "torchtitan/run159_logfreq10.log", warmup_steps=1)
    # lines at steps 1 and 10: step 1 alone, steps 2-10 share the second line's mean
    assert [s.step for s in streamed] == list(range(10))
    assert parsed.timing["slowest_rank_step_s"] == pytest.approx(
        [TOKENS_PER_RANK_STEP / 1170] + [TOKENS_PER_RANK_STEP / 9921] * 9, rel=1e-12)
    assert parsed.timing["extra"]["log_interval_steps"] == [1, 9]
    assert any("every 1/9 steps" in n for n in parsed.notes)
    assert parsed.semantics["loss"] == []  # two values for ten steps: not compared
    with pytest.raises(RecordError, match="ends at step 5, inside the log interval of steps 2-10"):
        _read("torchtitan", "torchtitan/run159_logfreq10.log", warmup_steps=5)


def test_torchtitan_coloured_lines():
    _, _, parsed = _read("torchtitan", "torchtitan/run143_loss_chunks6_color.log", warmup_steps=1)
    assert parsed.timing["slowest_rank_step_s"][1:] == pytest.approx([TOKENS_PER_RANK_STEP / 10288] * 9)
    assert parsed.result["framework_mfu_pct"] == 38.53  # the last line's own mfu (torchtitan's)
    assert parsed.semantics["loss"] == []


def test_megatron_lines_of_the_megatron_repository():
    """The five lines of Megatron-LM's own notes.txt, each read alone (they are four runs)."""
    lines = [ln for ln in (FIXTURES / "megatron/t5_draft_notes.txt").read_text().splitlines()
             if "iteration" in ln]
    expected = [(2100, 0.8757, 5.542775, 1.799, 0), (4000, 0.7867, 4.764409, 2.373, 0),
                (2500, 0.4108, 5.331187, 2.045, 0), (2800, 0.4091, 5.198639, 1.381, 0),
                (2600, 0.6344, 5.322028, 1.291, 3)]
    assert len(lines) == 5
    for line, (step, seconds, loss, norm, skipped) in zip(lines, expected):
        parser = log_parser("megatron", warmup_steps=0)
        parser.feed(line)
        (point,) = parser.points
        assert (point.step, point.loss, point.grad_norm, point.extra["skipped"]) == (step, loss, norm, skipped)
        assert point.step_s == pytest.approx(seconds, rel=1e-12)
        assert point.extra["global_batch_size"] == 1024 and point.extra["train_iters"] == 1000000
    with pytest.raises(RecordError, match="step 2500 after step 4000: the log holds more than one run"):
        _read("megatron", "megatron/t5_draft_notes.txt", warmup_steps=0)


def test_megatron_log_that_starts_mid_run():
    _, streamed, parsed = _read("megatron", "megatron/issue756_iterations_29-31.log", warmup_steps=1)
    assert [s.step for s in streamed] == [28, 29, 30]  # iterations 29-31, log interval 1
    assert parsed.timing["slowest_rank_step_s"] == pytest.approx([5.9121, 5.5711, 5.7189], rel=1e-12)
    assert [s.slowest_rank_step_s for s in streamed] == pytest.approx([5.9121, 5.5711, 5.7189], rel=1e-12)
    outcome = measure_run(parsed)
    assert outcome.fields["median_step_s"] == pytest.approx((5.5711 + 5.7189) / 2)
    assert outcome.fields["result_extra"]["step_series"] == "megatron_interval_mean"
    assert outcome.fields["result_extra"]["framework_tflops_per_gpu"] == 228.3
    sem = outcome.fields["semantics"]
    assert sem["series_first_step"] == 28 and sem["loss"] == [1.867856, 1.924535, 1.830754]
    assert sem["samples_per_step"] == 128


def test_megatron_log_interval_of_100_with_skipped_iterations():
    _, streamed, parsed = _read("megatron", "megatron/issue449_iterations_100-200.log", warmup_steps=100)
    assert len(streamed) == 200
    assert parsed.timing["slowest_rank_step_s"] == pytest.approx([4.3201] * 100 + [4.2708] * 100, rel=1e-12)
    assert (parsed.timing["num_warmup_steps"], parsed.timing["num_measured_steps"]) == (100, 100)
    assert any("skipped 17 iteration(s)" in n for n in parsed.notes)
    assert measure_run(parsed).fields["median_step_s"] == pytest.approx(4.2708, rel=1e-12)
    with pytest.raises(RecordError, match="inside the log interval of steps 1-100"):
        _read("megatron", "megatron/issue449_iterations_100-200.log", warmup_steps=50)


def test_an_import_without_a_warmup_uses_the_design_default_with_a_note():
    _, _, parsed = _read("torchtitan", "torchtitan/run159_logfreq10.log")
    assert parsed.timing["num_warmup_steps"] == 10 and parsed.timing["num_measured_steps"] == 0
    assert any("DESIGN default of 10" in n for n in parsed.notes)
    assert any("a warmup of 10 leaves none to measure" in n for n in parsed.notes)
    assert measure_run(parsed).status == "failed"
    with pytest.raises(RecordError, match="ends at step 10, inside the log interval of steps 1-100"):
        _read("megatron", "megatron/issue449_iterations_100-200.log")


def test_a_log_with_no_metric_line():
    _, _, parsed = _read("torchtitan", "megatron/issue449_iterations_100-200.log", warmup_steps=0)
    assert parsed.num_steps == 0 and parsed.timing is None


def test_gate_rules_an_adapter_cannot_apply():
    command = ["torchrun", "-m", "torchtitan.train", "--training.steps", "{total_steps}"]
    check_gate_log_format("torchtitan", command, "fixed", None)
    with pytest.raises(ValueError, match="warmup_mode 'fixed'"):
        check_gate_log_format("torchtitan", command, "steady", None)
    with pytest.raises(ValueError, match="no measured_seconds"):
        check_gate_log_format("megatron", command, "fixed", 30.0)
    with pytest.raises(ValueError, match=r"pass \{total_steps\}"):
        check_gate_log_format("megatron", ["python", "pretrain_gpt.py"], "fixed", None)
    check_gate_log_format("record", ["python", "bench.py"], "steady", 5.0)
    with pytest.raises(ValueError, match="is not one of record, torchtitan, megatron"):
        log_parser("deepspeed")
