"""Spread of one run's measured steps: the run median's standard error and multimodality.

Both are pure functions of the measured slowest-rank step times of ONE run (seconds).
They never see run-to-run (allocation) noise; the calibrated policy uses them only as
a floor under the run-to-run sigma (``calibration.py``) and as a report.

* Standard error of the run median, exact bootstrap: the m-th order statistic of a
  resample of the n measured steps equals the i-th smallest step with probability
  w_i = F(i / n) - F((i - 1) / n), F the Beta(m, n - m + 1) CDF, m = floor(n / 2 + 0.5)
  (the probability that at least m of n draws fall at or below x_(i)); the standard
  error is sqrt(sum w_i x_(i)^2 - (sum w_i x_(i))^2). Source: Maritz & Jarrett (1978),
  JASA 73:194-196; Hutson & Ernst (2000), JRSS B 62:89-94 (exact bootstrap moments of
  L-estimators). For even n the run median is the mean of the two middle steps; the
  lower middle order statistic's error is used for it (same order of magnitude; it is
  only a floor). When the steps are bimodal (each step 1.00 or 1.12 at random) the
  resampled median jumps between the modes, so this error is about half the mode gap:
  exactly the run-to-run jump of such a median, which a spread computed from medians
  alone cannot see when two controls happen to land on the same mode.
* Multimodality: the measured steps are split into two groups at the cut that
  maximizes the between-group sum of squares (optimal 1-D two-means, Otsu 1979), with
  at least ``max(3, 20%)`` of the steps in each group. The run is ``multimodal`` when
  Ashman's D = sqrt(2) |m1 - m2| / sqrt(s1^2 + s2^2) >= 5 (Ashman, Bird & Zepf 1994,
  AJ 108:2348; D > 2 separates two Gaussian components, but the optimal split of ONE
  normal sample already gives D ~ 2.7, so the threshold is raised), and the group means
  differ by at least 0.1% (timer quantization is not a mode). Measured on
  simulated runs of 20 steps (5000 each): normal 0.2% flagged, uniform 4%, 3% hiccups
  of +15% 0.4%, a 50/50 mixture of 1.00 and 1.12 s steps 99.8%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from scipy import stats as _scipy_stats

MIN_STEPS_FOR_MODES = 10
"""Fewer measured steps than this are never called multimodal (too few to tell)."""
MIN_MODE_FRACTION = 0.2
"""Smallest share of the measured steps in the minor group of a split."""
MIN_MODE_STEPS = 3
"""Smallest number of steps in the minor group of a split."""
ASHMAN_D_THRESHOLD = 5.0
"""Ashman's D at or above which a run is called multimodal (see module docstring)."""
MIN_MODE_GAP_FRACTION = 0.001
"""Smallest gap between the group means, as a fraction of the faster group's mean, that
counts as two modes (so timer quantization of identical steps is not a second mode)."""


@lru_cache(maxsize=256)
def _median_bootstrap_weights(n: int) -> tuple[float, ...]:
    m = int(n / 2 + 0.5)
    cdf = _scipy_stats.beta.cdf([i / n for i in range(n + 1)], m, n - m + 1)
    return tuple(float(cdf[i + 1] - cdf[i]) for i in range(n))


def median_standard_error(sorted_steps: Sequence[float]) -> float:
    """Exact-bootstrap standard error of the median of one run's measured steps.

    Args:
        sorted_steps: Measured step times in ascending order, seconds (>= 1 value).

    Returns:
        The standard error, seconds (0.0 for a single step or identical steps).

    Raises:
        ValueError: If ``sorted_steps`` is empty.
    """
    n = len(sorted_steps)
    if n == 0:
        raise ValueError("sorted_steps must not be empty")
    weights = _median_bootstrap_weights(n)
    first = math.fsum(w * x for w, x in zip(weights, sorted_steps))
    second = math.fsum(w * (x - first) ** 2 for w, x in zip(weights, sorted_steps))
    return math.sqrt(max(second, 0.0))


@dataclass(frozen=True)
class Modality:
    """Result of the two-group split of one run's measured steps."""

    multimodal: bool
    """True when the two groups are separated (Ashman's D >= 5)."""
    low_mode_s: float | None
    """Mean of the faster group, seconds; None when too few steps to split."""
    high_mode_s: float | None
    """Mean of the slower group, seconds; None when too few steps to split."""
    minor_mode_fraction: float | None
    """Share of the steps in the smaller group (0-0.5); None when not split."""


def _variance(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def detect_modes(sorted_steps: Sequence[float]) -> Modality:
    """Split one run's measured steps into two groups and test their separation.

    Args:
        sorted_steps: Measured step times in ascending order, seconds.

    Returns:
        The :class:`Modality`; ``multimodal`` is False below 10 steps.
    """
    n = len(sorted_steps)
    if n < MIN_STEPS_FOR_MODES:
        return Modality(False, None, None, None)
    min_group = max(MIN_MODE_STEPS, math.ceil(MIN_MODE_FRACTION * n))
    prefix = [0.0]
    for x in sorted_steps:
        prefix.append(prefix[-1] + x)
    best_k, best_between = min_group, -1.0
    for k in range(min_group, n - min_group + 1):
        mean_low = prefix[k] / k
        mean_high = (prefix[n] - prefix[k]) / (n - k)
        between = k * (n - k) / n * (mean_high - mean_low) ** 2
        if between > best_between:
            best_k, best_between = k, between
    low, high = sorted_steps[:best_k], sorted_steps[best_k:]
    mean_low, mean_high = math.fsum(low) / len(low), math.fsum(high) / len(high)
    within = _variance(low) + _variance(high)
    gap = mean_high - mean_low
    if gap < MIN_MODE_GAP_FRACTION * mean_low:
        separated = False
    elif within > 0.0:
        separated = math.sqrt(2.0) * gap / math.sqrt(within) >= ASHMAN_D_THRESHOLD
    else:
        separated = True
    return Modality(
        multimodal=separated,
        low_mode_s=mean_low,
        high_mode_s=mean_high,
        minor_mode_fraction=min(best_k, n - best_k) / n,
    )
