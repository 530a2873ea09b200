"""The gate's measurement rule, as the driver hands it to every run (pure, stdlib only).

The allocation driver sets these variables for every run of a gate
(``orchestrator/executors/runenv.py`` :func:`measure_env`; docs/record-contract.md,
"The measurement rule in the environment"):

``AXBGATE_WARMUP_MODE`` (``fixed`` / ``steady``), ``AXBGATE_WARMUP_STEPS``,
``AXBGATE_MAX_WARMUP_STEPS``, ``AXBGATE_MEASURED_STEPS``, ``AXBGATE_MEASURED_SECONDS``
(empty: the gate measures a count), ``AXBGATE_STEADY_WINDOW``,
``AXBGATE_STEADY_TOLERANCE_PCT``, ``AXBGATE_MAX_MEASURED_STEPS`` and ``AXBGATE_TOTAL_STEPS``
(the steps a run takes under a fixed rule; under steady warmup or a time window the most it
may take).

The rule itself is DESIGN.md section 2: warmup is a fixed count, or ends once at least
``warmup_steps`` ran and the last ``steady_window`` slowest-rank step times lie within
``steady_tolerance_pct`` of their median (at most ``max_warmup_steps``); the measured window
is ``measured_steps`` steps, or the steps that fill ``measured_seconds`` at the median of
the settled warmup steps (at least ``measured_steps``, at most ``max_measured_steps``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ENV_NAMES",
    "MeasureRule",
    "measured_steps_for_window",
    "steady_state_reached",
    "total_steps",
]

ENV_NAMES = (
    "AXBGATE_WARMUP_MODE",
    "AXBGATE_WARMUP_STEPS",
    "AXBGATE_MAX_WARMUP_STEPS",
    "AXBGATE_MEASURED_STEPS",
    "AXBGATE_MEASURED_SECONDS",
    "AXBGATE_STEADY_WINDOW",
    "AXBGATE_STEADY_TOLERANCE_PCT",
    "AXBGATE_MAX_MEASURED_STEPS",
    "AXBGATE_TOTAL_STEPS",
)
"""Every variable of the rule; ``AXBGATE_WARMUP_MODE`` set means "this run is a gate's"."""


def steady_state_reached(slowest_s: list[float], window: int, tolerance_pct: float) -> bool:
    """Whether the last ``window`` slowest-rank step times agree within the tolerance.

    Args:
        slowest_s: Slowest-rank step seconds so far.
        window: How many of the latest steps must agree (>= 2).
        tolerance_pct: Largest allowed distance of any of them from their median, percent.

    Returns:
        True when at least ``window`` steps ran and each of the latest ``window`` lies
        within ``median x (1 +/- tolerance_pct / 100)``.
    """
    if len(slowest_s) < window:
        return False
    recent = slowest_s[-window:]
    mid = statistics.median(recent)
    return mid > 0 and max(abs(s - mid) for s in recent) <= mid * tolerance_pct / 100.0


def measured_steps_for_window(recent_s: list[float], seconds: float, minimum: int, maximum: int) -> int:
    """Measured steps that fill ``seconds`` at the median of ``recent_s``.

    Returns:
        ``clamp(ceil(seconds / median(recent_s)), minimum, maximum)``; ``minimum`` without
        a usable step time.
    """
    if not recent_s or statistics.median(recent_s) <= 0:
        return minimum
    return max(minimum, min(maximum, math.ceil(seconds / statistics.median(recent_s))))


def total_steps(default: int = 30, environ: Mapping[str, str] | None = None) -> int:
    """Steps to give the framework's own loop (``max_steps``, ``--train-iters``): the gate's
    ``AXBGATE_TOTAL_STEPS`` (exact under a fixed rule, the most a run may take otherwise:
    the timer stops the loop when the rule is met), else ``default`` outside a gate.

    Raises:
        ValueError: ``AXBGATE_TOTAL_STEPS`` is set but not a positive integer.
    """
    return _int(os.environ if environ is None else environ, "AXBGATE_TOTAL_STEPS", default, 1)


def _int(environ: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} must be an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={value} must be at least {minimum}")
    return value


def _float(environ: Mapping[str, str], name: str) -> float | None:
    raw = environ.get(name, "").strip()
    if not raw or raw.lower() == "none":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} must be a number of seconds (or empty)") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={raw!r} must be a positive number of seconds")
    return value


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class MeasureRule:
    """Warmup and measured window of every run of one gate (DESIGN.md section 2)."""

    warmup_mode: str = "fixed"
    """``fixed``: exactly ``warmup_steps``; ``steady``: until the step time settles."""
    warmup_steps: int = 10
    """Warmup steps (the fewest under ``steady``); DESIGN default 10."""
    max_warmup_steps: int = 50
    """Most warmup steps under ``steady``."""
    measured_steps: int = 20
    """Measured steps (the fewest under a time window); DESIGN default 20."""
    measured_seconds: float | None = None
    """Measured window, seconds of step time; None: exactly ``measured_steps``."""
    steady_window: int = 5
    """Latest slowest-rank step times that must agree to end a steady warmup."""
    steady_tolerance_pct: float = 1.0
    """Their largest distance from their median, percent."""
    max_measured_steps: int = 100000
    """Cap on the measured steps of a time window."""

    def __post_init__(self) -> None:
        if self.warmup_mode not in ("fixed", "steady"):
            raise ValueError(f"AXBGATE_WARMUP_MODE={self.warmup_mode!r} must be 'fixed' or 'steady'")
        if self.warmup_mode == "steady" and self.max_warmup_steps < max(self.warmup_steps, 2):
            raise ValueError("AXBGATE_MAX_WARMUP_STEPS must be at least AXBGATE_WARMUP_STEPS "
                             "(and 2) under steady warmup")
        if self.steady_window < 2 or not self.steady_tolerance_pct > 0:
            raise ValueError("AXBGATE_STEADY_WINDOW must be >= 2 and AXBGATE_STEADY_TOLERANCE_PCT > 0")
        if self.max_measured_steps < self.measured_steps:
            raise ValueError("AXBGATE_MAX_MEASURED_STEPS must be at least AXBGATE_MEASURED_STEPS")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MeasureRule | None:
        """The rule the driver set, or None outside a gate (no ``AXBGATE_WARMUP_MODE``).

        Raises:
            ValueError: A variable that is set holds a bad value (the message names it).
        """
        env = os.environ if environ is None else environ
        if not env.get("AXBGATE_WARMUP_MODE", "").strip():
            return None
        return cls(
            warmup_mode=env["AXBGATE_WARMUP_MODE"].strip(),
            warmup_steps=_int(env, "AXBGATE_WARMUP_STEPS", 10, 0),
            max_warmup_steps=_int(env, "AXBGATE_MAX_WARMUP_STEPS", 50, 1),
            measured_steps=_int(env, "AXBGATE_MEASURED_STEPS", 20, 1),
            measured_seconds=_float(env, "AXBGATE_MEASURED_SECONDS"),
            steady_window=_int(env, "AXBGATE_STEADY_WINDOW", 5, 2),
            steady_tolerance_pct=float(env.get("AXBGATE_STEADY_TOLERANCE_PCT", "") or 1.0),
            max_measured_steps=_int(env, "AXBGATE_MAX_MEASURED_STEPS", 100000, 1),
        )

    @property
    def fixed(self) -> bool:
        """True when every run takes exactly ``total_steps`` steps (no decision at run time)."""
        return self.warmup_mode == "fixed" and self.measured_seconds is None

    @property
    def total_steps(self) -> int:
        """Steps a run takes under a fixed rule; otherwise the most it may take."""
        warmup = self.warmup_steps if self.warmup_mode == "fixed" else self.max_warmup_steps
        window = self.measured_steps if self.measured_seconds is None else self.max_measured_steps
        return warmup + window

    def to_env(self) -> dict[str, str]:
        """The variables that describe this rule (what the driver sets)."""
        return {
            "AXBGATE_WARMUP_MODE": self.warmup_mode,
            "AXBGATE_WARMUP_STEPS": str(self.warmup_steps),
            "AXBGATE_MAX_WARMUP_STEPS": str(self.max_warmup_steps),
            "AXBGATE_MEASURED_STEPS": str(self.measured_steps),
            "AXBGATE_MEASURED_SECONDS": "" if self.measured_seconds is None else repr(self.measured_seconds),
            "AXBGATE_STEADY_WINDOW": str(self.steady_window),
            "AXBGATE_STEADY_TOLERANCE_PCT": repr(self.steady_tolerance_pct),
            "AXBGATE_MAX_MEASURED_STEPS": str(self.max_measured_steps),
            "AXBGATE_TOTAL_STEPS": str(self.total_steps),
        }

    def timing_rule(self) -> dict[str, Any]:
        """The rule as the timing record carries it (``warmup_rule``, like the trainer's)."""
        return {"mode": self.warmup_mode, "min_warmup_steps": self.warmup_steps,
                "max_warmup_steps": self.max_warmup_steps, "steady_window": self.steady_window,
                "steady_tolerance_pct": self.steady_tolerance_pct,
                "measured_seconds": self.measured_seconds, "min_measured_steps": self.measured_steps}

    def warmup_over(self, step: int, slowest_s: list[float]) -> bool:
        """Whether warmup ends before step ``step`` (0-based), given the slowest-rank times
        of the ``step`` steps run so far."""
        if self.warmup_mode == "fixed":
            return step >= self.warmup_steps
        return step >= self.max_warmup_steps or (
            step >= self.warmup_steps
            and steady_state_reached(slowest_s, self.steady_window, self.steady_tolerance_pct))

    def window_steps(self, warm_slowest_s: list[float]) -> int:
        """Measured steps once warmup is over (a count, or the steps filling the window)."""
        if self.measured_seconds is None:
            return self.measured_steps
        return measured_steps_for_window(warm_slowest_s[-self.steady_window:], self.measured_seconds,
                                         self.measured_steps, self.max_measured_steps)
