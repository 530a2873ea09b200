"""What the record-contract parser returns: per-step records, health records and the
parsed log of one run (docs/record-contract.md). Pure data, no parsing here.

A log may hold a million step records, so :class:`ParsedLog` keeps its step series as
compact arrays (8 bytes per number), not as a list of objects; callers that want every
:class:`StepRecord` take them from :meth:`RecordParser.feed` as they arrive.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from array import array
from typing import Any

from orchestrator.domain.errors import RecordError

__all__ = ["HealthRecord", "ParsedLog", "StepRecord", "StepSeries"]


@dataclasses.dataclass(frozen=True, slots=True)
class StepRecord:
    """One optimizer step.

    Attributes:
        line_no: 1-based line of the log.
        step: Step index as printed (0-based for ``AXBGATE_STEP``; the harness's tracker
            step for ``BF16_STEP``), warmup included.
        slowest_rank_step_s: Max over ranks of this step's wall time, seconds; ``None``
            when the line carried only the printing rank's own time (``BF16_STEP``
            ``step_time_sec``).
        rank_step_s: The printing rank's own step time, seconds, if given.
        loss: Training loss, if given (may be NaN: the run then fails).
        grad_norm: Gradient norm, if given (may be NaN: the run then fails).
        phase: ``"warmup"`` / ``"measured"`` if given.
        extra: Keys not in the contract.
    """

    line_no: int
    step: int
    slowest_rank_step_s: float | None
    rank_step_s: float | None = None
    loss: float | None = None
    grad_norm: float | None = None
    phase: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class HealthRecord:
    """One health check as printed by ``AXBGATE_HEALTH`` or the harness's ``HEALTH_GATE``.

    Attributes:
        line_no: 1-based line of the log.
        check: Check name, e.g. ``"sustained_all_reduce"``.
        status: ``PASS`` / ``WARN`` / ``FAIL`` / ``HANG``; ``None`` when the harness line
            carried no status (the harness prints only checks that completed).
        measured: Measured values (e.g. ``slowest_rank_bus_gbps``, ``p50_ms``, ``rank``).
        threshold: Criteria the check was judged against.
        message: Human-readable explanation.
        host: Host the check ran on.
        raw: The whole JSON object.
    """

    line_no: int
    check: str
    status: str | None
    measured: dict[str, Any]
    threshold: dict[str, Any]
    message: str | None
    host: str | None
    raw: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class StepSeries:
    """The per-step times a run is measured on.

    Attributes:
        step_s: Seconds per step in step order, warmup included.
        source: ``"slowest_rank"`` (a timing record's list, or every step record's
            slowest-rank time), ``"rank0"`` (only the printing rank's own times were
            found: harness ``BF16_STEP`` ``step_time_sec`` without ``BF16_TIMING``), or a
            framework adapter's label (``ParsedLog.series_label``).
    """

    step_s: list[float]
    source: str


@dataclasses.dataclass(slots=True)
class ParsedLog:
    """Everything the parser found in one log.

    Attributes:
        dialect: ``"axbgate"``, ``"bf16"`` or ``"mixed"`` (``None`` if no record at all).
        timing: The timing record (``slowest_rank_step_s`` list or ``None``, counts) or
            ``None``.
        result: The result record with product key names, or ``None``.
        provenance: Merged provenance records; harness records other than steps,
            timing, result and health are kept under their lower-case prefix
            (``bf16_semantics``, ``bf16_setup``, ...).
        health: Health-check records.
        allocation: The allocation summary record or ``None``.
        num_record_lines: How many lines were records.
        timeline: The run's phase times (``AXBGATE_TIMELINE``, Unix seconds) or ``None``.
        step_index: Step index of every step record, log order.
        step_slowest_s: Slowest-rank seconds of every step record (NaN: not printed).
        step_rank_s: The printing rank's own seconds of every step record (NaN: not printed).
        non_finite: The first non-finite ``loss``/``grad_norm`` (step and log line), if any.
        semantics: What the run trained (``AXBGATE_SEMANTICS`` or the harness's
            ``BF16_SEMANTICS``, in the stored form of
            :mod:`orchestrator.domain.record_semantics`), or None.
        notes: What the reader of an imported run should know about how it was read.
        series_label: What the timing list is when it is not the slowest rank's per-step
            time: a framework log adapter's label (``torchtitan_rank0_interval_mean``,
            ``megatron_interval_mean``; docs/integrations.md); None for the record contract.
        steps: Every step record; filled only by :func:`~orchestrator.domain.records.parse`
            (small logs, tests), never by the streaming :class:`RecordParser`.
    """

    dialect: str | None = None
    timing: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    health: list[HealthRecord] = dataclasses.field(default_factory=list)
    allocation: dict[str, Any] | None = None
    num_record_lines: int = 0
    timeline: dict[str, Any] | None = None
    step_index: array = dataclasses.field(default_factory=lambda: array("q"))
    step_slowest_s: array = dataclasses.field(default_factory=lambda: array("d"))
    step_rank_s: array = dataclasses.field(default_factory=lambda: array("d"))
    non_finite: str | None = None
    semantics: dict[str, Any] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    series_label: str | None = None
    steps: list[StepRecord] = dataclasses.field(default_factory=list)

    @property
    def num_steps(self) -> int:
        """Step records in the log."""
        return len(self.step_index)

    def add_step(self, step: StepRecord) -> None:
        """Append one step record to the compact series."""
        self.step_index.append(step.step)
        slowest, rank = step.slowest_rank_step_s, step.rank_step_s
        self.step_slowest_s.append(math.nan if slowest is None else slowest)
        self.step_rank_s.append(math.nan if rank is None else rank)
        if self.non_finite is None:
            for name, value in (("loss", step.loss), ("grad_norm", step.grad_norm)):
                if value is not None and not -math.inf < value < math.inf:
                    self.non_finite = (f"non-finite {name} ({value}) at step {step.step} "
                                       f"(log line {step.line_no})")
                    break

    def _in_step_order(self, values: array) -> list[float]:
        index = self.step_index
        if all(map(operator.le, index, itertools.islice(index, 1, None))):  # the common case
            return values.tolist()
        order = sorted(range(len(index)), key=index.__getitem__)
        return [values[i] for i in order]

    def step_series(self) -> StepSeries:
        """Return the per-step times to measure, warmup included.

        From the timing record's list when present (the harness's
        ``true_wall_slowest_rank_sec`` is authoritative), else from the step records in
        step-index order: their slowest-rank times when every one has it, else the
        printing rank's own times (``source="rank0"``).

        Raises:
            RecordError: Neither a timing list nor step records are present.
        """
        if self.timing is not None and self.timing.get("slowest_rank_step_s"):
            return StepSeries(list(self.timing["slowest_rank_step_s"]), self.series_label or "slowest_rank")
        if self.num_steps:
            if not any(map(math.isnan, self.step_slowest_s)):
                return StepSeries(self._in_step_order(self.step_slowest_s), "slowest_rank")
            if not any(map(math.isnan, self.step_rank_s)):
                return StepSeries(self._in_step_order(self.step_rank_s), "rank0")
            raise RecordError(0, "some step records carry neither a slowest-rank nor a rank time")
        raise RecordError(0, "log has no timing record and no step records")

    def slowest_rank_step_s(self) -> list[float]:
        """Return the per-step series in seconds (see :meth:`step_series`)."""
        return self.step_series().step_s

    def num_warmup_steps(self, default: int | None = None) -> int | None:
        """Return the warmup count from the timing record (or ``default``)."""
        if self.timing is not None and self.timing.get("num_warmup_steps") is not None:
            return int(self.timing["num_warmup_steps"])
        return default

    def num_measured_steps(self, default: int | None = None) -> int | None:
        """Return the measured-step count from the timing record (or ``default``)."""
        if self.timing is not None and self.timing.get("num_measured_steps") is not None:
            return int(self.timing["num_measured_steps"])
        return default
