"""Line charts as inline SVG, drawn on the server (pure Python, no Django import).

The admin's CSP allows no inline script or `style` attribute; SVG presentation attributes
(`stroke`, `fill`) are markup, not style, so the chart carries its own colours and needs no
script. Each series gets a colour and a marker shape, so the lines stay apart in grey print and
for colour-blind readers; each point has a `<title>` (a tooltip, read by screen readers), and
the chart a `<title>`, a `<desc>` and `role="img"` with an `aria-label`.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#F0E442",
)
MARKERS = ("circle", "square", "diamond", "triangle")

WIDTH = 760
HEIGHT = 300
MARGIN_LEFT = 56
MARGIN_RIGHT = 16
MARGIN_TOP = 16
MARGIN_BOTTOM = 48
Y_TICKS = 5
MAX_X_LABELS = 12
MARKER_SIZE = 4.0


@dataclass(frozen=True, slots=True)
class Point:
    value: float
    title: str  # the point's tooltip, e.g. "Override #3 · 12/11: 25,0 %"


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    # One per x label; None where the series has no value (the line skips it).
    points: Sequence[Point | None]


def line_chart(
    *,
    title: str,
    description: str,
    x_labels: Sequence[str],
    series: Sequence[Series],
    y_max: float,
    format_y: Callable[[float], str],
    chart_id: str = "chart",
) -> str:
    """An SVG line chart of `series` over `x_labels`, the y axis from 0 to `y_max`, with a
    legend below. `format_y` writes the axis's tick values."""
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    legend_rows = (len(series) + 2) // 3
    total_height = HEIGHT + legend_rows * 20 + 8
    top = max(y_max, 1e-9)

    def x_at(index: int) -> float:
        if len(x_labels) <= 1:
            return MARGIN_LEFT + plot_width / 2
        return MARGIN_LEFT + plot_width * index / (len(x_labels) - 1)

    def y_at(value: float) -> float:
        return MARGIN_TOP + plot_height * (1 - min(value, top) / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="line-chart" id="{escape(chart_id)}"'
        f' viewBox="0 0 {WIDTH} {total_height}" role="img"'
        f' aria-labelledby="{escape(chart_id)}-title {escape(chart_id)}-desc"'
        f' aria-label="{escape(title)}">',
        f'<title id="{escape(chart_id)}-title">{escape(title)}</title>',
        f'<desc id="{escape(chart_id)}-desc">{escape(description)}</desc>',
    ]
    parts.append('<g class="axis y-axis">')
    for tick in range(Y_TICKS + 1):
        value = top * tick / Y_TICKS
        y = y_at(value)
        parts.append(
            f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" y2="{y:.1f}"'
            ' stroke="#ddd" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11"'
            f' fill="#444">{escape(format_y(value))}</text>'
        )
    parts.append("</g>")
    parts.append('<g class="axis x-axis">')
    step = max(1, -(-len(x_labels) // MAX_X_LABELS))
    for index, label in enumerate(x_labels):
        if index % step and index != len(x_labels) - 1:
            continue
        parts.append(
            f'<text x="{x_at(index):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 18}" text-anchor="middle"'
            f' font-size="11" fill="#444">{escape(label)}</text>'
        )
    parts.append("</g>")
    for number, one in enumerate(series):
        colour = PALETTE[number % len(PALETTE)]
        marker = MARKERS[number % len(MARKERS)]
        parts.append(f'<g class="series series-{number}" aria-label="{escape(one.name)}">')
        present = [(i, p) for i, p in enumerate(one.points) if p is not None]
        if len(present) > 1:
            path = " ".join(f"{x_at(i):.1f},{y_at(p.value):.1f}" for i, p in present)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
        for index, point in present:
            parts.append(_marker(marker, x_at(index), y_at(point.value), colour, title=point.title))
        parts.append("</g>")
    parts.append('<g class="legend">')
    for number, one in enumerate(series):
        colour = PALETTE[number % len(PALETTE)]
        x = MARGIN_LEFT + (number % 3) * (plot_width / 3)
        y = HEIGHT + (number // 3) * 20
        parts.append(
            f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{y:.1f}" y2="{y:.1f}"'
            f' stroke="{colour}" stroke-width="2"/>'
        )
        parts.append(_marker(MARKERS[number % len(MARKERS)], x + 11, y, colour, title=""))
        parts.append(
            f'<text x="{x + 28:.1f}" y="{y + 4:.1f}" font-size="12" fill="#222">'
            f"{escape(one.name)}</text>"
        )
    parts.append("</g></svg>")
    return "".join(parts)


def _marker(shape: str, x: float, y: float, colour: str, *, title: str) -> str:
    size = MARKER_SIZE
    tooltip = f"<title>{escape(title)}</title>" if title else ""
    if shape == "circle":
        element = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size}" fill="{colour}"'
    elif shape == "square":
        element = (
            f'<rect x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size}"'
            f' height="{2 * size}" fill="{colour}"'
        )
    else:
        corners = (
            [(x, y - size - 1), (x + size + 1, y), (x, y + size + 1), (x - size - 1, y)]
            if shape == "diamond"
            else [(x, y - size - 1), (x + size + 1, y + size), (x - size - 1, y + size)]
        )
        drawn = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in corners)
        element = f'<polygon points="{drawn}" fill="{colour}"'
    if tooltip:
        return f'{element} class="point">{tooltip}</{element.split()[0][1:]}>'
    return f"{element}/>"
