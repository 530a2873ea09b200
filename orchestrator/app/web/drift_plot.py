"""Server-side SVG of a tracked branch's measured-head medians with change points."""

from __future__ import annotations

import math
from html import escape

__all__ = ["drift_svg"]

_WIDTH, _HEIGHT = 900, 300
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 64, 16, 20, 40


def drift_svg(medians_s: list[float], labels: list[str], segments: list[tuple[int, int, float]],
              change_points: list[int], *, title: str) -> str:
    """Render the series as an inline SVG.

    Args:
        medians_s: Measured-head medians in time order, seconds (plotted in ms).
        labels: One tooltip per point (e.g. short SHA and verdict).
        segments: ``(start, end exclusive, mean seconds)`` per change-point segment
            (dashed lines).
        change_points: Indices where a new segment starts (vertical lines).
        title: Accessible title.

    Returns:
        An ``<svg>`` element; with no points, an SVG saying so.
    """
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="drift-plot" role="img" '
            f'viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" height="{_HEIGHT}">'
            f"<title>{escape(title)}</title>")
    values = [v * 1000.0 for v in medians_s if math.isfinite(v)]
    if not values or len(values) != len(medians_s):
        return (head + f'<text x="{_WIDTH / 2}" y="{_HEIGHT / 2}" text-anchor="middle" class="empty">'
                "no re-gate with a verdict yet</text></svg>")
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo * 0.99, hi * 1.01 + 1e-6
    margin = (hi - lo) * 0.1
    lo, hi = max(lo - margin, 0.0), hi + margin
    plot_w, plot_h = _WIDTH - _PAD_L - _PAD_R, _HEIGHT - _PAD_T - _PAD_B
    n = len(values)

    def x_of(i: float) -> float:
        return _PAD_L + plot_w * (i / max(n - 1, 1))

    def y_of(ms: float) -> float:
        return _PAD_T + plot_h * (1.0 - (ms - lo) / (hi - lo))

    parts = [head, f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#999"/>']
    for k in range(5):
        ms = lo + (hi - lo) * k / 4
        parts.append(f'<text x="{_PAD_L - 6}" y="{y_of(ms) + 4:.1f}" text-anchor="end" class="tick">{ms:.2f}</text>')
    for cp in change_points:
        x = x_of(cp - 0.5)
        parts.append(f'<line class="change-point" x1="{x:.1f}" x2="{x:.1f}" y1="{_PAD_T}" '
                     f'y2="{_PAD_T + plot_h}" stroke="#d62728" stroke-dasharray="4 3"/>')
    for start, end, mean_s in segments:
        y = y_of(mean_s * 1000.0)
        parts.append(f'<line class="segment" x1="{x_of(start):.1f}" x2="{x_of(max(end - 1, start)):.1f}" '
                     f'y1="{y:.1f}" y2="{y:.1f}" stroke="#2a9d8f" stroke-width="2" stroke-dasharray="6 3">'
                     f"<title>segment mean {mean_s * 1000.0:.3f} ms</title></line>")
    points = " ".join(f"{x_of(i):.1f},{y_of(v):.1f}" for i, v in enumerate(values))
    parts.append(f'<polyline class="medians" fill="none" stroke="#1f77b4" stroke-width="1.5" points="{points}"/>')
    for i, v in enumerate(values):
        parts.append(f'<circle class="point" cx="{x_of(i):.1f}" cy="{y_of(v):.1f}" r="3" fill="#1f77b4">'
                     f"<title>{escape(labels[i] if i < len(labels) else '')} {v:.3f} ms</title></circle>")
    parts.append(f'<text x="{_PAD_L + plot_w / 2}" y="{_HEIGHT - 8}" text-anchor="middle" class="axis">'
                 "re-gates in time order (dashed red: change point; dashed green: segment mean)</text>")
    parts.append(f'<text x="14" y="{_PAD_T + plot_h / 2}" transform="rotate(-90 14 {_PAD_T + plot_h / 2})" '
                 'text-anchor="middle" class="axis">measured-head median (ms)</text></svg>')
    return "".join(parts)
