"""Inline SVG bar charts (op counts before/after, timings, tensor sizes).

Charts are horizontal bars, one row per label and one bar per series in each row, drawn
with plain SVG elements so the page needs no charting library. Each bar carries a
`<title>` with its exact value (shown on hover).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from rewriter.report._html import Html, esc

COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2")

_BAR = 11
_GAP = 2
_ROW_PAD = 6
_LABEL_CHAR = 6.6  # px per character of an 11px sans-serif label (a generous estimate)
_LABEL_MAX = 36  # characters of a label drawn (the full label is in the tooltip)
_PLOT = 380
_VALUE_ROOM = 90


@dataclasses.dataclass(frozen=True, slots=True)
class Series:
    """One series of a chart: a name (for the legend) and one value per label."""

    name: str
    values: tuple[float, ...]


def _short(label: str) -> str:
    if len(label) <= _LABEL_MAX:
        return label
    return "…" + label[-(_LABEL_MAX - 1) :]


def bar_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    fmt: Callable[[float], str] = lambda v: f"{v:g}",
) -> Html:
    """A horizontal grouped bar chart as an inline `<svg>`.

    Args:
        labels: one label per row, drawn on the left.
        series: the bars of each row, in legend order.
        title: the accessible name of the chart.
        fmt: how a value is written next to its bar.
    """
    label_width = int(
        min(max((len(_short(x)) for x in labels), default=4), _LABEL_MAX) * _LABEL_CHAR
    )
    label_width = max(label_width, 40) + 8
    legend_height = 20 if len(series) > 1 else 0
    row_height = len(series) * (_BAR + _GAP) + _ROW_PAD
    height = legend_height + row_height * len(labels) + 4
    width = label_width + _PLOT + _VALUE_ROOM
    peak = max((v for s in series for v in s.values), default=0.0) or 1.0
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}">'
    ]
    for index, one in enumerate(series if len(series) > 1 else ()):
        x = label_width + index * 130
        color = COLORS[index % len(COLORS)]
        parts.append(f'<rect x="{x}" y="4" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="14">{esc(one.name)}</text>')
    for row, label in enumerate(labels):
        top = legend_height + row * row_height + _ROW_PAD // 2
        middle = top + len(series) * (_BAR + _GAP) / 2 + 4
        parts.append(
            f'<text x="{label_width - 6}" y="{middle:.1f}" text-anchor="end">'
            f"<title>{esc(label)}</title>{esc(_short(label))}</text>"
        )
        for index, one in enumerate(series):
            value = one.values[row]
            y = top + index * (_BAR + _GAP)
            length = max(value / peak * _PLOT, 0.0)
            color = COLORS[index % len(COLORS)]
            parts.append(
                f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{_BAR}" '
                f'fill="{color}"><title>{esc(label)} ({esc(one.name)}): {esc(fmt(value))}'
                "</title></rect>"
            )
            parts.append(
                f'<text x="{label_width + length + 4:.1f}" y="{y + _BAR - 2}">'
                f"{esc(fmt(value))}</text>"
            )
    parts.append("</svg>")
    return Html("".join(parts))


def histogram(counts: Sequence[int], edges: Sequence[float], *, title: str) -> Html:
    """A small vertical histogram as an inline `<svg>` (each bin's range and count on hover)."""
    width, height, pad = 320, 90, 16
    bins = len(counts)
    peak = max(counts, default=0) or 1
    step = (width - 2 * pad) / max(bins, 1)
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height + 2 * pad}" viewBox="0 0 {width} {height + 2 * pad}" role="img" '
        f'aria-label="{esc(title)}">'
    ]
    for index, count in enumerate(counts):
        bar = count / peak * height
        x = pad + index * step
        tip = f"[{edges[index]:.4g}, {edges[index + 1]:.4g}): {count:,}"
        parts.append(
            f'<rect x="{x:.1f}" y="{pad + height - bar:.1f}" width="{max(step - 1, 1):.1f}" '
            f'height="{bar:.1f}" fill="{COLORS[0]}"><title>{esc(tip)}</title></rect>'
        )
    if bins:
        parts.append(f'<text x="{pad}" y="{height + 2 * pad - 2}">{edges[0]:.3g}</text>')
        parts.append(
            f'<text x="{width - pad}" y="{height + 2 * pad - 2}" text-anchor="end">'
            f"{edges[-1]:.3g}</text>"
        )
    parts.append("</svg>")
    return Html("".join(parts))


def threshold_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    marked: Sequence[bool],
    threshold: float,
    legend: tuple[str, str],
    title: str,
    fmt: Callable[[float], str] = lambda v: f"{v:g}",
) -> Html:
    """Horizontal bars, one per label, a dashed line at `threshold`, marked bars in orange.

    The sensitivity plot of the accuracy budget: each site's metric with only that site
    approximate, the budget's bound as the line, the sites kept in float marked
    (`legend` names the unmarked and the marked bars). Values that are not finite are
    drawn at the chart's edge (infinity) or as no bar (minus infinity, NaN) and written out.
    """
    label_width = int(
        min(max((len(_short(x)) for x in labels), default=4), _LABEL_MAX) * _LABEL_CHAR
    )
    label_width = max(label_width, 40) + 8
    finite = [v for v in values if math.isfinite(v)]
    peak = float(max([*finite, threshold, 0.0])) * 1.1 or 1.0
    legend_height = 20
    row_height = _BAR + _GAP + _ROW_PAD
    height = legend_height + row_height * len(labels) + 4
    width = label_width + _PLOT + _VALUE_ROOM
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}">'
    ]
    for index, name in enumerate(legend):
        x = label_width + index * 130
        parts.append(f'<rect x="{x}" y="4" width="12" height="12" fill="{COLORS[index]}"/>')
        parts.append(f'<text x="{x + 16}" y="14">{esc(name)}</text>')
    for row, (label, value, mark) in enumerate(zip(labels, values, marked, strict=True)):
        top = legend_height + row * row_height + _ROW_PAD // 2
        drawn = peak if value == math.inf else value if math.isfinite(value) else 0.0
        length = max(drawn / peak * _PLOT, 0.0)
        color = COLORS[1 if mark else 0]
        parts.append(
            f'<text x="{label_width - 6}" y="{top + _BAR - 2}" text-anchor="end">'
            f"<title>{esc(label)}</title>{esc(_short(label))}</text>"
        )
        parts.append(
            f'<rect x="{label_width}" y="{top}" width="{length:.1f}" height="{_BAR}" '
            f'fill="{color}"><title>{esc(label)}: {esc(fmt(value))}</title></rect>'
        )
        parts.append(
            f'<text x="{label_width + length + 4:.1f}" y="{top + _BAR - 2}">'
            f"{esc(fmt(value))}</text>"
        )
    line = label_width + max(threshold, 0.0) / peak * _PLOT
    parts.append(
        f'<line x1="{line:.1f}" y1="{legend_height}" x2="{line:.1f}" y2="{height}" '
        f'stroke="#d62728" stroke-dasharray="4 3"><title>budget: {esc(fmt(threshold))}'
        "</title></line>"
    )
    parts.append("</svg>")
    return Html("".join(parts))
