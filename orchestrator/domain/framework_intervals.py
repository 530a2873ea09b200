"""From a framework's periodic log lines to the record contract's per-step series (pure).

A framework log (torchtitan, Megatron-LM) prints one line every log interval: the step it
reached and a time that is a MEAN over the steps since its previous line. A
:class:`IntervalLogParser` collects those points while the log streams and gives the
driver and the importer what :class:`~orchestrator.domain.records.RecordParser` gives them:
step rows as they are known (each step of an interval gets the interval's mean) and, at the
end, a :class:`~orchestrator.domain.record_types.ParsedLog` whose per-step series, counts,
batch facts and notes ``measure_run`` measures like any other log. What the framework does
not print (per-step times inside an interval, the slowest rank where it prints one rank's
time) is not invented: the series carries its own label (``ParsedLog.series_label``) and
notes say what it is.

The warmup is a count of steps from the first step in the log; it must end on a log
boundary (no measured step may carry warmup time through an interval mean).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from orchestrator.domain.errors import RecordError
from orchestrator.domain.record_limits import MAX_RECORD_LINE_BYTES
from orchestrator.domain.record_semantics import parse_semantics
from orchestrator.domain.record_types import ParsedLog, StepRecord

__all__ = ["ANSI_RE", "IntervalLogParser", "LogPoint", "parse_number"]

ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""Terminal colour codes (torchtitan colours its metric lines by default)."""
_MAX_STEPS = 10_000_000
"""Most steps one log may span (a typo'd step index must not expand into memory)."""


@dataclasses.dataclass(slots=True)
class LogPoint:
    """One periodic metric line of a framework log."""

    line_no: int
    """1-based line of the log."""
    step: int
    """The framework's step (1-based) that closed the interval."""
    step_s: float | None = None
    """Mean seconds per step over the interval (None: derived at the end, e.g. from a rate)."""
    rate: float | None = None
    """A throughput the step time is derived from (torchtitan's tokens/s), if any."""
    stamp_s: float | None = None
    """Wall-clock time of the line from the log's own timestamp, Unix seconds, if printed."""
    loss: float | None = None
    grad_norm: float | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What else the line printed (memory, MFU, TFLOP/s, skipped iterations, ...)."""


def parse_number(text: str | None) -> float | None:
    """A number as a log prints it (``9,891``, ``1.23E+00``, ``nan``), or None."""
    if text is None:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


class IntervalLogParser:
    """Base of the framework adapters: the :class:`RecordParser` interface over log points.

    Subclasses implement :meth:`_point` (a metric line, or None) and :meth:`_header` (facts
    from other lines) and may override :meth:`_resolve` (turn rates into step seconds).

    Args:
        warmup_steps: Warmup steps counted from the first step in the log.
        world_size: Ranks of the run when known from outside the log (the gate's topology).
        first_line_no: Line number of the first line fed.
        keep_steps: Keep every :class:`StepRecord` in ``parsed.steps`` (small logs, tests).
    """

    log_format = "framework"
    series_label = "interval_mean"
    notes: tuple[str, ...] = ()

    def __init__(self, *, warmup_steps: int, world_size: int | None = None, first_line_no: int = 1,
                 keep_steps: bool = False, warmup_note: str | None = None) -> None:
        self.warmup_steps = warmup_steps
        self.world_size = world_size
        self.keep_steps = keep_steps
        self.line_no = first_line_no - 1
        self.error: RecordError | None = None
        self.points: list[LogPoint] = []
        self.facts: dict[str, Any] = {}
        """Header facts (batch sizes, sequence length, parallel sizes) the subclass read."""
        self._start: int | None = None
        self._emitted = 0
        self._steps: list[StepRecord] = []
        self._warmup_note = warmup_note

    # ---- the RecordParser interface ------------------------------------------------
    def feed(self, line: str | bytes) -> list[StepRecord] | None:
        """Read one line; returns the step records it completed (or None)."""
        self.line_no += 1
        if self.error is not None:
            return None
        try:
            rows = self._feed(line)
        except RecordError as exc:
            self.error = exc
            return None
        return rows or None

    def feed_lines(self, lines: list[bytes]) -> list[tuple]:
        """Read a block of lines; returns the completed steps as importer rows
        ``(step, slowest_rank_step_s, rank_step_s, loss, grad_norm, phase)``."""
        rows: list[tuple] = []
        for line in lines:
            for rec in self.feed(line) or ():
                rows.append(_row(rec))
        return rows

    def feed_overlong(self, head: str | bytes, size_bytes: int) -> None:
        """A line past 1 MiB: never a metric line of these frameworks; ignored."""
        self.line_no += 1

    def drain(self) -> list[StepRecord]:
        """Step records not handed out yet (a log with a single metric line)."""
        if self.error is not None or not self.points:
            return []
        if self._start is None:
            self._start = 0
        try:
            return self._release(len(self.points))
        except RecordError as exc:
            self.error = exc
            return []

    def drain_rows(self) -> list[tuple]:
        """:meth:`drain` as importer rows."""
        return [_row(rec) for rec in self.drain()]

    # ---- reading ---------------------------------------------------------------------
    def _feed(self, line: str | bytes) -> list[StepRecord]:
        if isinstance(line, bytes):
            if len(line) > MAX_RECORD_LINE_BYTES:
                return []
            line = line.decode("utf-8", "replace")
        text = ANSI_RE.sub("", line) if "\x1b" in line else line
        point = self._point(text, self.line_no)
        if point is None:
            self._header(text)
            return []
        if self.points and point.step <= self.points[-1].step:
            raise RecordError(self.line_no, (
                f"{self.log_format} step {point.step} after step {self.points[-1].step}: the log "
                "holds more than one run (or a restart); import each run's log on its own"))
        if point.step > _MAX_STEPS:
            raise RecordError(self.line_no, f"{self.log_format} step {point.step} is past {_MAX_STEPS}")
        self.points.append(point)
        if self._start is None and (point.step == 1 or "start_step" in self.facts):
            self._start = self.facts.get("start_step", 1) - 1
        elif self._start is None and len(self.points) == 2:
            first, second = self.points
            self._start = max(0, first.step - (second.step - first.step))
        return self._release(len(self.points)) if self._start is not None else []

    def _release(self, upto: int) -> list[StepRecord]:
        """Step records of the points before ``upto`` not handed out yet."""
        out = []
        for index in range(self._emitted, upto):
            point = self.points[index]
            seconds = self._step_seconds(index)
            begin = self._start if index == 0 else self.points[index - 1].step
            for step in range(begin + 1, point.step + 1):
                last = step == point.step
                phase = "warmup" if step - self._start <= self.warmup_steps else "measured"
                out.append(self._record(point, step - 1, seconds, phase, last))
        self._emitted = upto
        if self.keep_steps:
            self._steps.extend(out)
        return out

    def _record(self, point: LogPoint, index: int, seconds: float, phase: str, last: bool) -> StepRecord:
        """The step record of one step of an interval (subclasses choose the column)."""
        return StepRecord(point.line_no, index, seconds, None, point.loss if last else None,
                          point.grad_norm if last else None, phase)

    def _step_seconds(self, index: int) -> float:
        point = self.points[index]
        if point.step_s is None:
            point.step_s = self._resolve(index)
        if not (point.step_s > 0 and math.isfinite(point.step_s)):
            raise RecordError(point.line_no, f"{self.log_format} step {point.step}: the step time "
                                             f"({point.step_s}) is not a positive number of seconds")
        return point.step_s

    def _point(self, text: str, line_no: int) -> LogPoint | None:
        raise NotImplementedError

    def _header(self, text: str) -> None:
        """Read facts from a line that is not a metric line (default: nothing)."""

    def _resolve(self, index: int) -> float:
        raise RecordError(self.points[index].line_no, f"{self.log_format}: no step time on this line")

    # ---- the end ---------------------------------------------------------------------
    def finish(self) -> ParsedLog:
        """The parsed log: per-step series (warmup first), counts, batch facts, notes.

        Raises:
            RecordError: A malformed metric line, steps that go backwards, no metric line,
                or a warmup that ends inside a log interval (the message says how to fix it).
        """
        if self.error is not None:
            raise self.error
        parsed = ParsedLog(dialect=self.log_format, notes=list(self.notes))
        parsed.series_label = self.series_label
        if not self.points:
            return parsed
        if self._start is None:
            self._start = 0
        series = [self._step_seconds(i) for i in range(len(self.points))]
        bounds = [self._start] + [p.step for p in self.points]
        per_step = [s for i, s in enumerate(series) for _ in range(bounds[i + 1] - bounds[i])]
        self._check_warmup(bounds)
        for rec in self._steps or self._all_records():
            parsed.add_step(rec)
        if self.keep_steps:
            parsed.steps = list(self._steps)
        total = len(per_step)
        intervals = sorted({b - a for a, b in zip(bounds, bounds[1:])})
        parsed.timing = {
            "slowest_rank_step_s": per_step, "series_key": None,
            "num_warmup_steps": min(self.warmup_steps, total),
            "num_measured_steps": max(0, total - self.warmup_steps),
            "extra": {"log_format": self.log_format, "first_step": self._start + 1,
                      "log_interval_steps": intervals, "num_log_lines": len(self.points),
                      "warmup_rule": {"mode": "fixed", "min_warmup_steps": self.warmup_steps}},
        }
        if self._warmup_note:
            parsed.notes.append(self._warmup_note)
        if total <= self.warmup_steps:
            parsed.notes.append(f"the log has {total} steps from step {self._start + 1}: a warmup of "
                                f"{self.warmup_steps} leaves none to measure")
        if intervals != [1]:
            parsed.notes.append(
                f"{self.log_format} printed one line every {'/'.join(map(str, intervals))} steps: each "
                "step of an interval carries the interval's mean time (the spread inside an "
                "interval is not in the log); log every step for per-step times")
        for point in self.points:
            if parsed.non_finite is None:
                parsed.non_finite = self._non_finite(point)
        parsed.result = self._result(per_step)
        parsed.semantics = self._semantics(intervals == [1])
        return parsed

    def _all_records(self) -> list[StepRecord]:
        keep, self.keep_steps, self._emitted = self.keep_steps, True, 0
        self._steps = []
        self._release(len(self.points))
        self.keep_steps = keep
        return self._steps

    def _check_warmup(self, bounds: list[int]) -> None:
        end = self._start + self.warmup_steps
        if end in bounds or end >= bounds[-1]:
            return
        after = next(b for b in bounds if b > end)
        before = max(b for b in bounds if b < end)
        raise RecordError(0, (
            f"the warmup of {self.warmup_steps} steps ends at step {end}, inside the log interval "
            f"of steps {before + 1}-{after} (one {self.log_format} line covers them all): log every "
            "step, or a warmup count that ends on a logged step"))

    def _non_finite(self, point: LogPoint) -> str | None:
        for name, value in (("loss", point.loss), ("grad_norm", point.grad_norm)):
            if value is not None and not math.isfinite(value):
                return f"non-finite {name} ({value}) at step {point.step} (log line {point.line_no})"
        return None

    def _result(self, per_step: list[float]) -> dict[str, Any]:
        """Batch facts and what else the log knows (subclasses add their numbers)."""
        facts = self.facts
        world = facts.get("world_size") or self.world_size
        return {"world_size": world, "local_batch_size": facts.get("local_batch_size"),
                "grad_accum_steps": facts.get("grad_accum_steps"), "status": "ok",
                "log_format": self.log_format}

    def _semantics(self, every_step: bool) -> dict[str, Any] | None:
        facts = self.facts
        obj: dict[str, Any] = {key: facts[key] for key in (
            "local_batch_size", "grad_accum_steps", "world_size", "global_batch_size",
            "samples_per_step", "tokens_per_step") if isinstance(facts.get(key), int) and facts[key] >= 1}
        if every_step:
            for key in ("loss", "grad_norm"):
                values = [getattr(p, key) for p in self.points]
                if all(v is not None and math.isfinite(v) for v in values):
                    obj[key] = values
            obj["series_first_step"] = self._start
        return parse_semantics(obj, 0) if obj else None


def _row(rec: StepRecord) -> tuple:
    return (rec.step, rec.slowest_rank_step_s, rec.rank_step_s, rec.loss, rec.grad_norm, rec.phase)
