"""Whatever a run prints can fail that run, never the parser: every bound of
docs/record-contract.md ("Limits") with the line it names."""

from __future__ import annotations

import io
import json
import random

import pytest

from orchestrator.domain.errors import RecordError
from orchestrator.domain.measure import measure_run
from orchestrator.domain.record_limits import (
    MAX_HEALTH_RECORDS,
    MAX_JSON_DEPTH,
    MAX_RECORD_LINE_BYTES,
    load_record_json,
)
from orchestrator.domain.records import RecordParser, parse
from orchestrator.executors.files import read_lines

GOOD_STEP = b'AXBGATE_STEP {"v":1,"step":0,"slowest_rank_step_s":0.5}'

# What the house rule names: each is printed as the 2nd line of a run (bytes, as the
# driver's pump and the importer hand them over) and must fail with "line 2".
BAD_LINES = {
    "deep_nesting_unclosed": b'AXBGATE_STEP {"v":1,"step":1,"x":' + b"[" * 100_000,
    "deep_nesting_closed": b'AXBGATE_STEP {"v":1,"step":1,"slowest_rank_step_s":0.5,"x":'
                           + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "int_2_70_step": b'AXBGATE_STEP {"v":1,"step":1180591620717411303424,"slowest_rank_step_s":0.5}',
    "int_2_70_nested": b'AXBGATE_PROVENANCE {"v":1,"recipe":{"a":[1,2,1180591620717411303424]}}',
    "int_2_70_float_form": b'AXBGATE_RESULT {"v":1,"median_step_s":0.5,"world_size":1.1805916207174113e21,'
                           b'"local_batch_size":1,"grad_accum_steps":1}',
    "huge_digits": b'AXBGATE_PROVENANCE {"v":1,"n":' + b"9" * 5000 + b"}",
    "nan_step_time": b'AXBGATE_STEP {"v":1,"step":1,"slowest_rank_step_s":NaN}',
    "infinity_result": b'AXBGATE_RESULT {"v":1,"median_step_s":Infinity,"world_size":1,'
                       b'"local_batch_size":1,"grad_accum_steps":1}',
    "overflow_float": b'AXBGATE_RESULT {"v":1,"median_step_s":0.5,"world_size":1,"local_batch_size":1,'
                      b'"grad_accum_steps":1,"mfu_pct":1e999}',
    "nan_in_provenance": b'AXBGATE_PROVENANCE {"v":1,"clock":-Infinity}',
    "ten_mb_line": b'AXBGATE_PROVENANCE {"v":1,"blob":"' + b"x" * 10_000_000 + b'"}',
    "invalid_utf8": b'AXBGATE_PROVENANCE {"v":1,"host":"n\xff\xfe0"}',
    "nul_byte": b'AXBGATE_PROVENANCE {"v":1,"host":"n\x000"}',
    "nul_escape": b'AXBGATE_PROVENANCE {"v":1,"host":"n\\u00000"}',
    "lone_surrogate": b'AXBGATE_PROVENANCE {"v":1,"host":"n\\ud800"}',
    "harness_2_70": b'BF16_RESULT {"true_wall_median_step_sec":0.5,"world_size":1180591620717411303424}',
    "harness_deep": b"BF16_SEMANTICS " + b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "long_phase": b'AXBGATE_STEP {"v":1,"step":1,"slowest_rank_step_s":0.5,"phase":"' + b"p" * 100 + b'"}',
    "bad_allocation": b'AXBGATE_ALLOCATION {"v":1,"health_verdict":"healthy","gpu_model":"' + b"g" * 500 + b'"}',
    "long_source_sha": b'AXBGATE_PROVENANCE {"v":1,"source_sha":"' + b"a" * 65 + b'"}',
}


def _parse_bytes(lines: list[bytes]) -> RecordParser:
    parser = RecordParser()
    for line in read_lines(io.BytesIO(b"\n".join(lines) + b"\n")):
        parser.feed(line)
    return parser


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_bad_record_fails_naming_its_line(name):
    parser = _parse_bytes([GOOD_STEP, BAD_LINES[name], b'AXBGATE_STEP {"v":1,"step":2,"slowest_rank_step_s":0.5}'])
    with pytest.raises(RecordError) as err:
        parser.finish()
    assert err.value.line_no == 2, err.value
    assert len(str(err.value)) < 600  # a reason, not an echo of the line
    # What came before and after the bad line was still read.
    assert list(parser.parsed.step_index) == [0, 2]


@pytest.mark.parametrize("name,fragment", [
    ("deep_nesting_unclosed", f"deeper than {MAX_JSON_DEPTH}"),
    ("int_2_70_step", "64-bit"), ("int_2_70_nested", "64-bit"), ("int_2_70_float_form", "64-bit"),
    ("nan_step_time", "slowest_rank_step_s must be a positive finite number of seconds, got nan"), ("infinity_result", "median_step_s is inf"),
    ("overflow_float", "mfu_pct is inf"), ("ten_mb_line", "limit is 1048576 bytes"),
    ("invalid_utf8", "not valid UTF-8 (byte 0xff"), ("nul_byte", "NUL"), ("nul_escape", "NUL"),
    ("lone_surrogate", "surrogate"), ("bad_allocation", "gpu_model"),
])
def test_bad_record_reason(name, fragment):
    with pytest.raises(RecordError, match="line 2") as err:
        _parse_bytes([GOOD_STEP, BAD_LINES[name]]).finish()
    assert fragment in str(err.value)


def test_nan_loss_is_the_documented_failed_run_signal_not_a_parse_error():
    parsed = parse('AXBGATE_STEP {"v":1,"step":0,"slowest_rank_step_s":0.5,"loss":NaN,"grad_norm":Infinity}\n'
                   'AXBGATE_TIMING {"v":1,"num_warmup_steps":0,"num_measured_steps":1}')
    outcome = measure_run(parsed)
    assert outcome.status == "failed" and outcome.error == "non-finite loss (nan) at step 0 (log line 1)"


def test_non_record_lines_of_any_content_are_ignored():
    noise = [b"\xff\xfe garbage \x00 bytes", b"x" * (3 * MAX_RECORD_LINE_BYTES), b"[" * 200_000,
             b"progress: BF16_STEP mentioned in prose", b"\x00" * 100, b"AXBGATE_STEPS {}"]
    parser = _parse_bytes([GOOD_STEP, *noise, GOOD_STEP.replace(b'"step":0', b'"step":1')])
    parsed = parser.finish()
    assert list(parsed.step_index) == [0, 1] and parsed.num_record_lines == 2
    assert parser.line_no == 8


def test_overlong_lines_never_grow_memory_past_the_bound():
    data = b"head\n" + b"y" * (5 * MAX_RECORD_LINE_BYTES) + b"\ntail"
    lines = list(read_lines(io.BytesIO(data)))
    assert [len(line) for line in lines] == [4, MAX_RECORD_LINE_BYTES + 1, 4]


def test_too_many_health_records_and_too_much_provenance():
    lines = [b'AXBGATE_HEALTH {"v":1,"check":"c","status":"PASS"}'] * (MAX_HEALTH_RECORDS + 1)
    with pytest.raises(RecordError, match=f"line {MAX_HEALTH_RECORDS + 1}: more than"):
        _parse_bytes(lines).finish()
    blob = b'AXBGATE_PROVENANCE {"v":1,"blob":"' + b"z" * 900_000 + b'"}'
    with pytest.raises(RecordError, match="line 19: .*exceed 16777216 bytes"):
        _parse_bytes([blob] * 20).finish()


def test_loader_accepts_what_is_in_bounds():
    assert load_record_json('{"a":' * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH) is not None
    assert load_record_json('{"n": 9223372036854775807, "m": -9223372036854775808}')["n"] == 2**63 - 1
    assert load_record_json('{"s": "brackets [[[[ inside a string ]]]] ' + "[" * 100 + '"}')["s"]
    assert load_record_json('{"loss": NaN}', allow_non_finite=frozenset({"loss"}))["loss"] != 0
    with pytest.raises(ValueError, match="64-bit"):
        load_record_json('{"n": 9223372036854775808}')


def test_random_bytes_never_raise_from_feed():
    rng = random.Random(13)
    parser = RecordParser()
    alphabet = b'AXBGATE_STEP BF16_RESULT HEALTH_GATE {}[]":,0123456789.eE+-NaInfity\\u\x00\xff\n'
    for _ in range(3000):
        line = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        parser.feed(line.replace(b"\n", b" "))
        parser.feed(("AXBGATE_STEP " + json.dumps({"step": rng.randint(-5, 5), "x": rng.random()})).encode())
    assert parser.line_no == 6000


def test_trainer_timing_record_of_a_long_run_fits_the_line_limit():
    from trainer import records as trainer_records

    n, out = 80_000, io.StringIO()
    for i in range(n):
        trainer_records.emit("AXBGATE_STEP", {"step": i, "slowest_rank_step_s": 0.4 + i * 1e-9}, out)
    trainer_records.emit_timing({"slowest_rank_step_s": [0.4 + i * 1e-9 for i in range(n)],
                                 "num_warmup_steps": 10, "num_measured_steps": n - 10,
                                 "per_rank_step_s": [[0.4] * n] * 8}, out)
    parsed = parse(out.getvalue())
    assert parsed.timing["slowest_rank_step_s"] is None  # left out; the step records carry it
    outcome = measure_run(parsed)
    assert outcome.status == "succeeded" and len(outcome.fields["slowest_rank_step_s"]) == n
