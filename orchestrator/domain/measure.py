"""From a parsed run log to a run's measured values and status (pure).

Applies the measurement contract of DESIGN.md section 2: slowest rank per step, warmup
discarded, median of the measured steps; a run that did not finish the expected number
of steps, printed a non-finite loss or gradient norm, or reported ``status: failed`` is
*failed, not measured*.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from orchestrator.domain.errors import RecordError
from orchestrator.domain.record_semantics import complete_semantics
from orchestrator.domain.records import ParsedLog
from orchestrator.verdict import run_statistics

__all__ = ["HARNESS_MEASURED_STEPS", "HARNESS_WARMUP_STEPS", "RunOutcome", "measure_run"]

# A printed median that differs from the recomputed one by more than this relative
# amount is flagged (docs/record-contract.md).
MEDIAN_MISMATCH_REL = 1e-9
_RESULT_COLUMNS = ("mfu_pct", "mfu_numerator_pct_s", "flops_per_sample", "peak_flops_per_gpu",
                   "samples_per_s", "peak_allocated_bytes", "peak_reserved_bytes", "world_size",
                   "local_batch_size", "grad_accum_steps")


HARNESS_WARMUP_STEPS = 10
"""Warmup steps of the LTX-2 MFU harness (its fixed ``WARMUP_STEPS``; shared/seed_harness)."""
HARNESS_MEASURED_STEPS = 20
"""Measured steps of the LTX-2 MFU harness (``EXPECTED_STEPS`` 30 minus the warmup)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a log says about one run.

    Attributes:
        status: ``succeeded`` or ``failed``.
        error: Why it failed (``None`` when it succeeded).
        fields: Run column values (``median_step_s``, ``slowest_rank_step_s``, counts,
            MFU, memory, batch sizes, versions, ...), ready for ``store.runs.update_run``;
            ``result_extra`` holds ``step_series`` and ``notes``.
        log_median_step_s: The median the log printed itself, seconds, if any.
        median_mismatch: True when the printed median disagrees with the recomputed one.
        notes: How the log was read, for the person importing it (also in
            ``fields["result_extra"]["notes"]``).
    """

    status: str
    error: str | None
    fields: dict[str, Any]
    log_median_step_s: float | None
    median_mismatch: bool
    notes: tuple[str, ...] = ()


def _check_window(warmup: int, measured: int, warmup_bounds: tuple[int, int] | None,
                  min_measured_steps: int | None) -> str | None:
    if warmup_bounds is not None and not warmup_bounds[0] <= warmup <= warmup_bounds[1]:
        return (f"the run used {warmup} warmup steps, the gate's rule allows "
                f"{warmup_bounds[0]}-{warmup_bounds[1]}")
    if min_measured_steps is not None and measured < min_measured_steps:
        return f"the run measured {measured} steps, the gate asked for at least {min_measured_steps}"
    return None


def _static_fields(parsed: ParsedLog) -> dict[str, Any]:
    """Run columns that do not depend on the step series: result numbers, provenance."""
    result = parsed.result or {}
    fields: dict[str, Any] = {key: result[key] for key in _RESULT_COLUMNS if result.get(key) is not None}
    known = set(fields) | {"median_step_s", "status", "error"}
    fields["result_extra"] = {k: v for k, v in result.items() if k not in known}
    timing = parsed.timing or {}
    if timing.get("internal_slowest_rank_s"):
        fields["result_extra"]["internal_slowest_rank_step_s"] = timing["internal_slowest_rank_s"]
    if timing.get("extra"):
        fields["result_extra"]["timing_extra"] = timing["extra"]
    prov = parsed.provenance
    fields["provenance"] = prov
    fields["versions"] = {
        k: prov[k]
        for k in ("driver_version", "cuda_version", "nccl_version", "torch_version", "python_version")
        if k in prov
    }
    recipe = prov.get("recipe") if isinstance(prov.get("recipe"), dict) else {}
    data = recipe.get("data") if isinstance(recipe.get("data"), dict) else {}
    fields["semantics"] = complete_semantics(parsed.semantics, parsed.result, _video_tokens(data))
    fields["clocks"] = {
        k: prov[k] for k in ("max_sm_clock_mhz", "sm_clock_mhz", "power_limit_w", "throttle_reasons")
        if k in prov
    }
    return fields


def _video_tokens(data: dict[str, Any]) -> int | None:
    """Video tokens per sample of a bundled-trainer recipe (LTX-2 VAE: 8x32x32), or None."""
    try:
        frames, height, width = int(data["num_frames"]), int(data["height"]), int(data["width"])
    except (KeyError, TypeError, ValueError):
        return None
    return ((frames - 1) // 8 + 1) * (height // 32) * (width // 32)


def _counts(parsed: ParsedLog, expected_warmup: int | None, expected_measured: int | None,
            num_steps: int, notes: list[str]) -> tuple[int | None, int | None]:
    warmup = parsed.num_warmup_steps(expected_warmup)
    measured = parsed.num_measured_steps(expected_measured)
    if warmup is None and parsed.dialect == "bf16":
        warmup = HARNESS_WARMUP_STEPS
        measured = HARNESS_MEASURED_STEPS if measured is None else measured
        notes.append(f"the log does not state its step counts: the LTX-2 harness's fixed "
                     f"{HARNESS_WARMUP_STEPS} warmup + {HARNESS_MEASURED_STEPS} measured steps are used")
    if warmup is not None and measured is None:
        measured = num_steps - warmup
    return warmup, measured


def _series_note(parsed: ParsedLog, source: str, require_slowest_rank: bool) -> str | None:
    """The note (or, for a gate, the failure) of a series that is rank 0's own time."""
    world = (parsed.result or {}).get("world_size")
    if source != "rank0" or world == 1:
        return None
    return ("the per-step series is rank 0's own step time (BF16_STEP step_time_sec), not the "
            "slowest rank's: the log has no BF16_TIMING true_wall_slowest_rank_sec list"
            + ("" if not require_slowest_rank else
               "; a gate measures the slowest rank (docs/record-contract.md)"))


def measure_run(
    parsed: ParsedLog,
    *,
    expected_warmup_steps: int | None = None,
    expected_measured_steps: int | None = None,
    warmup_bounds: tuple[int, int] | None = None,
    min_measured_steps: int | None = None,
    require_slowest_rank: bool = False,
) -> RunOutcome:
    """Compute a run's measurement from its parsed log.

    Args:
        parsed: Output of :class:`orchestrator.domain.records.RecordParser`.
        expected_warmup_steps: Warmup count the gate asked for; defaults to the log's
            (for a harness log that states none, the harness's fixed 10, with a note).
        expected_measured_steps: Measured count the gate asked for (fixed window);
            defaults to the log's.
        warmup_bounds: Under a steady-state warmup rule, the fewest and most warmup
            steps the rule allows (the log's count must lie within).
        min_measured_steps: Under a time window, the fewest measured steps allowed.
        require_slowest_rank: Fail a multi-rank run whose only series is rank 0's own
            step time (gates); an import keeps it with a note instead.

    Returns:
        A :class:`RunOutcome`; never raises for a bad run (the reason is in ``error``).
    """
    result = parsed.result or {}
    fields = _static_fields(parsed)
    notes = list(parsed.notes)
    log_median = result.get("median_step_s")
    log_median = float(log_median) if log_median is not None else None

    def failed(reason: str) -> RunOutcome:
        if notes:
            fields["result_extra"]["notes"] = notes
        return RunOutcome("failed", reason, fields, log_median, False, tuple(notes))

    if result.get("status") == "failed":
        return failed(str(result.get("error") or "the run reported status failed"))
    if parsed.non_finite:
        return failed(parsed.non_finite)
    try:
        series = parsed.step_series()
    except RecordError as exc:
        return failed(f"no step timing in the log ({exc.message})")
    times = series.step_s
    one_rank = series.source == "rank0" and result.get("world_size") == 1
    rank0_only = series.source == "rank0" and not one_rank
    # A rank-0 series is stored as such (result_extra.rank0_step_s), never as the slowest
    # rank's: the ledger's slowest_rank_step_s holds slowest-rank numbers only.
    fields["slowest_rank_step_s"] = [] if rank0_only else times
    if rank0_only:
        fields["result_extra"]["rank0_step_s"] = times
    fields["result_extra"]["step_series"] = "slowest_rank" if one_rank else series.source
    note = _series_note(parsed, series.source, require_slowest_rank)
    if note and require_slowest_rank:
        return failed(note)
    if note:
        notes.append(note)
    warmup, measured = _counts(parsed, expected_warmup_steps, expected_measured_steps, len(times), notes)
    if warmup is None or measured is None:
        return failed("the log has no timing record (AXBGATE_TIMING / BF16_TIMING with the "
                      "warmup step count): the run did not finish, or its harness does not "
                      "print one (docs/record-contract.md)")
    if expected_warmup_steps is not None and warmup != expected_warmup_steps:
        return failed(f"the run used {warmup} warmup steps, the gate asked for {expected_warmup_steps}")
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
    if rank0_only:
        _use_harness_median(fields, notes, stats.median_step_s, log_median)
    if notes:
        fields["result_extra"]["notes"] = notes
    mismatch = log_median is not None and abs(log_median - fields["median_step_s"]) > (
        MEDIAN_MISMATCH_REL * fields["median_step_s"]
    )
    return RunOutcome("succeeded", None, fields, log_median, mismatch, tuple(notes))


def _use_harness_median(fields: dict[str, Any], notes: list[str], rank0_median_s: float,
                        log_median_s: float | None) -> None:
    """Take the harness's slowest-rank median over rank 0's own (issue 24, point 7).

    The short harness variants (shared/seed_harness ``benchmark_fastvideo_train*.py``)
    print ``BF16_STEP`` with rank 0's own ``step_time_sec`` only, then gather every rank's
    times and print ``BF16_RESULT.median_step_sec``: the median over steps 10..29 of the
    per-step maximum across ranks, i.e. the slowest-rank median. That number, not rank
    0's, is the run's median; rank 0's median is kept as ``rank0_median_step_s``.

    Args:
        fields: The run's fields (``median_step_s`` and ``result_extra`` are updated).
        notes: The import notes (one is added).
        rank0_median_s: Median of rank 0's measured steps, seconds.
        log_median_s: The harness's printed median, seconds (``None``: not printed, the
            rank-0 median stays the run's, labelled so).
    """
    extra = fields["result_extra"]
    extra["rank0_median_step_s"] = rank0_median_s
    if log_median_s is None:
        extra["median_source"] = "rank0"
        return
    fields["median_step_s"] = log_median_s
    extra["median_source"] = "harness_slowest_rank"
    notes.append(f"median_step_s is the harness's slowest-rank median (BF16_RESULT median_step_sec "
                 f"{log_median_s:.9g} s, from every rank's times); rank 0's own series is kept as "
                 f"rank0_step_s (its median {rank0_median_s:.9g} s)")
