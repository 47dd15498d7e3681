"""Inline SVG line charts, generated in Python so the HTML report needs no JavaScript, CDN or network.

Each chart is an ``<svg class="chart …">`` with a ``<title>``, axes with tick labels, a legend, and one
``<path class="series series-<name>">`` per series (tests count those in a real browser).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 560
HEIGHT = 270
LEFT, RIGHT, TOP, BOTTOM = 52, 34, 46, 44


@dataclass(frozen=True, slots=True)
class Series:
    name: str  # also the CSS class suffix: keep it a simple word
    label: str
    values: Sequence[float]
    color: str
    dashed: bool = False


def _y_ticks(value: float) -> list[float]:
    """Round, integer y ticks from 0 to at least ``value``: a 1/2/5 × 10^k step, two to five intervals."""
    if value <= 1:
        return [0.0, 1.0]
    target = value / 4
    exp = 10 ** math.floor(math.log10(target)) if target >= 1 else 1
    step = next((f * exp for f in (1, 2, 5, 10) if f * exp >= target), 10 * exp)
    top = math.ceil(value / step) * step
    return [float(i * step) for i in range(int(top / step) + 1)]


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def line_chart(
    *,
    css_class: str,
    title: str,
    x: Sequence[float],
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    x_tick_label: Callable[[float], str] = _fmt,
    x_ticks: int = 6,
    marker_x: float | None = None,
    marker_label: str = "",
    points: bool = False,
    attrs: str = "",
) -> str:
    """An SVG line chart of ``series`` (each with one value per ``x``), as a markup string."""
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    x_min, x_max = (min(x), max(x)) if x else (0.0, 1.0)
    span = x_max - x_min

    def px(v: float) -> float:
        return LEFT + (plot_w / 2 if span == 0 else (v - x_min) / span * plot_w)

    y_ticks = _y_ticks(max((max(s.values, default=0) for s in series), default=0))
    y_top = y_ticks[-1]

    def py(v: float) -> float:
        return TOP + plot_h - v / y_top * plot_h

    parts = [
        f'<svg class="chart {escape(css_class)}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}"{attrs}>',
        f"<title>{escape(title)}</title>",
        f'<text class="chart-title" x="{LEFT}" y="16">{escape(title)}</text>',
    ]
    for value in y_ticks:
        y = py(value)
        parts.append(
            f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(value)}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>'
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>'
    )
    # x ticks: every point when few, else evenly spaced ones.
    if x:
        if len(x) <= x_ticks:
            tick_values = list(x)
        else:
            stride = -(-(len(x) - 1) // (x_ticks - 1))  # every stride-th point: even gaps on an even grid
            tick_values = list(x[::stride])
        for value in tick_values:
            parts.append(
                f'<text class="tick" x="{px(value):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                f"{escape(x_tick_label(value))}</text>"
            )
    parts.append(
        f'<text class="axis-label" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text class="axis-label" transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    if marker_x is not None and x and x_min <= marker_x <= x_max:
        mx = px(marker_x)
        parts.append(
            f'<line class="marker" x1="{mx:.1f}" y1="{TOP}" x2="{mx:.1f}" y2="{TOP + plot_h}" '
            f'stroke="#555" stroke-dasharray="2 3"/>'
            f'<text class="marker-label" x="{mx + 4:.1f}" y="{TOP + 12}">{escape(marker_label)}</text>'
        )
    for s in series:
        coords = [(px(xv), py(yv)) for xv, yv in zip(x, s.values, strict=True)]
        if len(coords) == 1:  # a single point still draws a visible segment
            (cx, cy) = coords[0]
            coords = [(cx - 4, cy), (cx + 4, cy)]
        d = " ".join(f"{'M' if i == 0 else 'L'}{cx:.1f} {cy:.1f}" for i, (cx, cy) in enumerate(coords))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(
            f'<path class="series series-{escape(s.name)}" data-series="{escape(s.name)}" d="{d}" '
            f'fill="none" stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        if points:
            parts.extend(
                f'<circle class="point point-{escape(s.name)}" cx="{px(xv):.1f}" cy="{py(yv):.1f}" r="2.5" '
                f'fill="{s.color}"/>'
                for xv, yv in zip(x, s.values, strict=True)
            )
    # Legend: one row under the title.
    for i, s in enumerate(series):
        x0 = LEFT + 140 * i
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(
            f'<g class="legend-item"><line x1="{x0}" y1="29" x2="{x0 + 22}" y2="29" stroke="{s.color}" '
            f'stroke-width="2"{dash}/><text class="legend" x="{x0 + 26}" y="33">{escape(s.label)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)
