"""What the record-contract parser returns: per-step records, health records and the
parsed log of one run (docs/record-contract.md). Pure data, no parsing here."""

from __future__ import annotations

import dataclasses
from typing import Any

from orchestrator.domain.errors import RecordError

__all__ = ["HealthRecord", "ParsedLog", "StepRecord"]


@dataclasses.dataclass(frozen=True, slots=True)
class StepRecord:
    """One optimizer step.

    Attributes:
        line_no: 1-based line of the log.
        step: 0-based step index, warmup included.
        slowest_rank_step_s: Max over ranks of this step's wall time, seconds.
        rank_step_s: The printing rank's own step time, seconds, if given.
        loss: Training loss, if given.
        grad_norm: Gradient norm, if given.
        phase: ``"warmup"`` / ``"measured"`` if given.
        extra: Keys not in the contract.
    """

    line_no: int
    step: int
    slowest_rank_step_s: float
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
            carried no status (the judge decides from ``measured``).
        measured: Measured values (e.g. ``slowest_rank_bus_gbps``).
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


@dataclasses.dataclass(slots=True)
class ParsedLog:
    """Everything the parser found in one log.

    Attributes:
        dialect: ``"axbgate"``, ``"bf16"`` or ``"mixed"`` (``None`` if no record at all).
        steps: Per-step records in log order.
        timing: The timing record (``slowest_rank_step_s`` list and counts) or ``None``.
        result: The result record with product key names, or ``None``.
        provenance: Merged provenance/semantics records.
        health: Health-check records.
        allocation: The allocation summary record or ``None``.
        num_record_lines: How many lines were records.
        timeline: The run's phase times (``AXBGATE_TIMELINE``, Unix seconds) or ``None``.
    """

    dialect: str | None = None
    steps: list[StepRecord] = dataclasses.field(default_factory=list)
    timing: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    health: list[HealthRecord] = dataclasses.field(default_factory=list)
    allocation: dict[str, Any] | None = None
    num_record_lines: int = 0
    timeline: dict[str, Any] | None = None

    def slowest_rank_step_s(self) -> list[float]:
        """Return every per-step slowest-rank time in seconds, warmup included.

        Taken from the timing record when present, else from the step records ordered by
        step index.

        Raises:
            RecordError: Neither a timing record nor step records are present.
        """
        if self.timing is not None and self.timing.get("slowest_rank_step_s"):
            return list(self.timing["slowest_rank_step_s"])
        if self.steps:
            return [s.slowest_rank_step_s for s in sorted(self.steps, key=lambda s: s.step)]
        raise RecordError(0, "log has no timing record and no step records")

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
