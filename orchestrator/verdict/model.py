"""Frozen input and output dataclasses of the verdict engine.

Vocabulary follows DESIGN.md section 1: a gate is a pattern of runs on one
allocation; controls (roles ``A`` and ``B``) bracket candidate copies (role
``X``). All step times are run medians in seconds (DESIGN.md section 2).

Bad input raises ValueError, also for wrong types (STYLE.md: ValueError for bad
input; hence the TRY004 exemptions).

Pattern rules (validated by :class:`GateMeasurement`):

* runs are given in pattern order (strictly increasing ``order``);
* at least one ``A``, at least one ``X`` and at least two controls in total
  (the second control is usually ``B``; ``A X A`` is allowed);
* every ``X`` has a control before it; its bracket is the nearest control on each
  side, and a copy after the last control (a sequential gate that stopped after a
  ``C X`` pair) is bracketed by the last control alone (see ``pattern.py``).
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Literal

Role = Literal["A", "X", "B"]
GateKind = Literal["candidate", "regate"]

ROLES: tuple[str, ...] = ("A", "X", "B")
CONTROL_ROLES: tuple[str, ...] = ("A", "B")
GATE_KINDS: tuple[str, ...] = ("candidate", "regate")
CANDIDATE_VERDICTS: tuple[str, ...] = ("accept", "neutral", "reject", "inconclusive", "failed")
REGATE_VERDICTS: tuple[str, ...] = ("pass", "regression", "improvement", "inconclusive", "failed")
"""``inconclusive`` only from the sequential policy: undecided (extend) or too noisy."""


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive_finite(name: str, value: object) -> float:
    """Return ``value`` as a float after checking it is a positive finite number.

    Args:
        name: Field name used in the error message.
        value: The number to check.

    Returns:
        ``float(value)``.

    Raises:
        ValueError: If ``value`` is not a real number, is NaN or infinite, or is <= 0.
    """
    if not _is_real(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return number


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` after checking it is an int >= 1.

    Args:
        name: Field name used in the error message.
        value: The integer to check.

    Returns:
        ``value`` unchanged.

    Raises:
        ValueError: If ``value`` is not an int (bools are rejected) or is < 1.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class RunSummary:
    """One run of a gate, reduced to its run median (DESIGN.md section 2)."""

    role: Role
    """``A`` or ``B`` (control) or ``X`` (candidate)."""
    order: int
    """0-based position of the run in the gate's pattern."""
    median_step_s: float
    """Run median: median slowest-rank step time over the measured steps, seconds.
    May be NaN when ``failed`` is true."""
    local_batch_size: int | None = None
    """Samples per rank per micro-step, or None when not recorded."""
    grad_accum_steps: int | None = None
    """Micro-steps per optimizer step, or None when not recorded."""
    world_size: int | None = None
    """Number of ranks (GPUs) of the run, or None when not recorded."""
    failed: bool = False
    """True when the run did not produce a valid measurement (DESIGN.md section 2)."""
    failure_reason: str | None = None
    """Why the run failed, shown in the ``failed`` verdict."""
    median_se_s: float | None = None
    """Standard error of the run median from the run's own measured steps, seconds
    (``run_statistics``: exact bootstrap of the median). None when not recorded; the
    calibrated policy then uses its ``min_sigma_pct`` floor alone."""
    num_measured_steps: int | None = None
    """Steps whose median is ``median_step_s``, or None when not recorded."""
    multimodal: bool | None = None
    """True when the run's measured steps form two separated groups
    (``spread.detect_modes``); None when not recorded."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if not isinstance(self.order, int) or isinstance(self.order, bool) or self.order < 0:
            raise ValueError(f"order must be an integer >= 0, got {self.order!r}")
        if not isinstance(self.failed, bool):
            raise ValueError(f"failed must be a bool, got {self.failed!r}")  # noqa: TRY004
        if self.failed:
            if not _is_real(self.median_step_s):
                raise ValueError(f"median_step_s must be a number, got {self.median_step_s!r}")
        else:
            check_positive_finite(f"median_step_s (run order {self.order})", self.median_step_s)
        for name in ("local_batch_size", "grad_accum_steps", "world_size", "num_measured_steps"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(name, value)
        if self.median_se_s is not None:
            if not _is_real(self.median_se_s) or not math.isfinite(self.median_se_s) \
                    or self.median_se_s < 0.0:
                raise ValueError(
                    f"median_se_s (run order {self.order}) must be a finite number >= 0, "
                    f"got {self.median_se_s!r}"
                )
            object.__setattr__(self, "median_se_s", float(self.median_se_s))
        if self.multimodal is not None and not isinstance(self.multimodal, bool):
            raise ValueError(f"multimodal must be a bool or None, got {self.multimodal!r}")

    @property
    def is_control(self) -> bool:
        """True for roles ``A`` and ``B``."""
        return self.role in CONTROL_ROLES


@dataclass(frozen=True)
class GateMeasurement:
    """The run medians of one gate on one allocation, in pattern order.

    Batch fields left as None are taken from the runs of that side (which must
    agree), else default to 1. An explicit value that contradicts a run raises.
    """

    runs: tuple[RunSummary, ...]
    """Runs in pattern order (strictly increasing ``order``)."""
    kind: GateKind = "candidate"
    """``candidate`` (is X an improvement?) or ``regate`` (did timing change?)."""
    mfu_numerator_pct_s: float | None = None
    """MFU numerator, FLOPs per sample / peak FLOP/s x 100, percent-seconds per
    sample (DESIGN.md section 1). None: no MFU in the verdict."""
    control_local_batch_size: int | None = None
    """Local batch of the control runs, samples per rank per micro-step."""
    control_grad_accum_steps: int | None = None
    """Gradient accumulation steps of the control runs."""
    candidate_local_batch_size: int | None = None
    """Local batch of the candidate runs, samples per rank per micro-step."""
    candidate_grad_accum_steps: int | None = None
    """Gradient accumulation steps of the candidate runs."""
    health_failed: bool = False
    """True when the allocation's health gate failed (DESIGN.md section 4)."""
    health_failure_reason: str | None = None
    """Why the health gate failed."""
    design_seed: int | None = None
    """Seed of the gate's randomised run order (``design.py``), stored with the gate;
    the ``sequential`` policy rebuilds the planned pattern from it. None: the pattern is
    judged as given (no run measured again is inserted)."""

    def __post_init__(self) -> None:
        runs = tuple(self.runs)
        object.__setattr__(self, "runs", runs)
        if self.kind not in GATE_KINDS:
            raise ValueError(f"kind must be one of {GATE_KINDS}, got {self.kind!r}")
        if not runs:
            raise ValueError("runs must not be empty")
        for run in runs:
            if not isinstance(run, RunSummary):
                raise ValueError(f"runs must hold RunSummary objects, got {run!r}")  # noqa: TRY004
        orders = [run.order for run in runs]
        if any(later <= earlier for earlier, later in itertools.pairwise(orders)):
            raise ValueError(
                f"runs must be in pattern order (strictly increasing order), got {orders}"
            )
        roles = "".join(run.role for run in runs)
        if "A" not in roles:
            raise ValueError(f"runs must include at least one control A, pattern {roles!r}")
        if "X" not in roles:
            raise ValueError(f"runs must include at least one candidate X, pattern {roles!r}")
        if sum(run.is_control for run in runs) < 2:
            raise ValueError(f"runs must include a second control (B or A), pattern {roles!r}")
        first_control = min(i for i, run in enumerate(runs) if run.is_control)
        last_control = max(i for i, run in enumerate(runs) if run.is_control)
        del last_control
        for i, run in enumerate(runs):
            if run.role == "X" and not first_control < i:
                raise ValueError(
                    f"every candidate X must have a control before it, pattern {roles!r}"
                )
        if self.design_seed is not None and (not isinstance(self.design_seed, int)
                                             or isinstance(self.design_seed, bool)
                                             or self.design_seed < 0):
            raise ValueError(f"design_seed must be an integer >= 0 or None, "
                             f"got {self.design_seed!r}")
        if self.mfu_numerator_pct_s is not None:
            check_positive_finite("mfu_numerator_pct_s", self.mfu_numerator_pct_s)
        if not isinstance(self.health_failed, bool):
            raise ValueError(f"health_failed must be a bool, got {self.health_failed!r}")  # noqa: TRY004
        for side, is_control in (("control", True), ("candidate", False)):
            side_runs = [run for run in runs if run.is_control is is_control]
            for attr, run_attr in (
                ("local_batch_size", "local_batch_size"),
                ("grad_accum_steps", "grad_accum_steps"),
            ):
                name = f"{side}_{attr}"
                object.__setattr__(self, name, _resolve_side_value(name, getattr(self, name),
                                                                  side_runs, run_attr))

    @property
    def pattern(self) -> str:
        """The roles in pattern order, e.g. ``"AXBXA"``."""
        return "".join(run.role for run in self.runs)

    @property
    def num_runs(self) -> int:
        """Number of runs in the gate (its GPU-time cost in runs)."""
        return len(self.runs)


def _resolve_side_value(
    name: str, explicit: int | None, side_runs: list[RunSummary], run_attr: str
) -> int:
    recorded = {getattr(run, run_attr) for run in side_runs} - {None}
    if explicit is not None:
        check_positive_int(name, explicit)
        if recorded and recorded != {explicit}:
            raise ValueError(
                f"{name}={explicit} contradicts the runs' {run_attr} {sorted(recorded)}"
            )
        return explicit
    if len(recorded) > 1:
        raise ValueError(f"runs disagree on {run_attr} for {name}: {sorted(recorded)}")
    return recorded.pop() if recorded else 1


@dataclass(frozen=True)
class ControlHistory:
    """Control medians of earlier gates with the SAME control identity (ledger).

    The caller matches the identity (command, recipe with overrides, environment,
    topology, GPU model, clock bin) and passes only matching gates. Each entry holds
    the control run medians of one earlier gate in pattern order, without its
    conditioning run(s) (``sequential.history_entry`` returns exactly the controls a
    gate's own verdict used); only their run-to-run spread is used, so entries from
    allocations with different absolute step times may be mixed.
    """

    pairs: tuple[tuple[float, ...], ...] = ()
    """One tuple of >= 2 control medians (seconds) per earlier gate, oldest first."""
    gate_ids: tuple[str, ...] = ()
    """Optional id of the earlier gate of each entry (same length as ``pairs``), echoed
    in the verdict as the history gates used, so a UI can link them."""

    def __post_init__(self) -> None:
        entries: list[tuple[float, ...]] = []
        for index, entry in enumerate(self.pairs):
            values = tuple(entry)
            if len(values) < 2:
                raise ValueError(f"pairs[{index}] must hold at least 2 control medians")
            entries.append(tuple(check_positive_finite(f"pairs[{index}]", v) for v in values))
        object.__setattr__(self, "pairs", tuple(entries))
        ids = tuple(str(i) for i in self.gate_ids)
        if ids and len(ids) != len(entries):
            raise ValueError(
                f"gate_ids has {len(ids)} entries, pairs has {len(entries)}; give one id per "
                "entry or none"
            )
        object.__setattr__(self, "gate_ids", ids)
