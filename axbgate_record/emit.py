"""Record lines of docs/record-contract.md (v1): ``PREFIX {json}``, one per line, flushed.

The same format as the bundled trainer's ``trainer/records.py``: ``"v": 1`` first, compact
JSON; a non-finite loss is written as ``NaN`` / ``Infinity`` (Python's ``json`` extension,
which the parser reads) so the run is failed for it, not misread.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

__all__ = ["MAX_RECORD_LINE_BYTES", "RECORD_VERSION", "emit", "emit_timing", "format_record"]

RECORD_VERSION = 1
MAX_RECORD_LINE_BYTES = 1 << 20
"""Longest record line the parser accepts (docs/record-contract.md, Limits)."""


def format_record(prefix: str, payload: dict[str, Any]) -> str:
    """One record line: prefix, space, compact JSON with ``"v": 1`` first."""
    return f"{prefix} {json.dumps({'v': RECORD_VERSION, **payload}, separators=(',', ':'))}"


def emit(prefix: str, payload: dict[str, Any], stream: TextIO | None = None) -> None:
    """Print one record line and flush (stdout unless ``stream`` is given)."""
    out = stream or sys.stdout
    out.write(format_record(prefix, payload) + "\n")
    out.flush()


def emit_timing(payload: dict[str, Any], stream: TextIO | None = None) -> None:
    """Print ``AXBGATE_TIMING``, leaving out ``per_rank_step_s`` and then
    ``slowest_rank_step_s`` when the line would pass 1 MiB (the step records carry the
    same series)."""
    for drop in ((), ("per_rank_step_s",), ("per_rank_step_s", "slowest_rank_step_s")):
        kept = {k: v for k, v in payload.items() if k not in drop}
        if len(format_record("AXBGATE_TIMING", kept).encode()) < MAX_RECORD_LINE_BYTES:
            break
    emit("AXBGATE_TIMING", kept, stream)
