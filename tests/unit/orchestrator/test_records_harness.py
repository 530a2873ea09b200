"""The parser reads every variant of the LTX-2 MFU harness (logs written from the formats of
shared/seed_harness, see tests/harness_logs.py) and its health probe."""

from __future__ import annotations

import statistics

import pytest

from orchestrator.domain.measure import measure_run
from orchestrator.domain.records import health_check_rows, parse
from tests.harness_logs import (
    FULL_VARIANTS,
    SHORT_VARIANTS,
    VARIANTS,
    expected,
    health_log,
    rank_times,
    variant_log,
)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_parses_and_measures(variant):
    parsed = parse(variant_log(variant))
    want = expected(variant)
    assert parsed.dialect == "bf16"
    assert parsed.num_steps == 30 and [s.step for s in parsed.steps] == list(range(1, 31))
    # BF16_STEP carries rank 0's own step_time_sec: kept as the rank time, never as the
    # slowest rank's.
    world = 1 if variant == "train_1x" else 8
    assert [s.rank_step_s for s in parsed.steps] == rank_times(world)[0]
    assert all(s.slowest_rank_step_s is None for s in parsed.steps)
    outcome = measure_run(parsed)
    assert outcome.status == "succeeded", outcome.error
    fields = outcome.fields
    assert fields["result_extra"]["step_series"] == want["source"]
    assert fields["num_warmup_steps"] == 10 and fields["num_measured_steps"] == 20
    if want["source"] == "rank0":  # stored as rank 0's, the median is the harness's slowest-rank one
        assert fields["slowest_rank_step_s"] == []
        assert fields["result_extra"]["rank0_step_s"] == want["series"]
        assert fields["median_step_s"] == want["log_median"]
    else:
        assert fields["slowest_rank_step_s"] == want["series"]
        assert fields["median_step_s"] == statistics.median(want["series"][10:30])
    assert outcome.log_median_step_s == want["log_median"]
    assert fields["mfu_pct"] == pytest.approx(parsed.result["mfu_pct"])


@pytest.mark.parametrize("variant", FULL_VARIANTS)
def test_true_wall_series_is_authoritative_and_its_median_is_the_harness_median(variant):
    parsed = parse(variant_log(variant))
    want = expected(variant)
    outcome = measure_run(parsed)
    # Recomputed from true_wall_slowest_rank_sec, the median IS the harness's own
    # true_wall_median_step_sec (same statistics.median over steps 10..29).
    assert outcome.fields["median_step_s"] == parsed.result["median_step_s"]
    assert outcome.fields["median_step_s"] == want["log_median"]
    assert outcome.median_mismatch is False
    assert outcome.fields["result_extra"]["internal_slowest_rank_step_s"] == want["internal"]
    assert outcome.fields["result_extra"]["internal_median_step_sec"] == statistics.median(want["internal"][10:])
    assert outcome.fields["result_extra"]["timing_extra"] == {"final_cuda_sync": True}
    assert outcome.fields["world_size"] == 8
    assert outcome.fields.get("peak_allocated_bytes") == (None if variant == "grad_norm_sync" else 151234567890)
    assert "bf16_semantics" in outcome.fields["provenance"]
    assert "bf16_setup" in outcome.fields["provenance"]
    assert "the LTX-2 harness's fixed 10 warmup + 20 measured steps" in " ".join(outcome.notes)


def test_pack_variant_batch_and_samples():
    outcome = measure_run(parse(variant_log("pack_d016")))
    assert outcome.fields["local_batch_size"] == 2 and outcome.fields["grad_accum_steps"] == 1
    assert outcome.fields["samples_per_s"] == pytest.approx(8 * 2 / outcome.fields["median_step_s"])
    assert outcome.fields["provenance"]["bf16_semantics"]["by_rank"][3]["rank"] == 3


@pytest.mark.parametrize("variant", [v for v in SHORT_VARIANTS if v != "train_1x"])
def test_step_only_logs_say_the_series_is_rank0(variant):
    outcome = measure_run(parse(variant_log(variant)))
    assert outcome.status == "succeeded"
    assert outcome.fields["result_extra"]["step_series"] == "rank0"
    assert any("rank 0's own step time" in n and "not the slowest rank's" in n for n in outcome.notes)
    # The harness's own median is the slowest rank's (all ranks' timers): it is the run's.
    assert outcome.median_mismatch is False
    assert outcome.fields["result_extra"]["median_source"] == "harness_slowest_rank"
    # A gate measures the slowest rank: there the same log fails with the reason.
    gate = measure_run(parse(variant_log(variant)), expected_warmup_steps=10, expected_measured_steps=20,
                       require_slowest_rank=True)
    assert gate.status == "failed" and "rank 0's own step time" in gate.error


def test_single_gpu_variant_reads_its_peak_and_needs_no_note():
    parsed = parse(variant_log("train_1x"))
    outcome = measure_run(parsed)
    assert outcome.fields["peak_allocated_bytes"] == round(71.234567 * 2**30)
    assert outcome.fields["world_size"] == 1
    assert outcome.fields["result_extra"]["step_series"] == "slowest_rank"
    assert outcome.median_mismatch is False
    assert not any("rank 0's own" in n for n in outcome.notes)


def test_only_step_lines_import_with_the_harness_counts():
    text = "".join(line + "\n" for line in variant_log("train").splitlines() if line.startswith("BF16_STEP"))
    outcome = measure_run(parse(text))
    assert outcome.status == "succeeded" and outcome.fields["result_extra"]["step_series"] == "rank0"
    assert outcome.log_median_step_s is None
    # No harness median to take: rank 0's median stays the run's, labelled as rank 0's.
    extra = outcome.fields["result_extra"]
    assert extra["median_source"] == "rank0" and outcome.fields["slowest_rank_step_s"] == []
    assert outcome.fields["median_step_s"] == statistics.median(rank_times()[0][10:30])
    assert extra["rank0_median_step_s"] == outcome.fields["median_step_s"]


def test_rank0_steps_with_harness_result_take_the_slowest_rank_median():
    """Issue 24 point 7: benchmark_fastvideo_train.py's log (BF16_STEP of rank 0, then a
    BF16_RESULT whose median_step_sec is the median of the per-step max over all ranks)."""
    per_rank = rank_times(8)
    slowest = [max(col) for col in zip(*per_rank, strict=True)]
    harness_median = statistics.median(slowest[10:30])
    rank0_median = statistics.median(per_rank[0][10:30])
    assert harness_median > rank0_median  # rank 3 is the slowest: the two differ (a real bias)
    outcome = measure_run(parse(variant_log("train")))
    assert outcome.status == "succeeded", outcome.error
    fields = outcome.fields
    assert fields["median_step_s"] == harness_median
    extra = fields["result_extra"]
    assert extra["rank0_median_step_s"] == rank0_median
    assert extra["rank0_step_s"] == per_rank[0] and fields["slowest_rank_step_s"] == []
    assert extra["step_series"] == "rank0" and extra["median_source"] == "harness_slowest_rank"
    assert any("harness's slowest-rank median" in n for n in outcome.notes)
    assert fields["mfu_pct"] == pytest.approx(14.444115 / harness_median)


def test_variant_specific_keys_are_kept():
    knobs = measure_run(parse(variant_log("fsdp_knobs"))).fields
    assert knobs["result_extra"]["prefetch_depth"] == 2 and knobs["peak_reserved_bytes"] == 162345678901
    assert knobs["provenance"]["bf16_fsdp_knobs"]["module_count"] == 49
    auto = measure_run(parse(variant_log("max_autotune"))).fields
    assert auto["result_extra"]["kind"] == "regional_max_autotune_no_cudagraphs"
    assert auto["provenance"]["bf16_compile_mode"]["calls"] == 48
    buckets = measure_run(parse(variant_log("fsdp_buckets"))).fields
    assert buckets["provenance"]["bf16_bucket_plan"]["communication_group_count"] == 25
    raw = measure_run(parse(variant_log("raw_velocity"))).fields
    assert raw["provenance"]["bf16_variant"]["raw_velocity"] is True


def test_health_probe_lines_are_checks_with_their_busbw():
    parsed = parse(health_log(world=8, busbw_gbps=463.2))
    rows = health_check_rows(parsed)
    assert len(rows) == 16
    assert [r["name"] for r in rows] == ["scalar"] * 8 + ["sustained_all_reduce"] * 8
    assert {r["status"] for r in rows} == {"PASS"}
    sustained = rows[8:]
    assert [r["measured"]["slowest_rank_bus_gbps"] for r in sustained] == [463.2] * 8
    assert [r["measured"]["rank"] for r in sustained] == list(range(8))
    assert sustained[0]["measured"]["p50_ms"] == pytest.approx(0.929)
    assert {r["host"] for r in rows} == {"gb200-tray17", "gb200-tray18"}
    assert rows[0]["measured"]["expected"] == 36.0


def test_health_probe_wrong_scalar_sum_fails_the_check():
    rows = health_check_rows(parse(health_log(world=8, scalar_sum=35.0)))
    assert {r["status"] for r in rows[:8]} == {"FAIL"}
    assert "expected 36" in rows[0]["message"]
