"""The ONE builder of a gate's verdicts, used by every caller that judges.

The CLI's ``axbgate verdict``, the API preview, the allocation driver's decision to extend
a pattern and the verdicts stored with a finished gate all go through
:func:`judge_policies`, with the control history the caller was given (for a stored gate:
the history taken when it was dispatched), so no two of them can disagree on the same
numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.verdict.model import ControlHistory, GateMeasurement, RunSummary, Verdict
from orchestrator.verdict.registry import POLICY_NAMES, get_policy, judge

__all__ = ["history_from_pairs", "judge_policies", "mfu_numerator", "verdict_kind"]


def verdict_kind(gate_kind: str) -> str:
    """The verdict table a gate kind is judged with: ``regate`` for re-gates and bisection
    steps (did timing change?), ``candidate`` otherwise (is X an improvement?)."""
    return "regate" if gate_kind in ("regate", "bisect") else "candidate"


def mfu_numerator(flops_per_sample: float | None, peak_flops_per_gpu: float | None) -> float | None:
    """MFU numerator, percent-seconds per sample: FLOPs per sample / peak FLOP/s x 100
    (DESIGN.md section 1); ``None`` when either input is missing or not positive."""
    if not flops_per_sample or not peak_flops_per_gpu or peak_flops_per_gpu <= 0:
        return None
    return float(flops_per_sample) / float(peak_flops_per_gpu) * 100.0


def history_from_pairs(pairs: Sequence[Sequence[float]] | None) -> ControlHistory | None:
    """A :class:`ControlHistory` from stored control-median tuples (seconds), or ``None``.

    Raises:
        ValueError: An entry holds fewer than 2 medians or a non-positive one.
    """
    if not pairs:
        return None
    return ControlHistory(pairs=tuple(tuple(float(v) for v in pair) for pair in pairs))


def judge_policies(
    runs: Sequence[RunSummary],
    *,
    kind: str,
    policy: str,
    params: Mapping[str, Any] | None = None,
    history: ControlHistory | None = None,
    mfu_numerator_pct_s: float | None = None,
    others: bool = True,
    **measurement_fields: Any,
) -> list[Verdict]:
    """Judge one gate's runs with its policy and, side by side, every other policy.

    Args:
        runs: The gate's runs in pattern order (run medians in seconds).
        kind: ``candidate`` or ``regate`` (see :func:`verdict_kind`).
        policy: Name of the primary policy.
        params: Parameters of the primary policy (the others use their defaults).
        history: Control medians of earlier gates of the same control identity.
        mfu_numerator_pct_s: MFU numerator, percent-seconds per sample.
        others: Also judge with every other registered policy (DESIGN.md section 3:
            policies are reported side by side).
        **measurement_fields: Other :class:`GateMeasurement` fields (batch sizes of the
            two sides, health failure).

    Returns:
        The primary verdict first, then one per other policy in registry order.

    Raises:
        ValueError: Unknown policy or parameter, or invalid runs (naming the field).
    """
    measurement = GateMeasurement(runs=tuple(runs), kind=kind,  # type: ignore[arg-type]
                                  mfu_numerator_pct_s=mfu_numerator_pct_s, **measurement_fields)
    names = [policy] + ([n for n in POLICY_NAMES if n != policy] if others else [])
    verdicts = []
    for name in names:
        chosen = get_policy(name, **(dict(params or {}) if name == policy else {}))
        verdicts.append(judge(measurement, chosen, history=history))
    return verdicts
