"""Policy registry and the single entry point :func:`judge`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from orchestrator.verdict.drift import decide_drift_candidate
from orchestrator.verdict.model import (
    ControlHistory,
    GateMeasurement,
    RunSummary,
    check_positive_finite,
)
from orchestrator.verdict.pattern import compute_efficiency, compute_gate_numbers
from orchestrator.verdict.policy import DriftPolicy, Policy, RatioCIPolicy, SequentialPolicy
from orchestrator.verdict.regate import decide_drift_regate, decide_ratio_ci_regate
from orchestrator.verdict.result import SequentialDetail, StatisticalDetail, Verdict
from orchestrator.verdict.sequential import evaluate as evaluate_sequential
from orchestrator.verdict.sequential import initial_roles
from orchestrator.verdict.statistical import compute_ratio_interval, decide_ratio_ci_candidate

_POLICIES: dict[str, type[Policy]] = {
    DriftPolicy.name: DriftPolicy,
    RatioCIPolicy.name: RatioCIPolicy,
    SequentialPolicy.name: SequentialPolicy,
}
POLICY_NAMES: tuple[str, ...] = tuple(_POLICIES)
"""Names accepted by :func:`get_policy`; ``drift`` is always first."""
DEFAULT_POLICY_NAME = SequentialPolicy.name
"""The primary policy when a gate names none: the calibrated sequential policy (DESIGN.md
section 3, issue 12). ``drift`` (the campaign rule) stays available by name."""


def get_policy(name: str, **params: object) -> Policy:
    """Build a policy by name.

    Args:
        name: One of :data:`POLICY_NAMES`.
        **params: Policy parameters (see the policy dataclass); a None value
            means "use the default", so callers may pass unset CLI options.

    Returns:
        The validated policy.

    Raises:
        ValueError: Naming the unknown policy or parameter and listing the valid
            ones, or naming an invalid parameter value.
    """
    if name not in _POLICIES:
        raise ValueError(f"unknown policy {name!r}; valid policies: {', '.join(POLICY_NAMES)}")
    cls = _POLICIES[name]
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(unknown)} for policy {name!r}; "
            f"valid parameters: {', '.join(valid)}"
        )
    return cls(**{k: v for k, v in params.items() if v is not None})


def _failure_reason(measurement: GateMeasurement) -> str | None:
    if measurement.health_failed:
        return f"health gate failed: {measurement.health_failure_reason or 'no reason given'}"
    for run in measurement.runs:
        if run.failed:
            return (
                f"run {run.role} (order {run.order}) failed: "
                f"{run.failure_reason or 'no reason given'}"
            )
    return None


def judge(
    measurement: GateMeasurement, policy: Policy, *, history: ControlHistory | None = None
) -> Verdict:
    """Compute the timing verdict of one gate.

    Args:
        measurement: The gate's run medians in pattern order.
        policy: A policy from :func:`get_policy` (or built directly).
        history: Control medians of earlier gates with the same control identity,
            used by ``ratio-ci`` and ``sequential`` for calibration; ignored by ``drift``.

    Returns:
        The :class:`Verdict`; ``failed`` with the reason when the health gate or
        any run failed (health first, then the first failed run in pattern order).

    Raises:
        ValueError: If ``policy`` is not a registered policy type.
    """
    if type(policy) not in _POLICIES.values():
        raise ValueError(f"unknown policy object {policy!r}; valid policies: {POLICY_NAMES}")
    base = {
        "policy": policy.name,
        "policy_version": policy.version,
        "params": policy.params(),
        "kind": measurement.kind,
        "pattern": measurement.pattern,
        "num_runs": measurement.num_runs,
    }
    failure = _failure_reason(measurement)
    if failure is not None:
        return Verdict(verdict="failed", reason=failure, **base)
    numbers = compute_gate_numbers(measurement)
    stats: StatisticalDetail | None = None
    sequential: SequentialDetail | None = None
    if isinstance(policy, DriftPolicy):
        if measurement.kind == "candidate":
            decision = decide_drift_candidate(numbers, policy)
        else:
            decision = decide_drift_regate(numbers, policy)
    elif isinstance(policy, SequentialPolicy):
        outcome = evaluate_sequential(measurement, policy, history)
        decision, stats, sequential = outcome.decision, outcome.statistics, outcome.detail
    else:
        assert isinstance(policy, RatioCIPolicy)
        stats = compute_ratio_interval(numbers, policy, history, kind=measurement.kind,
                                       runs=measurement.runs)
        if measurement.kind == "candidate":
            decision = decide_ratio_ci_candidate(numbers, stats, policy)
        else:
            decision = decide_ratio_ci_regate(numbers, stats, policy)
    eff = compute_efficiency(measurement, numbers)
    return Verdict(
        verdict=decision.verdict,
        reason=decision.reason,
        midpoint_s=numbers.midpoint_s,
        candidate_s=numbers.candidate_s,
        drift_pct=numbers.drift_pct,
        delta_ms=numbers.delta_ms,
        delta_pct=numbers.delta_pct,
        threshold_pct=decision.threshold_pct,
        sign_conflict=numbers.sign_conflict,
        brackets=numbers.brackets,
        mfu_candidate_pct=eff.mfu_candidate_pct,
        mfu_control_pct=eff.mfu_control_pct,
        mfu_points=eff.mfu_points,
        throughput_candidate=eff.throughput_candidate,
        throughput_control=eff.throughput_control,
        throughput_scope=eff.throughput_scope,
        statistics=stats,
        sequential=sequential,
        **base,
    )


def next_roles(
    measurement: GateMeasurement | Sequence[RunSummary] | None,
    policy: Policy,
    *,
    history: ControlHistory | None = None,
    design_seed: int | None = None,
) -> tuple[str, ...]:
    """Roles the allocation should run next; empty when the gate is decided or done.

    The allocation driver calls this after each run with every run measured so far and
    exactly the history the stored verdict will use. The answer is read off the same walk
    over the looks as :func:`judge`'s (``sequential.evaluate``), so the decision to extend
    and the stored verdict cannot disagree: the rest of the current pair, the next pair of
    the planned pattern, or the role of an outlier run to measure again.

    Args:
        measurement: The runs so far: a :class:`GateMeasurement`, a sequence of
            :class:`RunSummary` in pattern order (may end mid-pair), or None / empty.
        policy: The gate's policy. Only ``sequential`` extends; other policies get
            their pattern from the gate request and return () here.
        history: Control history of the same control identity.
        design_seed: Seed of the gate's run order (ignored when ``measurement`` is a
            :class:`GateMeasurement`, which carries its own).

    Returns:
        No runs yet: the first look's roles (e.g. ``("A", "A", "X", "B")``). Otherwise
        the roles to run next, or ``()`` (decided, budget used up, a failed run or a
        failed health gate).

    Raises:
        ValueError: If the runs do not follow the policy's planned pattern.
    """
    if not isinstance(policy, SequentialPolicy):
        return ()
    if isinstance(measurement, GateMeasurement):
        verdict = judge(measurement, policy, history=history)
        return verdict.sequential.next_roles if verdict.sequential is not None else ()
    runs = tuple(measurement or ())
    if any(run.failed for run in runs):
        return ()
    roles = tuple(run.role for run in runs)
    first = initial_roles(policy)
    if len(roles) < len(first):
        if roles != first[: len(roles)]:
            raise ValueError(f"runs {''.join(roles)!r} do not start the pattern "
                             f"{''.join(first)!r}")
        return first[len(roles):]
    return next_roles(GateMeasurement(runs=runs, design_seed=design_seed), policy,
                      history=history)


def measurement_from_pattern(
    pattern: str, medians_s: Sequence[float], **fields: object
) -> GateMeasurement:
    """Build a :class:`GateMeasurement` from a role string and run medians.

    Args:
        pattern: Roles in order, e.g. ``"AXBXA"``.
        medians_s: One run median per role, seconds.
        **fields: Other :class:`GateMeasurement` fields (kind, MFU numerator, ...).

    Returns:
        The validated measurement.

    Raises:
        ValueError: If the lengths differ or any value is invalid.
    """
    medians = list(medians_s)
    if len(pattern) != len(medians):
        raise ValueError(f"pattern {pattern!r} has {len(pattern)} runs, medians_s {len(medians)}")
    runs = tuple(
        RunSummary(role=role, order=i, median_step_s=m)  # type: ignore[arg-type]
        for i, (role, m) in enumerate(zip(pattern, medians))
    )
    return GateMeasurement(runs=runs, **fields)  # type: ignore[arg-type]


def verdict_from_medians(
    a_s: float,
    x_s: float,
    b_s: float,
    *,
    kind: str = "candidate",
    policy: Policy | str = DEFAULT_POLICY_NAME,
    history: ControlHistory | None = None,
    mfu_numerator_pct_s: float | None = None,
    control_local_batch_size: int | None = None,
    control_grad_accum_steps: int | None = None,
    candidate_local_batch_size: int | None = None,
    candidate_grad_accum_steps: int | None = None,
) -> Verdict:
    """Judge one A X B gate from its three run medians (the CLI's ``verdict``).

    Args:
        a_s: Run median of control A, seconds.
        x_s: Run median of candidate X, seconds.
        b_s: Run median of control B, seconds.
        kind: ``candidate`` or ``regate``.
        policy: A policy or a policy name (default parameters).
        history: Control history of the same control identity (``ratio-ci``,
            ``sequential``).
        mfu_numerator_pct_s: MFU numerator, percent-seconds per sample.
        control_local_batch_size: Control local batch (default 1).
        control_grad_accum_steps: Control gradient accumulation (default 1).
        candidate_local_batch_size: Candidate local batch (default 1).
        candidate_grad_accum_steps: Candidate gradient accumulation (default 1).

    Returns:
        The :class:`Verdict`.

    Raises:
        ValueError: Naming the field, for a non-positive or non-finite median or
            any other invalid input.
    """
    for name, value in (("a_s", a_s), ("x_s", x_s), ("b_s", b_s)):
        check_positive_finite(name, value)
    resolved = get_policy(policy) if isinstance(policy, str) else policy
    measurement = GateMeasurement(
        runs=(
            RunSummary(role="A", order=0, median_step_s=a_s),
            RunSummary(role="X", order=1, median_step_s=x_s),
            RunSummary(role="B", order=2, median_step_s=b_s),
        ),
        kind=kind,  # type: ignore[arg-type]
        mfu_numerator_pct_s=mfu_numerator_pct_s,
        control_local_batch_size=control_local_batch_size,
        control_grad_accum_steps=control_grad_accum_steps,
        candidate_local_batch_size=candidate_local_batch_size,
        candidate_grad_accum_steps=candidate_grad_accum_steps,
    )
    return judge(measurement, resolved, history=history)
