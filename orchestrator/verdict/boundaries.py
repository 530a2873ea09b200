"""Group-sequential boundaries: error spending across the looks of one gate.

A gate is looked at after A X B and after every further X + control pair. Testing at
the same fixed level at every look would inflate the false-accept rate (Armitage,
McPherson & Rowe 1969); instead each side (accept, reject) spends its error ``alpha``
over the looks with the Lan-DeMets approach (Lan & DeMets 1983, Biometrika 70:659-663)
and the Hwang-Shih-DeCani family (Hwang, Shih & DeCani 1990, Stat. Med. 9:1439-1445):

    alpha(t) = alpha (1 - exp(-gamma t)) / (1 - exp(-gamma)),  alpha(t) = alpha t at gamma 0,

where t is the information fraction of a look (variance of the final planned estimate
divided by the variance of this look's estimate). Boundary c_k of look k solves

    P(|Z_1| < c_1, ..., |Z_{k-1}| < c_{k-1}, Z_k >= c_k) = alpha(t_k) - alpha(t_{k-1})

for the canonical joint distribution of the standardized estimates (Z_k = S_k / sqrt(t_k),
S a Brownian motion; Jennison & Turnbull 2000, Group Sequential Methods, ch. 3 and 7),
by the recursive numerical integration of Armitage et al. 1969 (Jennison & Turnbull
ch. 19) on a grid. The least-squares estimates of successive looks are nested and
efficient, so their covariance is exactly canonical for the alternating pattern.
Both sides are symmetric, so the lower boundary is -c_k. With an estimated sigma the
look's nominal one-sided level 1 - Phi(c_k) is mapped to a Student t quantile at the
look's degrees of freedom (Jennison & Turnbull sec. 3.8).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize as _scipy_optimize
from scipy import stats as _scipy_stats

GRID_POINTS = 401
"""Points of the integration grid per look (error of the boundaries < 1e-4 in z)."""
NO_BOUNDARY = math.inf
"""Boundary of a look that spends no error (it can never decide)."""


def spent_alpha(fraction: float, alpha: float, gamma: float) -> float:
    """Cumulative one-sided error spent at information fraction ``fraction``.

    Args:
        fraction: Information fraction in [0, 1].
        alpha: Total one-sided error per side.
        gamma: Hwang-Shih-DeCani parameter.

    Returns:
        alpha(t), between 0 and ``alpha``.
    """
    t = min(max(fraction, 0.0), 1.0)
    if abs(gamma) < 1e-12:
        return alpha * t
    return alpha * (-math.expm1(-gamma * t)) / (-math.expm1(-gamma))


def _trapezoid_weights(grid: np.ndarray) -> np.ndarray:
    weights = np.full(grid.shape, grid[1] - grid[0])
    weights[0] *= 0.5
    weights[-1] *= 0.5
    return weights


@lru_cache(maxsize=512)
def z_boundaries(fractions: tuple[float, ...], alpha: float, gamma: float) -> tuple[float, ...]:
    """Upper boundaries (standard-normal scale) of each look; the lower ones are their negatives.

    Args:
        fractions: Information fractions of the looks, increasing, in (0, 1]. A look
            whose fraction does not exceed the previous one spends nothing.
        alpha: Total one-sided error per side.
        gamma: Hwang-Shih-DeCani parameter.

    Returns:
        One boundary per look; :data:`NO_BOUNDARY` for looks that spend nothing.

    Raises:
        ValueError: If a fraction is outside (0, 1] or alpha outside (0, 0.5).
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    increments = []
    prev = 0.0
    for t in fractions:
        cum = spent_alpha(t, alpha, gamma)
        increments.append(max(cum - spent_alpha(prev, alpha, gamma), 0.0) if t > prev + 1e-12
                          else 0.0)
        prev = max(prev, t)
    return z_boundaries_spending(tuple(fractions), tuple(increments))


@lru_cache(maxsize=512)
def z_boundaries_spending(fractions: tuple[float, ...],
                          increments: tuple[float, ...]) -> tuple[float, ...]:
    """Boundaries that spend a given one-sided error at each look (the recursion above).

    Args:
        fractions: Information fractions of the looks, increasing, in (0, 1].
        increments: One-sided error each look spends (>= 0; a look with 0, or whose
            fraction does not exceed the previous spending look's, spends nothing).

    Returns:
        One boundary per look, standard-normal scale; :data:`NO_BOUNDARY` where nothing
        is spent.

    Raises:
        ValueError: A fraction outside (0, 1], a negative increment, lengths that differ,
            or increments summing to 0.5 or more.
    """
    if len(fractions) != len(increments):
        raise ValueError(f"{len(fractions)} fractions but {len(increments)} increments")
    for t in fractions:
        if not 0.0 < t <= 1.0 + 1e-12:
            raise ValueError(f"information fractions must be in (0, 1], got {fractions}")
    if any(i < 0.0 for i in increments) or sum(increments) >= 0.5:
        raise ValueError(f"increments must be >= 0 and sum below 0.5, got {increments}")
    out: list[float] = []
    grid = dens = None
    prev_t = 0.0
    for t, target in zip(fractions, increments):
        if t <= prev_t + 1e-12 or target <= 0.0:
            out.append(NO_BOUNDARY)
            continue
        if grid is None:
            c = float(_scipy_stats.norm.isf(target))
        else:
            sd = math.sqrt(t - prev_t)
            mass = _trapezoid_weights(grid) * dens

            def excess(c: float, mass: np.ndarray = mass, grid: np.ndarray = grid,
                       sd: float = sd, t: float = t, target: float = target) -> float:
                return float(np.sum(mass * _scipy_stats.norm.sf((c * math.sqrt(t) - grid) / sd))
                             - target)

            c = float(_scipy_optimize.brentq(excess, 0.0, 40.0, xtol=1e-9)) \
                if excess(0.0) > 0.0 else 0.0
        out.append(c)
        half = c * math.sqrt(t)
        new_grid = np.linspace(-half, half, GRID_POINTS)
        if grid is None:
            dens = _scipy_stats.norm.pdf(new_grid, scale=math.sqrt(t))
        else:
            sd = math.sqrt(t - prev_t)
            kernel = _scipy_stats.norm.pdf((new_grid[:, None] - grid[None, :]) / sd) / sd
            dens = kernel @ (_trapezoid_weights(grid) * dens)
        grid = new_grid
        prev_t = t
    return tuple(out)
