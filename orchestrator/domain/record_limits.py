"""Bounds on what a run may print, and the JSON loader that enforces them (pure).

Whatever a run prints is untrusted: one record line can fail that run, never the parser,
the poller or the database. The bounds (docs/record-contract.md, "Limits"):

* a record line is at most :data:`MAX_RECORD_LINE_BYTES` (1 MiB) of UTF-8 without NUL;
* its JSON nests at most :data:`MAX_JSON_DEPTH` (64) arrays/objects deep;
* strings hold no NUL and no unpaired surrogate (PostgreSQL refuses both);
* every integer fits a signed 64-bit integer (the ledger's BIGINT columns);
* numbers are finite, except the keys a caller allows (a step's ``loss``/``grad_norm``,
  where NaN is the documented "failed, not measured" signal);
* the records of one log other than step records keep at most
  :data:`MAX_RETAINED_RECORD_BYTES` (16 MiB) and :data:`MAX_HEALTH_RECORDS` health checks.

The checks cost a few string scans per line; the slow path (a walk of the decoded value)
runs only when a line contains something suspicious (long digit runs, ``NaN``,
``Infinity``, a three-digit exponent, an escaped NUL, or more than 64 brackets).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_HEALTH_RECORDS",
    "MAX_JSON_DEPTH",
    "MAX_RECORD_LINE_BYTES",
    "MAX_RETAINED_RECORD_BYTES",
    "check_int64",
    "load_record_json",
]

MAX_RECORD_LINE_BYTES = 1 << 20
"""Longest record line, bytes (1 MiB). Longer lines that start a record fail the run;
longer lines that are not records are ignored (they stay in the raw log)."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects in one record."""
INT64_MIN = -(2**63)
"""Smallest integer a record may hold (PostgreSQL BIGINT)."""
INT64_MAX = 2**63 - 1
"""Largest integer a record may hold (PostgreSQL BIGINT)."""
MAX_RETAINED_RECORD_BYTES = 16 << 20
"""Bytes of non-step records (timing, result, provenance, semantics, health) one log may
keep (16 MiB)."""
MAX_HEALTH_RECORDS = 10_000
"""Health-check records one log may hold."""

_FAST = msgspec.json.Decoder()
_FAST_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
_SUSPECT_RE = re.compile(r"\d{19}|NaN|Infinity|[eE]\+?\d{3}|\\u0000|\\u[dD][89abAB]")
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET_RE = re.compile(r"[\[\]{}]")


def check_int64(value: int) -> int:
    """Return ``value`` if it fits a signed 64-bit integer.

    Raises:
        ValueError: It does not (the message quotes at most 40 digits of it).
    """
    if not INT64_MIN <= value <= INT64_MAX:
        text = str(value) if value.bit_length() < 128 else f"{str(value)[:40]}..."
        raise ValueError(f"integer {text} is outside the signed 64-bit range "
                         f"[{INT64_MIN}, {INT64_MAX}] the ledger stores")
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise ValueError(f"integer {text[:40]}{'...' if len(text) > 40 else ''} is outside the "
                         "signed 64-bit range the ledger stores")
    return check_int64(int(text))


def _depth(body: str) -> int:
    """Deepest array/object nesting of a JSON text (brackets inside strings ignored);
    stops counting once past :data:`MAX_JSON_DEPTH`."""
    depth = deepest = 0
    for match in _BRACKET_RE.finditer(_STRING_RE.sub('""', body)):
        if match.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        else:
            depth -= 1
    return deepest


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_bad(value: Any, path: str, allowed: frozenset[str]) -> str | None:
    """Path and reason of the first non-finite number or NUL-holding string, if any."""
    if isinstance(value, float):
        if not math.isfinite(value) and path.lstrip(".") not in allowed:
            return f"{path.lstrip('.') or 'value'} is {value!r} (non-finite numbers are allowed only in " \
                   f"{', '.join(sorted(allowed)) or 'no key'})"
    elif isinstance(value, str):
        if "\x00" in value:
            return f"{path.lstrip('.') or 'value'} holds a NUL character"
        if not _utf8(value):
            return f"{path.lstrip('.') or 'value'} holds an unpaired UTF-16 surrogate"
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key or not _utf8(key):
                return f"a key under {path.lstrip('.') or 'the record'} holds a NUL character or an unpaired surrogate"
            bad = _first_bad(item, f"{path}.{key}", allowed)
            if bad:
                return bad
    elif isinstance(value, list):
        for index, item in enumerate(value):
            bad = _first_bad(item, f"{path}[{index}]", frozenset())
            if bad:
                return bad
    return None


def load_record_json(body: str, *, allow_non_finite: frozenset[str] = frozenset(),
                     strict: bool = True) -> Any:
    """Decode the JSON of one record line within the bounds of this module.

    Args:
        body: The JSON text (already known to be at most :data:`MAX_RECORD_LINE_BYTES`).
        allow_non_finite: Top-level keys whose value may be NaN or +/-Infinity.
        strict: Check every value (integers, finite numbers, strings). ``False`` checks
            only the nesting depth: for records whose fields the caller checks one by one
            and of which it stores nothing else (step records, a million per log).

    Returns:
        The decoded value.

    Raises:
        ValueError: Invalid JSON, nesting deeper than :data:`MAX_JSON_DEPTH`, an integer
            outside 64 bits, a non-finite number elsewhere than ``allow_non_finite``, or a
            NUL character or unpaired surrogate in a string; the message says which and
            where.
    """
    if body.count("[") + body.count("{") > MAX_JSON_DEPTH and _depth(body) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        if not strict or _SUSPECT_RE.search(body) is None:
            try:
                return _FAST.decode(body)
            except _FAST_ERRORS:  # NaN, 1e999 or invalid JSON: the standard parser decides
                return json.loads(body)
        value = json.loads(body, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    bad = _first_bad(value, "", allow_non_finite)
    if bad:
        raise ValueError(bad)
    return value
