"""Line charts as inline SVG, drawn on the server: no script, no chart library.

`line_chart` takes named series of (x, y) points and returns SVG markup. Every piece of text
(series names, labels) is escaped here, so the markup is safe to insert as is (`Markup`).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

Point = tuple[float, float | None]

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


@dataclass(frozen=True)
class Frame:
    width: int = 640
    height: int = 220
    left: int = 48
    right: int = 16
    top: int = 16
    bottom: int = 36


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    step = (hi - lo) / n
    return [lo + i * step for i in range(n + 1)]


def _x_ticks(lo: float, hi: float) -> list[float]:
    """Whole steps when the axis holds training steps (at most 9 ticks), else quarters."""
    if lo.is_integer() and hi.is_integer():
        stride = max(1, math.ceil((hi - lo) / 8))
        return [float(v) for v in range(int(lo), int(hi) + 1, stride)]
    return _ticks(lo, hi)


def _fmt(value: float) -> str:
    if math.isclose(value, round(value), abs_tol=1e-9):
        return str(round(value))
    return f"{value:.2f}"


def line_chart(
    series: Mapping[str, Sequence[Point]],
    *,
    title: str,
    y_range: tuple[float, float] | None = None,
    x_label: str = "step",
    frame: Frame = Frame(),
) -> Markup:
    """An SVG line chart of `series` (name → points; a None y is a gap). With no point at
    all, a short note instead of an empty frame."""
    points: list[tuple[float, float]] = [
        (x, y) for pts in series.values() for x, y in pts if y is not None
    ]
    if not points:
        return Markup('<p class="empty">{}</p>').format(f"{title}: no data yet")
    scale = _Scale.fit(points, y_range=y_range, frame=frame)
    parts = [
        f'<svg class="chart" viewBox="0 0 {frame.width} {frame.height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        *_axes(scale, x_label),
    ]
    for n, (name, pts) in enumerate(series.items()):
        parts.extend(_line(scale, n, name, pts))
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True)
class _Scale:
    """The data ranges shown and the frame they are drawn in."""

    frame: Frame
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    @classmethod
    def fit(
        cls,
        points: Sequence[tuple[float, float]],
        *,
        y_range: tuple[float, float] | None,
        frame: Frame,
    ) -> "_Scale":
        """The points' ranges (y: `y_range` when given), one unit either side of a range
        that would be a single value."""
        xs = [float(x) for x, _ in points]
        ys = [y for _, y in points]
        x_lo, x_hi = min(xs), max(xs)
        if x_hi == x_lo:
            x_lo, x_hi = x_lo - 1, x_hi + 1
        y_lo, y_hi = y_range if y_range else (min(ys), max(ys))
        if y_hi == y_lo:
            y_lo, y_hi = y_lo - 1, y_hi + 1
        return cls(frame, x_lo, x_hi, y_lo, y_hi)

    @property
    def plot_w(self) -> int:
        return self.frame.width - self.frame.left - self.frame.right

    @property
    def plot_h(self) -> int:
        return self.frame.height - self.frame.top - self.frame.bottom

    def px(self, x: float) -> float:
        return self.frame.left + (x - self.x_lo) / (self.x_hi - self.x_lo) * self.plot_w

    def py(self, y: float) -> float:
        return self.frame.top + (1 - (y - self.y_lo) / (self.y_hi - self.y_lo)) * self.plot_h


def _axes(scale: _Scale, x_label: str) -> list[str]:
    """Horizontal grid lines with their y values, the x ticks and the x axis label."""
    f = scale.frame
    parts = []
    for tick in _ticks(scale.y_lo, scale.y_hi):
        y = scale.py(tick)
        parts.append(
            f'<line x1="{f.left}" y1="{y:.1f}" x2="{f.width - f.right}" y2="{y:.1f}" '
            'stroke="#e5e7eb" stroke-width="1"/>'
            f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#6b7280">{escape(_fmt(tick))}</text>'
        )
    for tick in _x_ticks(scale.x_lo, scale.x_hi):
        x = scale.px(tick)
        parts.append(
            f'<text x="{x:.1f}" y="{f.height - f.bottom + 16}" text-anchor="middle" '
            f'font-size="11" fill="#6b7280">{escape(_fmt(tick))}</text>'
        )
    parts.append(
        f'<text x="{f.left + scale.plot_w / 2:.1f}" y="{f.height - 4}" text-anchor="middle" '
        f'font-size="11" fill="#374151">{escape(x_label)}</text>'
    )
    return parts


def _line(scale: _Scale, n: int, name: str, pts: Sequence[Point]) -> list[str]:
    """Series number `n`: its polylines (broken at each None y), a dot per point, and its
    legend entry."""
    f = scale.frame
    color = PALETTE[n % len(PALETTE)]
    segments: list[list[str]] = [[]]
    for xv, yv in sorted(pts, key=lambda p: p[0]):
        if yv is None:
            segments.append([])
            continue
        segments[-1].append(f"{scale.px(xv):.1f},{scale.py(yv):.1f}")
    parts = []
    for seg in segments:
        if len(seg) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                f'points="{" ".join(seg)}"/>'
            )
        for coords in seg:
            cx, cy = coords.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>')
    parts.append(
        f'<rect x="{f.left + 8 + n * 150}" y="{f.top - 12}" width="10" height="10" '
        f'fill="{color}"/><text x="{f.left + 22 + n * 150}" y="{f.top - 3}" '
        f'font-size="11" fill="#111827">{escape(name)}</text>'
    )
    return parts
