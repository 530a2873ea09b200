"""Server-side SVG of a gate's candidate copies: each X run's delta against the control
midpoint of its two neighbours (with the range against either neighbour), the gate's
estimate with the primary policy's interval, and the policy's decision band."""

from __future__ import annotations

import math
from html import escape

from orchestrator.app.web.headline import CopyDelta, DecisionBand

__all__ = ["delta_svg"]

_WIDTH = 900
_ROW = 30
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 190, 24, 14, 44


def _ticks(lo: float, hi: float) -> list[float]:
    """About six round tick values between ``lo`` and ``hi``."""
    raw = (hi - lo) / 6
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def delta_svg(copies: list[CopyDelta], band: DecisionBand, *, estimate_pct: float | None,
              estimate_low_pct: float | None, estimate_high_pct: float | None,
              estimate_label: str, title: str) -> str:
    """Render the copies and the estimate against the band as one inline ``<svg>``.

    Args:
        copies: Candidate copies in pattern order (one row and one point each).
        band: The primary policy's decision band, percent (shaded).
        estimate_pct: The gate's delta vs the control midpoint, percent, or None.
        estimate_low_pct: Lower end of its interval, percent, or None.
        estimate_high_pct: Upper end, percent, or None.
        estimate_label: Row label of the estimate (e.g. ``gate (sequential)``).
        title: Accessible title.

    Returns:
        An ``<svg>`` element (delta in percent on the x axis; negative is faster); with no
        copies, an SVG saying so.
    """
    rows = len(copies) + (1 if estimate_pct is not None and math.isfinite(estimate_pct) else 0)
    height = _PAD_T + _PAD_B + _ROW * max(rows, 1)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="delta-plot" role="img" '
            f'viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" height="{height}" '
            f'data-num-copies="{len(copies)}">'
            f"<title>{escape(title)}</title>")
    if not copies:
        return (head + f'<text x="{_WIDTH / 2}" y="{height / 2}" text-anchor="middle" '
                'class="empty">no candidate copy measured yet</text></svg>')
    values = [band.low_pct, band.high_pct, 0.0]
    for c in copies:
        values += [c.low_pct, c.high_pct, c.delta_pct]
    for v in (estimate_pct, estimate_low_pct, estimate_high_pct):
        if v is not None and math.isfinite(v):
            values.append(v)
    lo, hi = min(values), max(values)
    margin = (hi - lo) * 0.08 or 0.5
    lo, hi = lo - margin, hi + margin
    plot_w = _WIDTH - _PAD_L - _PAD_R
    plot_h = _ROW * max(rows, 1)

    def x_of(pct: float) -> float:
        return _PAD_L + plot_w * (pct - lo) / (hi - lo)

    parts = [head, f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{plot_w}" height="{plot_h}" '
                   'fill="#fff" stroke="#999"/>']
    bx0, bx1 = x_of(band.low_pct), x_of(band.high_pct)
    parts.append(f'<rect class="decision-band" x="{bx0:.2f}" y="{_PAD_T}" width="{bx1 - bx0:.2f}" '
                 f'height="{plot_h}" fill="rgba(255,193,7,0.25)" data-low-pct="{band.low_pct:.6g}" '
                 f'data-high-pct="{band.high_pct:.6g}"><title>{escape(band.label)}</title></rect>')
    for t in _ticks(lo, hi):
        x = x_of(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_PAD_T}" y2="{_PAD_T + plot_h}" stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{_PAD_T + plot_h + 14}" text-anchor="middle" '
                     f'class="tick">{"0" if abs(t) < 1e-12 else format(t, "+.4g")}</text>')
    for edge, name in ((band.accept_below_pct, "accept below"), (band.reject_above_pct, "reject above")):
        if abs(abs(edge) - band.high_pct) < 1e-9:
            continue  # the band's edge is the margin already
        x = x_of(edge)
        parts.append(f'<line class="margin" x1="{x:.1f}" x2="{x:.1f}" y1="{_PAD_T}" '
                     f'y2="{_PAD_T + plot_h}" stroke="#8a6d00" stroke-dasharray="4 3">'
                     f"<title>{name} {edge:+.3f} %</title></line>")
    x0 = x_of(0.0)
    parts.append(f'<line class="zero" x1="{x0:.1f}" x2="{x0:.1f}" y1="{_PAD_T}" '
                 f'y2="{_PAD_T + plot_h}" stroke="#333"><title>control midpoint (0 %)</title></line>')

    def row(i: int, label: str, mid: float, low: float | None, high: float | None, color: str,
            cls: str, tip: str, data: str) -> None:
        y = _PAD_T + _ROW * i + _ROW / 2
        parts.append(f'<text x="{_PAD_L - 8}" y="{y + 4:.1f}" text-anchor="end" class="row-label">'
                     f"{escape(label)}</text>")
        parts.append(f'<g class="{cls}" {data}><title>{escape(tip)}</title>')
        if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
            parts.append(f'<line x1="{x_of(low):.2f}" x2="{x_of(high):.2f}" y1="{y:.1f}" y2="{y:.1f}" '
                         f'stroke="{color}" stroke-width="2"/>')
            for end in (low, high):
                parts.append(f'<line x1="{x_of(end):.2f}" x2="{x_of(end):.2f}" y1="{y - 6:.1f}" '
                             f'y2="{y + 6:.1f}" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x_of(mid):.2f}" cy="{y:.1f}" r="5" fill="{color}"/></g>')

    for i, c in enumerate(copies):
        row(i, f"X run {c.candidate_order} (vs runs {c.left_order}, {c.right_order})", c.delta_pct,
            c.low_pct, c.high_pct, "#d62728", "copy",
            f"X run {c.candidate_order}: {c.delta_pct:+.3f} % vs the midpoint of runs "
            f"{c.left_order} and {c.right_order}; [{c.low_pct:+.3f}, {c.high_pct:+.3f}] % "
            "against either neighbour",
            f'data-order="{c.candidate_order}" data-delta-pct="{c.delta_pct:.6g}"')
    if rows > len(copies):
        tip = f"{estimate_label}: {estimate_pct:+.3f} %"
        if estimate_low_pct is not None and estimate_high_pct is not None:
            tip += f" [{estimate_low_pct:+.3f}, {estimate_high_pct:+.3f}] %"
        row(len(copies), estimate_label, estimate_pct, estimate_low_pct, estimate_high_pct,
            "#22313f", "estimate", tip, f'data-delta-pct="{estimate_pct:.6g}"')
    parts.append(f'<text x="{_PAD_L + plot_w / 2}" y="{height - 8}" text-anchor="middle" class="axis">'
                 "delta vs control midpoint (%; negative: faster; shaded: decision band)</text></svg>")
    return "".join(parts)
