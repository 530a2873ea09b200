"""How precisely a run's measured steps pin down its run median (pure).

The interval is the distribution-free confidence interval of a median from order
statistics: with ``n`` measured steps sorted, ``j = F^-1(alpha/2)`` of Binomial(n, 1/2)
(scipy.stats.binom.ppf) gives the interval ``[x_(j), x_(n-j+1)]`` (1-based) with coverage
of at least ``1 - alpha`` (Conover, Practical Nonparametric Statistics, 3rd ed., section
3.2). It says what the measured window bought within the run; it does NOT contain the
run-to-run (allocation) noise, which the verdict policies calibrate separately
(DESIGN.md section 3).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy.stats import binom

__all__ = ["median_interval_halfwidth_pct"]


def median_interval_halfwidth_pct(measured_s: Sequence[float], *, alpha: float = 0.05) -> float | None:
    """Half-width of the order-statistic interval of the median, percent of the median.

    Args:
        measured_s: The measured slowest-rank step times of one run, seconds.
        alpha: 1 - coverage of the interval (0.05: 95%).

    Returns:
        ``100 x (x_(n-j+1) - x_(j)) / 2 / median``, or ``None`` with fewer than 2 finite
        positive step times.

    Raises:
        ValueError: ``alpha`` outside (0, 1).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    values = sorted(float(v) for v in measured_s if math.isfinite(v) and v > 0)
    n = len(values)
    if n < 2:
        return None
    j = max(1, int(binom.ppf(alpha / 2.0, n, 0.5)))
    low, high = values[j - 1], values[n - j]
    median = statistics.median(values)
    return 100.0 * (high - low) / 2.0 / median
