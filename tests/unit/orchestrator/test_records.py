"""Record-contract parser: both dialects, every error path."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from orchestrator.domain.errors import RecordError
from orchestrator.domain.records import parse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _line(prefix: str, **obj) -> str:
    return f"{prefix} {json.dumps(obj)}"


def _product_log(times, warmup=2, measured=3, **result):
    lines = ["starting"]
    lines.append(_line("AXBGATE_PROVENANCE", v=1, torch_version="2.13.0", hostnames=["n0"]))
    for i, t in enumerate(times):
        lines.append("[rank0]: " + _line("AXBGATE_STEP", v=1, step=i, slowest_rank_step_s=t, loss=1.0, grad_norm=0.5))
    lines.append(_line("AXBGATE_TIMING", v=1, slowest_rank_step_s=times,
                       num_warmup_steps=warmup, num_measured_steps=measured))
    res = dict(v=1, median_step_s=statistics.median(times[warmup:warmup + measured]),
               world_size=2, local_batch_size=1, grad_accum_steps=1, custom_key="kept")
    res.update(result)
    lines.append(_line("AXBGATE_RESULT", **res))
    return "\n".join(lines) + "\n"


def test_product_dialect_round_trip():
    parsed = parse(_product_log([2.0, 1.0, 0.5, 0.6, 0.7]))
    assert parsed.dialect == "axbgate"
    assert [s.step for s in parsed.steps] == [0, 1, 2, 3, 4]
    assert parsed.slowest_rank_step_s() == [2.0, 1.0, 0.5, 0.6, 0.7]
    assert parsed.num_warmup_steps() == 2 and parsed.num_measured_steps() == 3
    assert parsed.result["median_step_s"] == pytest.approx(0.6)
    assert parsed.result["custom_key"] == "kept"  # unknown keys are kept
    assert parsed.provenance["torch_version"] == "2.13.0"
    assert parsed.num_record_lines == 8


def test_harness_dialect_fixture():
    parsed = parse((FIXTURES / "harness_bf16.log").read_text())
    assert parsed.dialect == "bf16"
    assert len(parsed.steps) == 30
    assert parsed.num_warmup_steps() == 10 and parsed.num_measured_steps() == 20
    assert parsed.result["median_step_s"] == pytest.approx(0.428860612, abs=1e-12)
    assert parsed.result["world_size"] == 8
    assert parsed.result["peak_allocated_bytes"] == 61234567890
    assert parsed.provenance["bf16_semantics"]["reduce_dtype"] == "float32"
    assert [h.check for h in parsed.health] == ["scalar", "sustained_all_reduce"]
    assert parsed.health[1].measured["slowest_rank_bus_gbps"] == pytest.approx(463.2)
    assert parsed.steps[0].phase == "warmup" and parsed.steps[10].phase == "measured"


def test_harness_timing_without_list_uses_step_lines():
    text = "\n".join(
        [_line("BF16_STEP", step=i, true_wall_slowest_rank_sec=0.1 + i) for i in range(3)]
        + [_line("BF16_TIMING", warmup_steps=1, measured_steps=2)]
    )
    parsed = parse(text)
    assert parsed.slowest_rank_step_s() == [0.1, 1.1, 2.1]


def test_non_record_lines_and_lookalikes_are_ignored():
    text = "XAXBGATE_STEP {}\nnothing here\nAXBGATE_STEPS {} x\nAXBGATE_STEP lines follow\n"
    parsed = parse(text)
    assert parsed.num_record_lines == 0 and parsed.dialect is None


def test_nan_loss_is_parsed_not_rejected():
    parsed = parse('AXBGATE_STEP {"v":1,"step":0,"slowest_rank_step_s":0.5,"loss":NaN}')
    assert parsed.steps[0].loss != parsed.steps[0].loss


@pytest.mark.parametrize(
    "text, line_no, fragment",
    [
        ("ok\nAXBGATE_STEP {not json", 2, "invalid JSON"),
        ("AXBGATE_STEP [1, 2]", 1, "JSON object"),
        ("AXBGATE_STEP {\"step\": 0}", 1, "slowest_rank_step_s"),
        ("AXBGATE_STEP {\"step\": 0, \"slowest_rank_step_s\": \"fast\"}", 1, "must be a number"),
        ("AXBGATE_STEP {\"step\": 1.5, \"slowest_rank_step_s\": 1}", 1, "integer"),
        ("AXBGATE_STEP {\"step\": 0, \"slowest_rank_step_s\": -1}", 1, "positive"),
        ("a\nb\nAXBGATE_TIMING {\"slowest_rank_step_s\": [1], \"num_warmup_steps\": 0}", 3,
         "num_measured_steps"),
        ("AXBGATE_TIMING {\"slowest_rank_step_s\": [], \"num_warmup_steps\": 0, \"num_measured_steps\": 0}",
         1, "non-empty"),
        ("AXBGATE_TIMING {\"slowest_rank_step_s\": [1, \"x\"], \"num_warmup_steps\": 0, \"num_measured_steps\": 1}",
         1, "slowest_rank_step_s[1]"),
        ("AXBGATE_RESULT {\"median_step_s\": 1, \"world_size\": 1, \"local_batch_size\": 1}", 1,
         "grad_accum_steps"),
        ("AXBGATE_HEALTH {\"check\": \"scalar\", \"status\": \"MAYBE\"}", 1, "health status"),
        ("AXBGATE_HEALTH {\"status\": \"PASS\"}", 1, "check"),
        ("AXBGATE_ALLOCATION {\"hostnames\": []}", 1, "health_verdict"),
        ("BF16_STEP {\"step\": 0}", 1, "true_wall_slowest_rank_sec"),
        ("HEALTH_GATE {\"p50_ms\": 1}", 1, "phase"),
    ],
)
def test_malformed_lines_name_the_line(text, line_no, fragment):
    with pytest.raises(RecordError) as info:
        parse(text)
    assert info.value.line_no == line_no
    assert fragment in str(info.value)


def test_second_timing_record_is_an_error():
    line = _line("AXBGATE_TIMING", slowest_rank_step_s=[1.0], num_warmup_steps=0, num_measured_steps=1)
    with pytest.raises(RecordError, match="line 2: second AXBGATE_TIMING"):
        parse(line + "\n" + line)


def test_failed_result_needs_no_median():
    parsed = parse(_line("AXBGATE_RESULT", status="failed", error="CUDA OOM"))
    assert parsed.result["status"] == "failed" and parsed.result["error"] == "CUDA OOM"
