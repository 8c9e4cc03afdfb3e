"""Charts as inline SVG, drawn with matplotlib's SVG backend (imported only when a chart is
drawn; no pyplot, so no global figure state and no display backend).

The SVG is made fit to sit inside an HTML page many times over: no XML prolog, DOCTYPE,
metadata or namespace URLs, and every id prefixed with the chart's own id so that two
charts never share one. Text is kept as SVG text (svg.fonttype "none"), escaped by
matplotlib; `$` is escaped so that a label is never read as mathtext.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_WIDTH_IN = 7.5
_HEIGHT_IN = 3.4


@dataclass(frozen=True)
class BarSeries:
    name: str
    values: Sequence[float | None]  # one per category; None: no bar
    errors: Sequence[tuple[float, float] | None] = ()  # (low, high) per category


@dataclass(frozen=True)
class LineSeries:
    name: str
    x: Sequence[float]
    y: Sequence[float]
    markers: Sequence[int] = field(default_factory=tuple)  # indices to mark (change points)


def text(label: object) -> str:
    """A label as matplotlib must get it: no mathtext, no legend-hiding leading '_'."""
    out = str(label).replace("$", r"\$")
    return " " + out if out.startswith("_") else out


def bar_chart(
    chart_id: str,
    categories: Sequence[str],
    series: Sequence[BarSeries],
    *,
    ylabel: str,
    title: str = "",
    reference: float | None = None,
    horizontal: bool = False,
    standalone: bool = False,
) -> str:
    """Grouped bars with error bars: one group per category, one bar per series.

    `horizontal` puts the categories on the vertical axis, for long labels; `standalone`
    gives a complete SVG file rather than markup to inline in HTML.
    """
    from matplotlib.figure import Figure

    n_cat = max(len(categories), 1)
    n_series = max(len(series), 1)
    if horizontal:
        size = (_WIDTH_IN, min(max(1.6, 0.22 * n_cat * max(1.0, 0.6 * n_series) + 1.0), 30.0))
    else:
        size = (min(max(3.2, 1.6 + 0.5 * n_cat * max(1.0, 0.6 * n_series)), 16.0), _HEIGHT_IN)
    with _style(chart_id):
        fig = Figure(figsize=size, layout="constrained")
        ax = fig.add_subplot()
        group = 0.8
        bar = group / n_series
        for i, s in enumerate(series):
            xs, heights, lows, highs = [], [], [], []
            for j, value in enumerate(s.values):
                if value is None or not math.isfinite(value):
                    continue
                xs.append(j - group / 2 + bar * (i + 0.5))
                heights.append(value)
                err = s.errors[j] if j < len(s.errors) else None
                lows.append(max(value - err[0], 0.0) if err else 0.0)
                highs.append(max(err[1] - value, 0.0) if err else 0.0)
            if not xs:
                continue
            errors = [lows, highs] if any(lows) or any(highs) else None
            style = {"label": text(s.name), "capsize": 2, "error_kw": {"elinewidth": 0.8}}
            if horizontal:
                ax.barh(xs, heights, bar * 0.95, xerr=errors, **style)
            else:
                ax.bar(xs, heights, bar * 0.95, yerr=errors, **style)
        labels = [text(c) for c in categories]
        if horizontal:
            if reference is not None:
                ax.axvline(reference, color="#555555", linewidth=0.8, linestyle="--")
            ax.set_yticks(range(len(categories)), labels)
            ax.invert_yaxis()
            ax.set_xlabel(text(ylabel))
            ax.grid(axis="x", linewidth=0.3)
        else:
            if reference is not None:
                ax.axhline(reference, color="#555555", linewidth=0.8, linestyle="--")
            tilt = len(categories) > 4
            ax.set_xticks(range(len(categories)), labels, rotation=25 if tilt else 0,
                          ha="right" if tilt else "center")
            ax.set_ylabel(text(ylabel))
            ax.grid(axis="y", linewidth=0.3)
        ax.set_axisbelow(True)
        if title:
            ax.set_title(text(title))
        if len(series) > 1:
            ax.legend(fontsize="small", frameon=False)
        return _svg(fig, chart_id, standalone)


def line_chart(
    chart_id: str,
    series: Sequence[LineSeries],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    xticklabels: Sequence[str] | None = None,
) -> str:
    from matplotlib.figure import Figure

    with _style(chart_id):
        fig = Figure(figsize=(_WIDTH_IN, _HEIGHT_IN), layout="constrained")
        ax = fig.add_subplot()
        for s in series:
            (line,) = ax.plot(list(s.x), list(s.y), marker="o", markersize=3, linewidth=1.2,
                              label=text(s.name))
            for i in s.markers:
                ax.axvline(s.x[i], color=line.get_color(), linewidth=0.8, linestyle="--")
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        if xticklabels is not None:
            step = max(1, math.ceil(len(xticklabels) / 12))
            ticks = list(range(0, len(xticklabels), step))
            ax.set_xticks(ticks, [text(xticklabels[i]) for i in ticks], rotation=25, ha="right")
        ax.set_xlabel(text(xlabel))
        ax.set_ylabel(text(ylabel))
        if title:
            ax.set_title(text(title))
        ax.legend(fontsize="small", frameon=False)
        ax.grid(linewidth=0.3)
        return _svg(fig, chart_id)


def _style(chart_id: str):  # noqa: ANN202 - a matplotlib rc_context
    import matplotlib

    return matplotlib.rc_context({
        "svg.fonttype": "none",
        "svg.hashsalt": chart_id,
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_NAMESPACE = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^")]+)')


_CHART_ID = re.compile(r"^[a-z][a-z0-9-]*$")


def _svg(fig: object, chart_id: str, standalone: bool = False) -> str:
    if not _CHART_ID.match(chart_id):
        raise ValueError(f"chart id {chart_id!r} must be lowercase letters, digits and '-'")
    buf = io.StringIO()
    fig.savefig(buf, format="svg",  # type: ignore[attr-defined]
                metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    if standalone:
        return buf.getvalue()
    svg = _PROLOG.sub("", buf.getvalue(), count=1)
    svg = _METADATA.sub("", svg)
    svg = _NAMESPACE.sub("", svg)
    svg = _ID.sub(lambda m: f'id="{chart_id}-{m.group(1)}"', svg)
    svg = _REF.sub(lambda m: f"{m.group(1)}{chart_id}-{m.group(2)}", svg)
    return svg.replace("<svg ", f'<svg class="chart-svg" role="img" data-chart="{chart_id}" ', 1)
