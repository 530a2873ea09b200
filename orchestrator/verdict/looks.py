"""Looks of a sequential gate: which runs count, the planned pattern, the per-look fit.

Vocabulary: the gate's runs in pattern order; the leading conditioning control run(s)
are measured but left out (``used`` runs are the rest). A look is every prefix of the
used runs that ends with a control and contains a candidate: for the canonical pattern
(conditioning) A X B X A X B ... the looks are at 3, 5, 7, ... used runs.

Per look the effect is the least-squares coefficient of the candidate indicator in
ln t_j = mu + effect [role j is X] (+ trend (i_j - mean i), i_j the run's index in the
pattern (runs are back to back, so the index is the time axis), from
``TREND_MIN_RUNS`` used runs on), with its variance factor v = [(D'D)^-1]_XX (the
estimate's variance is sigma^2 v) and the residual sum of squares with n - p degrees of
freedom. For the alternating pattern the candidate and control positions have the same
mean, so the trend column is orthogonal to the candidate column: the effect is exactly
mean(ln X) - mean(ln controls), free of any linear drift, with v = 1/n_X + 1/n_C
(1.5 for A X B, 0.833 for A X B X A, 0.367 for 11 runs); the trend term only keeps a
drift out of the residual spread. Source: ordinary least squares (e.g. Montgomery,
Design and Analysis of Experiments, ch. 10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from orchestrator.verdict.model import CONTROL_ROLES, GateMeasurement, RunSummary

TREND_MIN_RUNS = 5
"""Used runs from which a linear trend is fitted (below, it would leave too few
degrees of freedom; the alternating pattern cancels a linear trend in the effect anyway)."""


def num_conditioning(measurement: GateMeasurement, wanted: int) -> int:
    """Leading control runs that are left out as conditioning runs.

    Args:
        measurement: The gate.
        wanted: The policy's ``num_conditioning_runs``.

    Returns:
        min(wanted, controls before the first candidate - 1): at least one control
        always stays before the first candidate (so ``A X B`` keeps all its runs).
    """
    first_x = next(i for i, run in enumerate(measurement.runs) if run.role == "X")
    return max(0, min(wanted, first_x - 1))


def look_ends(roles: Sequence[str]) -> list[int]:
    """Lengths of the prefixes of the used roles that are looks (ascending).

    Args:
        roles: Roles of the used runs in pattern order (first one a control).

    Returns:
        Every e such that roles[e - 1] is a control and roles[:e] holds an X.
    """
    ends = []
    seen_x = False
    for i, role in enumerate(roles):
        seen_x = seen_x or role == "X"
        if seen_x and role in CONTROL_ROLES:
            ends.append(i + 1)
    return ends


def next_pair(roles: Sequence[str]) -> tuple[str, ...]:
    """The roles that extend a pattern by one look: X then the other control side.

    Args:
        roles: The pattern so far (ends with a control).

    Returns:
        ``("X", "B")`` after a last control ``A``, ``("X", "A")`` after ``B``.
    """
    last_control = next(r for r in reversed(roles) if r in CONTROL_ROLES)
    return ("X", "B" if last_control == "A" else "A")


def planned_roles(roles: Sequence[str], max_runs: int) -> tuple[str, ...]:
    """Extend a pattern by X + control pairs while the run budget allows.

    Args:
        roles: The gate's roles so far, conditioning runs included.
        max_runs: Run budget, conditioning runs included.

    Returns:
        The planned pattern (the gate's own when it already uses the budget or more).
    """
    plan = list(roles)
    while len(plan) + 2 <= max_runs:
        plan.extend(next_pair(plan))
    return tuple(plan)


@dataclass(frozen=True)
class Design:
    """Least-squares design of one look (depends on roles and positions only)."""

    solve: np.ndarray
    """Pseudo-inverse of the design matrix, shape (p, n), float64."""
    matrix: np.ndarray
    """Design matrix, shape (n, p), float64: intercept, candidate indicator(, trend)."""
    var_factor: float
    """[(D'D)^-1] of the candidate coefficient: Var(effect) = sigma^2 var_factor."""
    dof: int
    """Residual degrees of freedom n - p."""


@lru_cache(maxsize=4096)
def design(key: tuple[tuple[bool, int], ...]) -> Design:
    """Build (cached) the design of a look.

    Args:
        key: One (is candidate, index) per used run of the look.

    Returns:
        The look's :class:`Design`.
    """
    n = len(key)
    is_x = np.array([1.0 if x else 0.0 for x, _ in key])
    columns = [np.ones(n), is_x]
    if n >= TREND_MIN_RUNS:
        orders = np.array([float(o) for _, o in key])
        trend = orders - orders.mean()
        candidate = np.column_stack(columns + [trend])
        if np.linalg.matrix_rank(candidate) == 3:
            columns.append(trend)
    matrix = np.column_stack(columns)
    gram_inv = np.linalg.inv(matrix.T @ matrix)
    return Design(
        solve=gram_inv @ matrix.T,
        matrix=matrix,
        var_factor=float(gram_inv[1, 1]),
        dof=n - matrix.shape[1],
    )


def design_key(roles: Sequence[str]) -> tuple[tuple[bool, int], ...]:
    """The cache key of a look's design: candidate flag and index of each used run.

    Args:
        roles: Roles of the look's used runs, back to back in pattern order.

    Returns:
        The key for :func:`design`.
    """
    return tuple((role == "X", i) for i, role in enumerate(roles))


@dataclass(frozen=True)
class Fit:
    """The estimate of one look."""

    effect: float
    """Candidate minus control, natural log of the step-time ratio."""
    var_factor: float
    """Variance factor of ``effect`` (Var = sigma^2 var_factor)."""
    sum_sq: float
    """Residual sum of squares of the log medians."""
    dof: int
    """Residual degrees of freedom."""


def fit_look(runs: Sequence[RunSummary]) -> Fit:
    """Least-squares fit of one look's used runs (module docstring).

    Args:
        runs: The look's used runs in pattern order.

    Returns:
        The :class:`Fit`.
    """
    spec = design(design_key([r.role for r in runs]))
    logs = np.array([math.log(r.median_step_s) for r in runs])
    coef = spec.solve @ logs
    resid = logs - spec.matrix @ coef
    return Fit(
        effect=float(coef[1]),
        var_factor=spec.var_factor,
        sum_sq=float(resid @ resid),
        dof=spec.dof,
    )
