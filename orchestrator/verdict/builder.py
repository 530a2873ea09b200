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

from orchestrator.verdict.model import ControlHistory, GateMeasurement, RunSummary
from orchestrator.verdict.registry import POLICY_NAMES, get_policy, judge, next_roles
from orchestrator.verdict.result import Verdict
from orchestrator.verdict.runstats import run_statistics

__all__ = [
    "history_from_pairs",
    "judge_policies",
    "mfu_numerator",
    "plan_next_roles",
    "summary_from_fields",
    "verdict_kind",
]


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


def history_from_pairs(pairs: Sequence[Sequence[float]] | None,
                       gate_ids: Sequence[int | str] | None = None) -> ControlHistory | None:
    """A :class:`ControlHistory` from stored control-median tuples (seconds), or ``None``.

    ``gate_ids`` (one per entry, echoed in the verdict as the history gates used) is
    dropped when its length does not match ``pairs`` (a gate stored before ids were kept).

    Raises:
        ValueError: An entry holds fewer than 2 medians or a non-positive one.
    """
    if not pairs:
        return None
    ids = tuple(str(i) for i in gate_ids or ())
    return ControlHistory(pairs=tuple(tuple(float(v) for v in pair) for pair in pairs),
                          gate_ids=ids if len(ids) == len(pairs) else ())


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


def summary_from_fields(role: str, order: int, fields: Mapping[str, Any]) -> RunSummary:
    """The verdict engine's view of one measured run, from its stored/measured fields.

    Args:
        role: ``A``, ``X`` or ``B``.
        order: Position of the run in the gate's pattern.
        fields: ``median_step_s`` and, when known, ``slowest_rank_step_s`` with
            ``num_warmup_steps``/``num_measured_steps`` (for the median's standard error
            and multimodality), ``local_batch_size``, ``grad_accum_steps``, ``world_size``.

    Returns:
        The :class:`RunSummary`; the spread fields stay None without the per-step series.
    """
    spread: dict[str, Any] = {}
    times = fields.get("slowest_rank_step_s") or []
    warmup, measured = fields.get("num_warmup_steps"), fields.get("num_measured_steps")
    if times and warmup is not None and measured and len(times) >= warmup + measured:
        stats = run_statistics(times, num_warmup_steps=warmup, num_measured_steps=measured)
        spread = {"median_se_s": stats.median_se_s, "num_measured_steps": stats.num_measured_steps,
                  "multimodal": stats.multimodal}
    return RunSummary(role=role, order=order, median_step_s=float(fields["median_step_s"]),  # type: ignore[arg-type]
                      local_batch_size=fields.get("local_batch_size"),
                      grad_accum_steps=fields.get("grad_accum_steps"),
                      world_size=fields.get("world_size"), **spread)


def plan_next_roles(runs: Sequence[RunSummary], *, policy: str, params: Mapping[str, Any] | None,
                    history: ControlHistory | None,
                    design_seed: int | None = None) -> tuple[str, ...]:
    """Roles the allocation runs next under the gate's primary policy (empty: stop).

    The same policy, parameters, history and design seed as :func:`judge_policies` gets
    for the stored verdict, so extending and the stored verdict never disagree.
    """
    return next_roles(tuple(runs), get_policy(policy, **dict(params or {})), history=history,
                      design_seed=design_seed)
