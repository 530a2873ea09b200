"""Record-contract parser: lines in, records out (pure, streaming).

Reads the product dialect (``AXBGATE_STEP``, ``AXBGATE_TIMING``, ``AXBGATE_RESULT``,
``AXBGATE_PROVENANCE``, ``AXBGATE_HEALTH``, ``AXBGATE_ALLOCATION``, ``AXBGATE_SEMANTICS``) and
every variant of
the LTX-2 MFU harness dialect (``BF16_STEP``, ``BF16_TIMING``, ``BF16_RESULT``,
``BF16_SEMANTICS``, ``HEALTH_GATE``, plus its informational ``BF16_SETUP``,
``BF16_BUCKET_PLAN``, ``BF16_FSDP_KNOBS``, ``BF16_COMPILE_MODE``, ``BF16_VARIANT`` and
``BF16_PEAK_GIB``). The contract is specified in ``docs/record-contract.md`` (DESIGN.md
section 7); the field rules live in :mod:`orchestrator.domain.record_fields` and the bounds
(line length, nesting, 64-bit integers, finite numbers, UTF-8 without NUL) in
:mod:`orchestrator.domain.record_limits`. Unknown keys are kept, never dropped. No I/O:
callers read the file (line by line) and hash it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from orchestrator.domain.errors import RecordError
from orchestrator.domain.record_bulk import MIN_BULK_LINES, StepRow, decode_step_block, is_fast_step_line
from orchestrator.domain.record_fields import (
    HARNESS_MEASURED_KEYS,
    HARNESS_WARMUP_KEYS,
    check_provenance,
    parse_allocation,
    parse_health,
    parse_result,
    parse_step,
    parse_timing,
)
from orchestrator.domain.record_limits import (
    MAX_HEALTH_RECORDS,
    MAX_RECORD_LINE_BYTES,
    MAX_RETAINED_RECORD_BYTES,
    load_record_json,
)
from orchestrator.domain.record_semantics import harness_semantics, parse_semantics
from orchestrator.domain.record_types import HealthRecord, ParsedLog, StepRecord, StepSeries

__all__ = [
    "HARNESS_INFO_PREFIXES",
    "MAX_RECORD_LINE_BYTES",
    "RECORD_PREFIXES",
    "HealthRecord",
    "ParsedLog",
    "RecordParser",
    "StepRecord",
    "StepSeries",
    "health_check_rows",
    "parse",
    "step_row",
]

RECORD_PREFIXES = (
    "AXBGATE_STEP",
    "AXBGATE_TIMING",
    "AXBGATE_RESULT",
    "AXBGATE_PROVENANCE",
    "AXBGATE_HEALTH",
    "AXBGATE_ALLOCATION",
    "AXBGATE_TIMELINE",
    "AXBGATE_SEMANTICS",
    "BF16_STEP",
    "BF16_TIMING",
    "BF16_RESULT",
    "BF16_SEMANTICS",
    "HEALTH_GATE",
)
HARNESS_INFO_PREFIXES = (
    "BF16_SETUP",
    "BF16_BUCKET_PLAN",
    "BF16_FSDP_KNOBS",
    "BF16_COMPILE_MODE",
    "BF16_VARIANT",
)
"""Harness records kept as provenance under their lower-case prefix."""

# A prefix may follow a launcher tag such as "[rank0]:" or "[default0]:" but must start
# a whitespace/colon-delimited token, so "XBF16_STEP" is not a record, and must be
# followed by a JSON value, so prose that mentions a prefix is not a record either.
# Found with str.find (C speed) and matched only where a prefix starts: a million-line
# log costs one find per marker per line, not a regex search over every position.
_PREFIX_GROUP = "|".join(RECORD_PREFIXES + HARNESS_INFO_PREFIXES)
_AT_RE = re.compile(r"(?P<prefix>" + _PREFIX_GROUP + r")\b[\s:=]*(?P<body>[\[{].*)$")
_MARKERS = ("AXBGATE_", "BF16_", "HEALTH_GATE")
_PEAK_GIB_RE = re.compile(r"(?:^|[\s:\]])BF16_PEAK_GIB\s+(?P<gib>[0-9]+(?:\.[0-9]*)?)\s*$")
_STEP_NON_FINITE = frozenset({"loss", "grad_norm"})
_KINDS = {p: ("HEALTH" if p == "HEALTH_GATE" else p.split("_", 1)[1], not p.startswith("AXBGATE_"))
          for p in RECORD_PREFIXES + HARNESS_INFO_PREFIXES}
"""Prefix -> (record kind, harness dialect)."""
_HEAD_CHARS = 4096


def _find_record(line: str) -> re.Match[str] | None:
    """The leftmost record prefix of ``line`` that starts a token and is followed by JSON."""
    best = None
    for marker in _MARKERS:
        pos = line.find(marker)
        while pos >= 0 and (best is None or pos < best.start()):
            if pos == 0 or line[pos - 1] in ":]" or line[pos - 1].isspace():
                match = _AT_RE.match(line, pos)
                if match is not None:
                    best = match
                    break
            pos = line.find(marker, pos + 1)
    return best


class RecordParser:
    """Incremental parser: feed lines as a run prints them, then :meth:`finish`.

    The driver feeds every output line while the run is going (so step records can be
    streamed to the gate folder as they arrive) and gets the :class:`ParsedLog` at the
    end: each line is parsed exactly once. Importers feed a file line by line. Memory
    stays small: step records are handed back, not kept (the log keeps 24 bytes per step
    for measuring), and other records are bounded (:mod:`record_limits`).

    The first malformed record line is remembered (``error``) and later lines are still
    read, so what was printed before the bad line is kept; :meth:`finish` raises it.
    Nothing a line holds makes the parser itself raise.

    Args:
        keep_steps: Also keep every :class:`StepRecord` in ``parsed.steps`` (small logs).
        first_line_no: Line number of the first line fed (2 when the log file holds a
            header line the parser is not fed), so errors name the line of the file.
    """

    def __init__(self, *, keep_steps: bool = False, first_line_no: int = 1) -> None:
        self.parsed = ParsedLog()
        self.error: RecordError | None = None
        self.keep_steps = keep_steps
        self.line_no = first_line_no - 1
        """Lines fed so far (the 1-based number of the last one)."""
        self._dialects: set[str] = set()
        self._retained_bytes = 0
        self._peak_gib: float | None = None

    def _fail(self, exc: RecordError) -> None:
        if self.error is None:
            self.error = exc

    def feed(self, line: str | bytes) -> StepRecord | None:
        """Parse one line (without its newline).

        Args:
            line: The line as text, or as the raw bytes the run printed (then a record
                line that is not valid UTF-8 is an error; other lines are ignored).

        Returns:
            The step record when the line is a valid step record, else ``None``.
        """
        self.line_no += 1
        try:
            return self._feed(line)
        except RecordError as exc:
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001 - whatever a line holds fails the run, not the parser
            self._fail(RecordError(self.line_no, f"unreadable record ({type(exc).__name__}: {str(exc)[:200]})"))
        return None

    def feed_lines(self, lines: list[bytes]) -> list[StepRow]:
        """Parse a block of lines (bytes, without newlines), as :meth:`feed` would one by one.

        Runs of at least :data:`~orchestrator.domain.record_bulk.MIN_BULK_LINES` plain
        ``AXBGATE_STEP`` lines are decoded in one typed call
        (:mod:`orchestrator.domain.record_bulk`); a run the bulk decoder does not accept
        exactly, and every other line, goes through :meth:`feed`. The parsed log, line
        numbers and the first error are the same either way.

        Returns:
            The step rows of the block's valid step records, log order:
            ``(step, slowest_rank_step_s, rank_step_s, loss, grad_norm, phase)``.
        """
        rows: list[StepRow] = []
        start, n = 0, len(lines)
        while start < n:
            end = start
            while end < n and is_fast_step_line(lines[end]):
                end += 1
            if end - start >= MIN_BULK_LINES and self.error is None:
                bulk = decode_step_block(lines[start:end])
                if bulk is not None:
                    self._add_bulk(bulk)
                    rows.extend(bulk)
                    start = end
            for line in lines[start:max(end, start + 1)]:
                record = self.feed(line)
                if record is not None:
                    rows.append((record.step, record.slowest_rank_step_s, record.rank_step_s,
                                 record.loss, record.grad_norm, record.phase))
            start = max(end, start + 1)
        return rows

    def _add_bulk(self, rows: list[StepRow]) -> None:
        parsed, first = self.parsed, self.line_no + 1
        self.line_no += len(rows)
        parsed.num_record_lines += len(rows)
        self._dialects.add("axbgate")
        parsed.step_index.extend([r[0] for r in rows])
        parsed.step_slowest_s.extend([r[1] for r in rows])
        parsed.step_rank_s.extend([math.nan if r[2] is None else r[2] for r in rows])
        if self.keep_steps:
            parsed.steps.extend(StepRecord(first + i, *row) for i, row in enumerate(rows))

    def feed_overlong(self, head: str | bytes, size_bytes: int) -> None:
        """Count one line that was longer than :data:`MAX_RECORD_LINE_BYTES` and of
        which only ``head`` was kept: an error if it starts a record, else ignored."""
        self.line_no += 1
        self._overlong(head, size_bytes)

    def _overlong(self, head: str | bytes, size_bytes: int) -> None:
        if isinstance(head, bytes):
            head = head[:_HEAD_CHARS].decode("utf-8", "replace")
        if _find_record(head[:_HEAD_CHARS]) or _PEAK_GIB_RE.search(head[:_HEAD_CHARS]):
            self._fail(RecordError(self.line_no, f"record line is {size_bytes} bytes; the limit is "
                                                 f"{MAX_RECORD_LINE_BYTES} bytes (1 MiB) per record line "
                                                 "(docs/record-contract.md, Limits)"))

    def _feed(self, line: str | bytes) -> StepRecord | None:
        if isinstance(line, bytes):
            if b"_" not in line:
                return None
            if len(line) > MAX_RECORD_LINE_BYTES:
                self._overlong(line[:_HEAD_CHARS], len(line))
                return None
            if b"AXBGATE_" not in line and b"BF16_" not in line and b"HEALTH_GATE" not in line:
                return None
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordError(self.line_no, f"record line is not valid UTF-8 (byte 0x{line[exc.start]:02x} "
                                                f"at column {exc.start + 1})") from None
        elif "AXBGATE_" not in line and "BF16_" not in line and "HEALTH_GATE" not in line:
            return None
        elif len(line) > MAX_RECORD_LINE_BYTES // 4 and len(line.encode("utf-8", "surrogatepass")) > MAX_RECORD_LINE_BYTES:
            self._overlong(line[:_HEAD_CHARS], len(line.encode("utf-8", "surrogatepass")))
            return None
        match = _find_record(line)
        if match is None:
            peak = _PEAK_GIB_RE.search(line) if "BF16_PEAK_GIB" in line else None
            if peak is not None:
                self._peak_gib = float(peak["gib"])
                self._dialects.add("bf16")
                self.parsed.num_record_lines += 1
            return None
        if "\x00" in line:
            raise RecordError(self.line_no, "record line holds a NUL character")
        return self._record(match["prefix"], match["body"])

    def _retain(self, body: str, prefix: str) -> None:
        self._retained_bytes += len(body)
        if self._retained_bytes > MAX_RETAINED_RECORD_BYTES:
            raise RecordError(self.line_no, f"{prefix}: the log's records other than steps exceed "
                                            f"{MAX_RETAINED_RECORD_BYTES} bytes (16 MiB)")

    def _record(self, prefix: str, body: str) -> StepRecord | None:
        parsed, line_no = self.parsed, self.line_no
        kind, harness = _KINDS[prefix]
        step = kind == "STEP"
        try:
            # Step records are checked field by field (parse_step) and only their known
            # fields are stored; every other record is stored whole: checked whole.
            obj = load_record_json(body.strip(), allow_non_finite=_STEP_NON_FINITE if step else frozenset(),
                                   strict=not step)
        except ValueError as exc:
            raise RecordError(line_no, f"{prefix}: {exc}") from None
        if not isinstance(obj, dict):
            raise RecordError(line_no, f"{prefix} must be followed by a JSON object")
        self._dialects.add("bf16" if harness else "axbgate")
        parsed.num_record_lines += 1
        if step:
            record = parse_step(obj, line_no, harness)
            parsed.add_step(record)
            if self.keep_steps:
                parsed.steps.append(record)
            return record
        self._retain(body, prefix)
        if kind == "TIMING":
            if parsed.timing is not None:
                raise RecordError(line_no, f"second {prefix} record (one per run)")
            parsed.timing = parse_timing(obj, line_no, harness)
        elif kind == "RESULT":
            if parsed.result is not None:
                raise RecordError(line_no, f"second {prefix} record (one per run)")
            parsed.result = parse_result(obj, line_no, harness)
        elif kind == "PROVENANCE":
            parsed.provenance.update(check_provenance(obj, line_no, prefix))
        elif kind == "HEALTH":
            if len(parsed.health) >= MAX_HEALTH_RECORDS:
                raise RecordError(line_no, f"more than {MAX_HEALTH_RECORDS} health records in one log")
            parsed.health.append(parse_health(obj, line_no, harness))
        elif kind == "TIMELINE":
            parsed.timeline = {k: v for k, v in obj.items()
                               if k != "v" and isinstance(v, (int, float)) and not isinstance(v, bool)}
        elif kind == "ALLOCATION":
            parsed.allocation = parse_allocation(obj, line_no)
        elif kind == "SEMANTICS":
            if parsed.semantics is not None and not harness:
                raise RecordError(line_no, f"second {prefix} record (one per run)")
            if harness:  # kept whole as before, and read into the stored form
                parsed.provenance[prefix.lower()] = obj
            parsed.semantics = harness_semantics(obj) if harness else parse_semantics(obj, line_no)
        else:  # the harness's informational records
            parsed.provenance[prefix.lower()] = obj
        return None

    def _harness_counts(self) -> None:
        """Harness logs may carry the counts on the result record only."""
        parsed = self.parsed
        if parsed.timing is None or parsed.result is None:
            return
        for key, keys in (("num_warmup_steps", HARNESS_WARMUP_KEYS),
                          ("num_measured_steps", HARNESS_MEASURED_KEYS)):
            found = next((k for k in keys if k in parsed.result), None)
            if parsed.timing.get(key) is None and found is not None:
                value = parsed.result[found]
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    parsed.timing[key] = value

    def finish(self) -> ParsedLog:
        """Close the log and return what it held.

        Raises:
            RecordError: The first malformed record line (names the 1-based line).
        """
        if self.error is not None:
            raise self.error
        parsed = self.parsed
        self._harness_counts()
        if self._peak_gib is not None:
            bytes_ = round(self._peak_gib * 2**30)
            if parsed.result is not None and parsed.result.get("peak_allocated_bytes") is None:
                parsed.result["peak_allocated_bytes"] = bytes_
                parsed.notes.append("peak_allocated_bytes is BF16_PEAK_GIB x 2^30 (printed with 6 "
                                    "decimals: within about 1 KiB)")
            if parsed.result is not None and parsed.result.get("world_size") is None:
                # Only the single-GPU wrapper prints it, after checking world size 1.
                parsed.result["world_size"] = 1
            parsed.provenance["bf16_peak_gib"] = self._peak_gib
        dialects = self._dialects
        parsed.dialect = None if not dialects else ("mixed" if len(dialects) > 1 else next(iter(dialects)))
        return parsed


def parse(text: str) -> ParsedLog:
    """Parse every record line of a (small) run log held in memory.

    Args:
        text: The whole log as text (any mix of record and non-record lines).

    Returns:
        A :class:`ParsedLog` with ``steps`` filled. Non-record lines are ignored.

    Raises:
        RecordError: A record line is malformed (bad JSON, missing or mistyped required
            key, a bound of :mod:`record_limits` exceeded, unknown health status, a second
            timing or result record); the error names the 1-based line number.
    """
    parser = RecordParser(keep_steps=True)
    for line in text.splitlines():
        parser.feed(line)
    return parser.finish()


def step_row(step: StepRecord) -> dict[str, Any]:
    """The stored form of a step record (``run_steps`` columns), JSON-safe except that a
    non-finite loss or gradient norm stays a float (the run fails for it)."""
    return {"step": step.step, "slowest_rank_step_s": step.slowest_rank_step_s,
            "rank_step_s": step.rank_step_s, "loss": step.loss, "grad_norm": step.grad_norm,
            "phase": step.phase}


def health_check_rows(parsed: ParsedLog) -> list[dict[str, Any]]:
    """Health-check row values from the parsed ``AXBGATE_HEALTH`` / ``HEALTH_GATE`` records.

    A harness line without a status is stored as ``PASS`` (the harness prints only checks
    that completed; failures abort it).
    """
    return [
        {
            "name": h.check,
            "status": h.status or "PASS",
            "host": h.host,
            "measured": h.measured,
            "threshold": h.threshold,
            "message": h.message,
            "raw": h.raw,
        }
        for h in parsed.health
    ]
