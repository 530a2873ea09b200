"""Bulk decoding of the bundled trainer's step lines (the importer's fast lane).

A million-step log is a million ``AXBGATE_STEP {...}`` lines of the same shape. Parsing
them one at a time costs about 15 us of Python per line (find the prefix, decode, check
every field, build a record). Here a block of such lines is decoded in ONE call of a typed
msgspec decoder, which checks in C what :func:`orchestrator.domain.record_fields.parse_step`
checks in Python: ``step`` a 64-bit integer >= 0, ``slowest_rank_step_s`` and
``rank_step_s`` finite and > 0, ``loss``/``grad_norm``/``lr`` finite numbers, ``phase``
``warmup``/``measured``, no key outside the contract. Any line the typed decoder does not
accept exactly (an unknown key, NaN, a 2^70 integer, a prefix after a launcher tag,
invalid UTF-8, ...) makes the block fall back to the line-by-line parser, which gives the
same result or the same error with its line number: the fast lane never accepts what the
slow one rejects, it only skips work for lines both accept.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["FAST_STEP_PREFIX", "MIN_BULK_LINES", "StepRow", "decode_step_block", "is_fast_step_line"]

FAST_STEP_PREFIX = b"AXBGATE_STEP {"
"""Lines the fast lane takes start exactly with this (no launcher tag, one space)."""
_BODY_AT = len(FAST_STEP_PREFIX) - 1
_MAX_FAST_LINE_BYTES = 4096
"""Longer step lines go through the line-by-line parser (which bounds them)."""
MIN_BULK_LINES = 32
"""Shorter runs of step lines are not worth a bulk call."""

StepRow = tuple[int, float, "float | None", "float | None", "float | None", "str | None"]
"""``(step, slowest_rank_step_s, rank_step_s, loss, grad_norm, phase)``, seconds."""

_Positive = Annotated[float, msgspec.Meta(gt=0.0)]


class _Step(msgspec.Struct, forbid_unknown_fields=True, array_like=False):
    """One ``AXBGATE_STEP`` record as docs/record-contract.md specifies it."""

    step: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
    slowest_rank_step_s: _Positive
    v: int | None = None
    rank_step_s: _Positive | None = None
    phase: Literal["warmup", "measured"] | None = None
    loss: float | None = None
    grad_norm: float | None = None
    lr: float | None = None


_DECODER = msgspec.json.Decoder(list[_Step])


def is_fast_step_line(line: bytes) -> bool:
    """Whether ``line`` (bytes, no newline) may go through the fast lane."""
    return line.startswith(FAST_STEP_PREFIX) and len(line) <= _MAX_FAST_LINE_BYTES and line.endswith(b"}")


def decode_step_block(lines: list[bytes]) -> list[StepRow] | None:
    """Decode a block of step lines that all pass :func:`is_fast_step_line`.

    Args:
        lines: ``AXBGATE_STEP {...}`` lines (bytes, without newline), log order.

    Returns:
        One :data:`StepRow` per line, in order; ``None`` when any line is not exactly a
        contract step record (the caller then parses the block line by line). JSON
        yields no NaN or infinity here (msgspec refuses ``NaN`` and out-of-range numbers),
        so every time is finite and > 0.
    """
    body = b"[" + b",".join([line[_BODY_AT:] for line in lines]) + b"]"
    try:
        steps = _DECODER.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if len(steps) != len(lines):  # a line held two objects: let the slow lane name it
        return None
    return [(s.step, s.slowest_rank_step_s, s.rank_step_s, s.loss, s.grad_norm, s.phase) for s in steps]
