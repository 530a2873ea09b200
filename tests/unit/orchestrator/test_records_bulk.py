"""The importer's fast lane (bulk decoding of step lines, block reading) gives exactly what
the line-by-line parser gives: the same steps, series, line numbers and first error."""

from __future__ import annotations

import io
import json
import math
import random

import pytest

from orchestrator.domain.record_bulk import decode_step_block
from orchestrator.domain.records import RecordParser
from orchestrator.executors.files import read_line_blocks, read_lines


def _step(i: int, **extra) -> bytes:
    rec = {"v": 1, "step": i, "slowest_rank_step_s": 0.43 + i * 1e-4, "rank_step_s": 0.42,
           "phase": "warmup" if i < 3 else "measured", "loss": 1.0 / (i + 1), "grad_norm": 0.5, "lr": 1e-4}
    rec.update(extra)
    return b"AXBGATE_STEP " + json.dumps(rec, allow_nan=True).encode()


def _one_by_one(lines: list[bytes]) -> tuple[RecordParser, list[tuple]]:
    parser, rows = RecordParser(keep_steps=True), []
    for line in lines:
        r = parser.feed(line)
        if r is not None:
            rows.append((r.step, r.slowest_rank_step_s, r.rank_step_s, r.loss, r.grad_norm, r.phase))
    return parser, rows


def _same(lines: list[bytes]) -> RecordParser:
    slow, slow_rows = _one_by_one(lines)
    fast = RecordParser(keep_steps=True)
    fast_rows = []
    for start in range(0, len(lines), 100):
        fast_rows.extend(fast.feed_lines(lines[start:start + 100]))
    assert fast_rows == slow_rows
    assert fast.line_no == slow.line_no == len(lines)
    assert list(fast.parsed.step_index) == list(slow.parsed.step_index)
    assert list(fast.parsed.step_slowest_s) == list(slow.parsed.step_slowest_s)
    assert [math.isnan(v) for v in fast.parsed.step_rank_s] == [math.isnan(v) for v in slow.parsed.step_rank_s]
    assert fast.parsed.steps == slow.parsed.steps
    assert fast.parsed.num_record_lines == slow.parsed.num_record_lines
    assert (fast.error is None) == (slow.error is None)
    if fast.error is not None:
        assert (fast.error.line_no, str(fast.error)) == (slow.error.line_no, str(slow.error))
    return fast


def test_plain_step_lines_take_the_bulk_lane_with_the_same_result():
    lines = [b"starting"] + [_step(i) for i in range(250)] + [b"done"]
    parser = _same(lines)
    assert parser.parsed.num_steps == 250
    assert parser.parsed.step_slowest_s[10] == pytest.approx(0.431)
    assert parser.parsed.steps[0].line_no == 2


@pytest.mark.parametrize("bad", [
    _step(7, loss=float("nan")),          # non-finite loss: kept, the run fails for it later
    _step(7, extra_key={"deep": [1]}),    # an unknown key: kept in extra
    _step(7, step=2**70),                 # beyond 64 bits: an error naming the line
    _step(7, slowest_rank_step_s=-1.0),   # must be > 0
    _step(7, phase="cooldown"),
    b"AXBGATE_STEP {\"step\": 7, \"slowest_rank_step_s\": 1e999}",
    _step(7) + b", " + _step(8)[13:],     # two objects on one line
    b"[rank0]: " + _step(7),              # a launcher tag: the line-by-line parser reads it
    _step(7)[:-1] + b", \"phase\": \"\xff\"}",  # invalid UTF-8
])
def test_any_line_the_bulk_decoder_does_not_take_exactly_goes_line_by_line(bad):
    lines = [_step(i) for i in range(7)] + [bad] + [_step(i) for i in range(8, 120)]
    _same(lines)


def test_bulk_decoder_refuses_a_block_with_one_odd_line():
    good = [_step(i) for i in range(40)]
    assert decode_step_block(good) is not None
    assert decode_step_block(good[:20] + [_step(20, x=1)] + good[21:]) is None


def test_block_reader_yields_the_lines_of_the_line_reader():
    rng = random.Random(13)
    for _ in range(2000):
        parts = [bytes(rng.choice(b"ab\r") for _ in range(rng.choice([0, 1, 5, 9, 10, 11, 30])))
                 for _ in range(rng.randint(0, 12))]
        data = b"\n".join(parts) + (b"\n" if rng.random() < 0.5 else b"")
        max_bytes, block_bytes = rng.choice([3, 5, 10]), rng.choice([1, 2, 3, 7, 16, 64])
        expected = list(read_lines(io.BytesIO(data), max_bytes))
        got = [line for block in read_line_blocks(io.BytesIO(data), max_bytes, block_bytes) for line in block]
        assert got == expected, (data, max_bytes, block_bytes)
