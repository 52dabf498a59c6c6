"""A kernel's time series as an SVG chart, drawn on the server: one point per sample (its commit in the
tooltip), a line through them, and each change point marked where the new level begins.

Inline SVG with presentation attributes only (no script, no style attribute), so the dashboard's
Content-Security-Policy holds, and every text goes through markupsafe's escaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from service.dashboard.render import nanoseconds

__all__ = ["ChangeMark", "ChartPoint", "series_svg"]

WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 70, 40, 16, 28  # margins: the y axis labels on the left, commits below
TICKS = 4


@dataclass(frozen=True)
class ChartPoint:
    label: str  # under the axis: a short commit
    value_ns: float
    title: str  # the tooltip: commit, time, job


@dataclass(frozen=True)
class ChangeMark:
    index: int  # the first point at the new level
    text: str  # e.g. "+12% (8% to 16%)"


def _scale(values: Sequence[float]) -> tuple[float, float]:
    """The y range: the values with 5% of room, never empty."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 or max(abs(high) * 0.05, 1.0)
    return max(0.0, low - pad), high + pad


def series_svg(points: Sequence[ChartPoint], changes: Sequence[ChangeMark] = ()) -> Markup:
    """The chart of ``points`` (in commit order) with ``changes`` marked; a sentence without points."""
    if not points:
        return Markup('<p class="muted">No samples yet.</p>')
    low, high = _scale([p.value_ns for p in points])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(index: int) -> float:
        return LEFT + (plot_w / 2 if len(points) == 1 else plot_w * index / (len(points) - 1))

    def y(value: float) -> float:
        return TOP + plot_h * (1 - (value - low) / (high - low))

    parts = [
        f'<svg class="series-chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'role="img" aria-label="kernel time per commit" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#888"/>',
    ]
    for tick in range(TICKS + 1):
        value = low + (high - low) * tick / TICKS
        ty = y(value)
        parts.append(
            f'<text class="tick" x="{LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#555">{escape(nanoseconds(value))}</text>'
        )
    for change in changes:
        if not 0 < change.index < len(points):
            continue
        cx = (x(change.index - 1) + x(change.index)) / 2
        parts.append(
            f'<line class="change" x1="{cx:.1f}" y1="{TOP}" x2="{cx:.1f}" y2="{TOP + plot_h}" '
            'stroke="#c62828" stroke-dasharray="4 3"/>'
        )
        parts.append(
            f'<text class="change-label" x="{cx + 4:.1f}" y="{TOP + 12}" font-size="11" fill="#c62828">'
            f"{escape(change.text)}</text>"
        )
    line = " ".join(f"{x(i):.1f},{y(p.value_ns):.1f}" for i, p in enumerate(points))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#1565c0" stroke-width="1.5"/>')
    for i, point in enumerate(points):
        parts.append(
            f'<circle class="sample" cx="{x(i):.1f}" cy="{y(point.value_ns):.1f}" r="3" fill="#1565c0">'
            f"<title>{escape(point.title)}</title></circle>"
        )
    step = max(1, len(points) // 8)
    for i in range(0, len(points), step):
        parts.append(
            f'<text class="commit" x="{x(i):.1f}" y="{HEIGHT - 8}" text-anchor="middle" font-size="10" '
            f'fill="#555">{escape(points[i].label)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
