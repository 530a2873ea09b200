"""Server-side SVG plot of per-step slowest-rank step times of every run of a gate.

Runs are laid end to end in run order (A, X, B, ...); each run's warmup steps are
shaded and its run median (over the measured steps) is drawn as a dashed line.
"""

from __future__ import annotations

import dataclasses
import math
from html import escape

__all__ = ["PlotRun", "step_time_svg"]

_ROLE_COLORS = {"A": "#1f77b4", "B": "#2a9d8f", "X": "#d62728"}
_WIDTH = 900
_HEIGHT = 320
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 64, 16, 20, 40


@dataclasses.dataclass(frozen=True)
class PlotRun:
    """One run's series."""

    label: str
    """Legend label, e.g. ``"A (run 0)"``."""
    role: str
    """``A``, ``X`` or ``B`` (picks the colour)."""
    step_s: tuple[float, ...]
    """Slowest-rank step times in step order, seconds."""
    num_warmup_steps: int
    """Leading steps that are warmup (shaded)."""
    median_s: float | None
    """Run median over the measured steps, seconds (dashed line)."""


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _run_marks(run: PlotRun, offset: int, x_of, y_of, step_px: float, plot_w: float,
               plot_h: float) -> list[str]:
    """SVG marks of one run: warmup shading, step polyline, median line, label, separator."""
    n = len(run.step_s)
    parts: list[str] = []
    color = _ROLE_COLORS.get(run.role, "#555")
    x0, x1 = x_of(offset) - step_px / 2, x_of(offset + n - 1) + step_px / 2
    warm = min(run.num_warmup_steps, n)
    if warm > 0:
        xw = x_of(offset + warm - 1) + step_px / 2
        parts.append(
            f'<rect class="warmup" x="{max(x0, _PAD_L):.1f}" y="{_PAD_T}" '
            f'width="{max(xw - max(x0, _PAD_L), 0):.1f}" height="{plot_h}" fill="#f2f2f2">'
            f"<title>{escape(run.label)} warmup: {warm} steps</title></rect>"
        )
    points = " ".join(
        f"{x_of(offset + i):.1f},{y_of(v * 1000.0):.1f}"
        for i, v in enumerate(run.step_s)
        if isinstance(v, (int, float)) and math.isfinite(v)
    )
    parts.append(
        f'<polyline class="run run-{escape(run.role)}" fill="none" stroke="{color}" '
        f'stroke-width="1.5" points="{points}"><title>{escape(run.label)}</title></polyline>'
    )
    if run.median_s is not None and math.isfinite(run.median_s):
        y = y_of(run.median_s * 1000.0)
        xm = x_of(offset + warm) if warm < n else x0
        parts.append(
            f'<line class="median" x1="{xm:.1f}" x2="{min(x1, _PAD_L + plot_w):.1f}" '
            f'y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" stroke-dasharray="6 3" stroke-width="2">'
            f"<title>{escape(run.label)} median {run.median_s * 1000.0:.3f} ms</title></line>"
        )
    parts.append(
        f'<text x="{(max(x0, _PAD_L) + min(x1, _PAD_L + plot_w)) / 2:.1f}" '
        f'y="{_HEIGHT - 22}" text-anchor="middle" fill="{color}" class="label">'
        f"{escape(run.label)}</text>"
    )
    if offset > 0:
        parts.append(
            f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{_PAD_T}" y2="{_PAD_T + plot_h}" stroke="#bbb"/>'
        )
    return parts


def step_time_svg(runs: list[PlotRun], *, title: str = "slowest-rank step time") -> str:
    """Render the runs as one inline SVG document fragment.

    Args:
        runs: Series in run order.
        title: Accessible title of the figure.

    Returns:
        An ``<svg>`` element as a string (milliseconds on the y axis, global step index
        on the x axis). With no steps at all, an SVG saying so.
    """
    all_values = _finite([v for r in runs for v in r.step_s] + [r.median_s for r in runs if r.median_s])
    total = sum(len(r.step_s) for r in runs)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="steps-plot" role="img" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" height="{_HEIGHT}">'
        f"<title>{escape(title)}</title>"
    )
    if not all_values or total == 0:
        return (
            head + f'<text x="{_WIDTH / 2}" y="{_HEIGHT / 2}" text-anchor="middle" '
            'class="empty">no per-step times recorded yet</text></svg>'
        )
    lo, hi = min(all_values) * 1000.0, max(all_values) * 1000.0
    if hi - lo < 1e-9:
        lo, hi = lo * 0.99, hi * 1.01 + 1e-6
    margin = (hi - lo) * 0.08
    lo, hi = max(lo - margin, 0.0), hi + margin
    plot_w = _WIDTH - _PAD_L - _PAD_R
    plot_h = _HEIGHT - _PAD_T - _PAD_B

    def x_of(i: float) -> float:
        return _PAD_L + plot_w * (i / max(total - 1, 1))

    def y_of(ms: float) -> float:
        return _PAD_T + plot_h * (1.0 - (ms - lo) / (hi - lo))

    parts = [head]
    parts.append(
        f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{plot_w}" height="{plot_h}" '
        'fill="#fff" stroke="#999"/>'
    )
    for k in range(5):
        ms = lo + (hi - lo) * k / 4
        y = y_of(ms)
        parts.append(f'<line x1="{_PAD_L}" x2="{_PAD_L + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{_PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{ms:.1f}</text>')
    parts.append(
        f'<text x="14" y="{_PAD_T + plot_h / 2}" transform="rotate(-90 14 {_PAD_T + plot_h / 2})" '
        'text-anchor="middle" class="axis">step time (ms)</text>'
    )
    offset = 0
    step_px = plot_w / max(total - 1, 1)
    for run in runs:
        if run.step_s:
            parts.extend(_run_marks(run, offset, x_of, y_of, step_px, plot_w, plot_h))
            offset += len(run.step_s)
    parts.append(
        f'<text x="{_PAD_L + plot_w / 2}" y="{_HEIGHT - 4}" text-anchor="middle" class="axis">'
        "step (runs in order; shaded: warmup; dashed: run median)</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
