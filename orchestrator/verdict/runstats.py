"""Run statistics: slowest-rank step times, warmup discard, run median and its spread.

Source: DESIGN.md section 2 (timing contract): per step the slowest rank,
discard warmup, median of the measured steps.

Statistic of a run: the run median stays the statistic every policy compares (the
DESIGN contract, and the number the ledger shows). It is not stable when the steps are
bimodal (each step 1.00 or 1.12 s at random: the median jumps between the modes from
run to run), so each run also carries the median's standard error from its own steps
(``spread.median_standard_error``) and a multimodality flag (``spread.detect_modes``).
The calibrated policy puts the run-to-run sigma no lower than these standard errors
(``calibration.sigma_floor``): identical medians never mean zero noise, and a bimodal
run can never produce a confident decision. ``mean_step_s`` is reported for reference
(it is the statistic that tracks throughput, but one +15% hiccup in 20 steps moves it
by 0.75%, so it does not decide).
"""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.verdict.model import Role, RunSummary
from orchestrator.verdict.spread import detect_modes, median_standard_error


@dataclass(frozen=True)
class RunStatistics:
    """Timing summary of one run."""

    median_step_s: float
    """Run median: median of the measured slowest-rank step times, seconds
    (``statistics.median``: mean of the two middle values for an even count)."""
    slowest_rank_step_seconds: tuple[float, ...]
    """Every step's slowest-rank time including warmup, seconds."""
    measured_step_seconds: tuple[float, ...]
    """The measured steps' slowest-rank times, seconds."""
    num_warmup_steps: int
    """Steps discarded at the start."""
    num_measured_steps: int
    """Steps whose median is reported."""
    num_trailing_steps: int
    """Steps after the measured window, not used (0 unless more were recorded)."""
    num_ranks: int | None
    """Ranks in the input when per-rank times were given, else None."""
    median_se_s: float = 0.0
    """Exact-bootstrap standard error of ``median_step_s`` from the measured steps,
    seconds (``spread.median_standard_error``)."""
    mean_step_s: float = 0.0
    """Mean of the measured steps, seconds (reported, not used by verdicts)."""
    multimodal: bool = False
    """True when the measured steps form two separated groups (``spread.detect_modes``)."""
    low_mode_s: float | None = None
    """Mean of the faster group of the two-group split, seconds (None: < 10 steps)."""
    high_mode_s: float | None = None
    """Mean of the slower group of the two-group split, seconds (None: < 10 steps)."""
    minor_mode_fraction: float | None = None
    """Share of the measured steps in the smaller group (None: < 10 steps)."""


def _check_step(name: str, value: object) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")  # noqa: TRY004
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if number <= 0.0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


def _slowest_rank(step_seconds: Sequence[float] | Sequence[Sequence[float]]) -> tuple[
    tuple[float, ...], int | None
]:
    rows = list(step_seconds)
    if not rows:
        raise ValueError("step_seconds must not be empty")
    if all(type(v) is float for v in rows) and math.isfinite(math.fsum(rows)) and min(rows) > 0.0:
        return tuple(rows), None  # 1-D, every value a finite positive float: nothing to convert
    is_2d = [hasattr(row, "__len__") and not isinstance(row, (str, bytes)) for row in rows]
    if not any(is_2d):
        return tuple(_check_step(f"step_seconds[{i}]", v) for i, v in enumerate(rows)), None
    if not all(is_2d):
        raise ValueError("step_seconds must be 1-D (steps) or 2-D (ranks x steps), not mixed")
    num_steps = len(rows[0])
    if num_steps == 0:
        raise ValueError("step_seconds[0] (rank 0) must not be empty")
    for rank, row in enumerate(rows):
        if len(row) != num_steps:
            raise ValueError(
                f"step_seconds[{rank}] has {len(row)} steps, rank 0 has {num_steps}"
            )
    checked = [
        [_check_step(f"step_seconds[{rank}][{step}]", v) for step, v in enumerate(row)]
        for rank, row in enumerate(rows)
    ]
    return tuple(max(col) for col in zip(*checked)), len(rows)


def run_statistics(
    step_seconds: Sequence[float] | Sequence[Sequence[float]],
    *,
    num_warmup_steps: int,
    num_measured_steps: int | None = None,
) -> RunStatistics:
    """Compute the run median from per-step times.

    Args:
        step_seconds: Either a 1-D sequence of per-step slowest-rank times or a
            2-D (ranks x steps) sequence of per-rank times, seconds. For 2-D input
            the slowest rank per step is the maximum over ranks.
        num_warmup_steps: Steps discarded at the start (DESIGN.md default 10).
        num_measured_steps: Steps whose median is reported (DESIGN.md default 20).
            None: every step after the warmup. Steps after the window are ignored
            and counted in ``num_trailing_steps``.

    Returns:
        The run's :class:`RunStatistics`.

    Raises:
        ValueError: Naming the field, when ``step_seconds`` is empty or ragged,
            holds a non-number, a non-finite or a non-positive time, when the step
            counts are not integers in range, or when fewer than
            ``num_warmup_steps + num_measured_steps`` (at least one measured) steps
            were recorded.
    """
    if (
        not isinstance(num_warmup_steps, int)
        or isinstance(num_warmup_steps, bool)
        or num_warmup_steps < 0
    ):
        raise ValueError(f"num_warmup_steps must be an integer >= 0, got {num_warmup_steps!r}")
    if num_measured_steps is not None and (
        not isinstance(num_measured_steps, int)
        or isinstance(num_measured_steps, bool)
        or num_measured_steps < 1
    ):
        raise ValueError(
            f"num_measured_steps must be an integer >= 1, got {num_measured_steps!r}"
        )
    slowest, num_ranks = _slowest_rank(step_seconds)
    available = len(slowest) - num_warmup_steps
    needed = 1 if num_measured_steps is None else num_measured_steps
    if available < needed:
        raise ValueError(
            f"step_seconds has {len(slowest)} steps, too few for num_warmup_steps="
            f"{num_warmup_steps} and num_measured_steps={needed}"
        )
    measured_count = available if num_measured_steps is None else num_measured_steps
    measured = slowest[num_warmup_steps : num_warmup_steps + measured_count]
    ordered = sorted(measured)
    modes = detect_modes(ordered)
    return RunStatistics(
        median_step_s=float(statistics.median(measured)),
        slowest_rank_step_seconds=slowest,
        measured_step_seconds=measured,
        num_warmup_steps=num_warmup_steps,
        num_measured_steps=measured_count,
        num_trailing_steps=available - measured_count,
        num_ranks=num_ranks,
        median_se_s=median_standard_error(ordered),
        mean_step_s=math.fsum(measured) / len(measured),
        multimodal=modes.multimodal,
        low_mode_s=modes.low_mode_s,
        high_mode_s=modes.high_mode_s,
        minor_mode_fraction=modes.minor_mode_fraction,
    )


def build_run_summary(role: Role, order: int, stats: RunStatistics) -> RunSummary:
    """Build the :class:`RunSummary` of a measured run, spread fields included.

    Args:
        role: ``A``, ``X`` or ``B``.
        order: 0-based position of the run in the gate's pattern.
        stats: The run's :func:`run_statistics`.

    Returns:
        The summary with ``median_step_s``, ``median_se_s``, ``num_measured_steps``
        and ``multimodal`` filled from ``stats``.
    """
    return RunSummary(
        role=role,
        order=order,
        median_step_s=stats.median_step_s,
        median_se_s=stats.median_se_s,
        num_measured_steps=stats.num_measured_steps,
        multimodal=stats.multimodal,
    )
