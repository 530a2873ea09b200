"""From a parsed run log to a run's measured values and status (pure).

Applies the measurement contract of DESIGN.md section 2: slowest rank per step, warmup
discarded, median of the measured steps; a run that did not finish the expected number
of steps, printed a non-finite loss or gradient norm, or reported ``status: failed`` is
*failed, not measured*.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from orchestrator.domain.records import ParsedLog
from orchestrator.verdict import run_statistics

__all__ = ["RunOutcome", "measure_run"]

# A printed median that differs from the recomputed one by more than this relative
# amount is flagged (docs/record-contract.md).
MEDIAN_MISMATCH_REL = 1e-9


@dataclasses.dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a log says about one run.

    Attributes:
        status: ``succeeded`` or ``failed``.
        error: Why it failed (``None`` when it succeeded).
        fields: Run column values (``median_step_s``, ``slowest_rank_step_s``, counts,
            MFU, memory, batch sizes, versions, ...), ready for ``store.runs.update_run``.
        log_median_step_s: The median the log printed itself, seconds, if any.
        median_mismatch: True when the printed median disagrees with the recomputed one.
    """

    status: str
    error: str | None
    fields: dict[str, Any]
    log_median_step_s: float | None
    median_mismatch: bool


def _non_finite_step(parsed: ParsedLog) -> str | None:
    for step in parsed.steps:
        for name in ("loss", "grad_norm"):
            value = getattr(step, name)
            if value is not None and not math.isfinite(value):
                return f"non-finite {name} ({value}) at step {step.step} (log line {step.line_no})"
    return None


def _check_window(warmup: int, measured: int, warmup_bounds: tuple[int, int] | None,
                  min_measured_steps: int | None) -> str | None:
    if warmup_bounds is not None and not warmup_bounds[0] <= warmup <= warmup_bounds[1]:
        return (f"the run used {warmup} warmup steps, the gate's rule allows "
                f"{warmup_bounds[0]}-{warmup_bounds[1]}")
    if min_measured_steps is not None and measured < min_measured_steps:
        return f"the run measured {measured} steps, the gate asked for at least {min_measured_steps}"
    return None


def _result_fields(parsed: ParsedLog) -> dict[str, Any]:
    """Run columns taken as printed: result numbers, provenance, versions, clocks."""
    result = parsed.result or {}
    fields: dict[str, Any] = {}
    for key in (
        "mfu_pct",
        "mfu_numerator_pct_s",
        "flops_per_sample",
        "peak_flops_per_gpu",
        "samples_per_s",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "world_size",
        "local_batch_size",
        "grad_accum_steps",
    ):
        if result.get(key) is not None:
            fields[key] = result[key]
    known = set(fields) | {"median_step_s", "status", "error"}
    fields["result_extra"] = {k: v for k, v in result.items() if k not in known}
    prov = parsed.provenance
    fields["provenance"] = prov
    fields["versions"] = {
        k: prov[k]
        for k in ("driver_version", "cuda_version", "nccl_version", "torch_version", "python_version")
        if k in prov
    }
    fields["clocks"] = {
        k: prov[k] for k in ("max_sm_clock_mhz", "sm_clock_mhz", "power_limit_w", "throttle_reasons")
        if k in prov
    }
    return fields


def measure_run(
    parsed: ParsedLog,
    *,
    expected_warmup_steps: int | None = None,
    expected_measured_steps: int | None = None,
    warmup_bounds: tuple[int, int] | None = None,
    min_measured_steps: int | None = None,
) -> RunOutcome:
    """Compute a run's measurement from its parsed log.

    Args:
        parsed: Output of :func:`orchestrator.domain.records.parse`.
        expected_warmup_steps: Warmup count the gate asked for (fixed warmup); defaults
            to the log's.
        expected_measured_steps: Measured count the gate asked for (fixed window);
            defaults to the log's.
        warmup_bounds: Under a steady-state warmup rule, the fewest and most warmup
            steps the rule allows (the log's count must lie within).
        min_measured_steps: Under a time window, the fewest measured steps allowed.

    Returns:
        A :class:`RunOutcome`; never raises for a bad run (the reason is in ``error``).
    """
    result = parsed.result or {}
    fields = _result_fields(parsed)
    log_median = result.get("median_step_s")
    log_median = float(log_median) if log_median is not None else None

    def failed(reason: str) -> RunOutcome:
        return RunOutcome("failed", reason, fields, log_median, False)

    if result.get("status") == "failed":
        return failed(str(result.get("error") or "the run reported status failed"))
    bad = _non_finite_step(parsed)
    if bad:
        return failed(bad)
    try:
        times = parsed.slowest_rank_step_s()
    except Exception as exc:  # RecordError: no timing data at all
        return failed(f"no step timing in the log ({exc})")
    fields["slowest_rank_step_s"] = times
    warmup = parsed.num_warmup_steps(expected_warmup_steps)
    measured = parsed.num_measured_steps(expected_measured_steps)
    if warmup is None:
        return failed("the log has no timing record (AXBGATE_TIMING / BF16_TIMING with the "
                      "warmup step count): the run did not finish, or its harness does not "
                      "print one (docs/record-contract.md)")
    if expected_warmup_steps is not None and warmup != expected_warmup_steps:
        return failed(f"the run used {warmup} warmup steps, the gate asked for {expected_warmup_steps}")
    if measured is None:
        measured = len(times) - warmup
    if expected_measured_steps is not None and measured != expected_measured_steps:
        return failed(
            f"the run measured {measured} steps, the gate asked for {expected_measured_steps}"
        )
    window_error = _check_window(warmup, measured, warmup_bounds, min_measured_steps)
    if window_error:
        return failed(window_error)
    fields["num_warmup_steps"] = warmup
    fields["num_measured_steps"] = measured
    if parsed.timeline:
        fields["result_extra"]["timeline"] = parsed.timeline
    if parsed.timing is not None and (parsed.timing.get("extra") or {}).get("warmup_rule"):
        fields["result_extra"]["warmup_rule"] = parsed.timing["extra"]["warmup_rule"]
    if len(times) < warmup + measured:
        return failed(f"the run finished {len(times)} of {warmup + measured} steps")
    try:
        stats = run_statistics(times, num_warmup_steps=warmup, num_measured_steps=measured)
    except ValueError as exc:
        return failed(str(exc))
    fields["median_step_s"] = stats.median_step_s
    if log_median is not None:
        fields["result_extra"]["log_median_step_s"] = log_median
    mismatch = log_median is not None and abs(log_median - stats.median_step_s) > (
        MEDIAN_MISMATCH_REL * stats.median_step_s
    )
    return RunOutcome("succeeded", None, fields, log_median, mismatch)
