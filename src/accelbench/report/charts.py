"""Charts as inline SVG, drawn with matplotlib's SVG backend (imported only when a chart is
drawn; no pyplot, so no global figure state and no display backend).

An interval does not set a chart's scale: the value axis reaches at most `MARGIN` of the
values' own range beyond them (of the largest value, for bars, which start at 0), so that
one interval of ×/÷ 50 does not flatten a series that moved from 22 to 12 GFLOP/s. A band
or whisker cut at the axis ends in a triangle there, named in the legend (`CLIPPED`).
Points and bars of figures measured on a busy host or a throttled device are ringed in
red, named in the legend too.

The SVG is made fit to sit inside an HTML page many times over: no XML prolog, DOCTYPE,
metadata or namespace URLs, and every id prefixed with the chart's own id so that two
charts never share one. Text is kept as SVG text (svg.fonttype "none"), escaped by
matplotlib; `$` is escaped so that a label is never read as mathtext.
"""

from __future__ import annotations

import html
import io
import math
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from accelbench.core.units import format_bytes
from accelbench.core.view import (
    Bars,
    BarSeries,
    Chart,
    HeatMap,
    Lines,
    LineSeries,
    Panel,
    TimeSeries,
)
from accelbench.report.text import printable

_WIDTH_IN = 7.5
_HEIGHT_IN = 3.4

_MAX_LABEL = 60

MARGIN = 0.5  # how far past the values an interval may take the axis (share of their range)
CLIPPED = "interval runs past the axis"
# A figure measured on a busy host or a throttled device: an open red ring.
_RING: dict[str, Any] = {"marker": "o", "markersize": 7, "markerfacecolor": "none",
                         "markeredgecolor": "#b00020", "markeredgewidth": 1.1,
                         "linestyle": "none"}
# An interval cut at the axis: a triangle on the axis' edge, drawn over it.
_CUT: dict[str, Any] = {"markersize": 6, "color": "#333333", "linestyle": "none",
                        "clip_on": False}


def text(label: object) -> str:
    """A label as matplotlib must get it: `printable` (control and reordering characters
    shown as escapes, never drawn: a font has no glyph for them), one line, not longer
    than a chart can hold (the tables beside a chart give it in full), no mathtext, no
    legend-hiding leading '_'. Every label, legend entry and title passes through here."""
    out = " ".join(printable(label).split())
    if len(out) > _MAX_LABEL:
        out = out[: _MAX_LABEL - 1] + "…"
    out = out.replace("$", r"\$")
    return " " + out if out.startswith("_") else out


def draw(chart: Chart, chart_id: str) -> str:
    """The SVG of a chart of the neutral model (core.view), with ids prefixed by
    `chart_id`; its title and caption are the page's to show."""
    if isinstance(chart, Bars):
        return bar_chart(chart_id, chart.categories, chart.series, ylabel=chart.ylabel,
                         reference=chart.reference, horizontal=chart.horizontal,
                         marked_label=chart.marked_label)
    if isinstance(chart, Lines):
        return line_chart(chart_id, chart.series, xlabel=chart.xlabel, ylabel=chart.ylabel,
                          logx=chart.logx, byte_ticks=chart.byte_ticks, dates=chart.dates,
                          marked_label=chart.marked_label)
    if isinstance(chart, TimeSeries):
        return time_chart(chart_id, chart.x, chart.panels, xlabel=chart.xlabel,
                          window=chart.window, window_label=chart.window_label)
    if isinstance(chart, HeatMap):
        return heat_map(chart_id, chart.labels, chart.values,
                        colorbar_label=chart.colorbar_label, cells=chart.cells,
                        low_is_bad=chart.low_is_bad, marked=chart.marked,
                        columns=chart.columns)
    raise TypeError(f"not a chart: {type(chart).__name__}")


def bar_chart(
    chart_id: str,
    categories: Sequence[str],
    series: Sequence[BarSeries],
    *,
    ylabel: str,
    title: str = "",
    reference: float | None = None,
    horizontal: bool = False,
    marked_label: str = "",
    standalone: bool = False,
) -> str:
    """Grouped bars with error bars: one group per category, one bar per series.

    `horizontal` puts the categories on the vertical axis, for long labels; `standalone`
    gives a complete SVG file rather than markup to inline in HTML. A series' marked bars
    are ringed at their end, named `marked_label` in the legend; a whisker past
    `bar_limit` is cut there and ends in a triangle.
    """
    from matplotlib.figure import Figure

    # Labels longer than a bar is wide would run into each other under the bars.
    horizontal = horizontal or max((len(c) for c in categories), default=0) > 12
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
        limit = bar_limit([v for s in series for v in s.values], reference)
        cut: list[float] = []  # where a whisker was cut at the axis
        rings: list[tuple[float, float]] = []
        for i, s in enumerate(series):
            xs, heights, lows, highs = [], [], [], []
            for j, value in enumerate(s.values):
                if value is None or not math.isfinite(value):
                    continue
                x = j - group / 2 + bar * (i + 0.5)
                xs.append(x)
                heights.append(value)
                if j in s.marked:
                    rings.append((x, value))
                err = s.errors[j] if j < len(s.errors) else None
                if err is not None and not all(math.isfinite(e) for e in err):
                    err = None  # no interval (one value a side): no whisker
                high = err[1] if err else value
                if limit is not None and high > limit:
                    high = limit
                    cut.append(x)
                lows.append(max(value - err[0], 0.0) if err else 0.0)
                highs.append(max(high - value, 0.0))
            if not xs:
                continue
            errors = [lows, highs] if any(lows) or any(highs) else None
            style: dict[str, Any] = {"label": text(s.name), "capsize": 2,
                                     "error_kw": {"elinewidth": 0.8}}
            if horizontal:
                ax.barh(xs, heights, bar * 0.95, xerr=errors, **style)
            else:
                ax.bar(xs, heights, bar * 0.95, yerr=errors, **style)
        if cut and limit is not None:
            if horizontal:
                ax.set_xlim(right=limit)
                ax.plot([limit] * len(cut), cut, marker=">", gid="clipped", label=CLIPPED,
                        **_CUT)
            else:
                ax.set_ylim(top=limit)
                ax.plot(cut, [limit] * len(cut), marker="^", gid="clipped", label=CLIPPED,
                        **_CUT)
        if rings:
            xy = [(v, x) for x, v in rings] if horizontal else rings
            ax.plot([p[0] for p in xy], [p[1] for p in xy], gid="marked",
                    label=text(marked_label) if marked_label else None, **_RING)
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
        if len(series) > 1 or cut or (rings and marked_label):
            ax.legend(fontsize="small", frameon=False)
        return _svg(fig, chart_id, standalone)


def bar_limit(values: Sequence[float | None], reference: float | None = None
              ) -> float | None:
    """The farthest a bar chart's value axis may reach for an interval: `MARGIN` of the
    largest value (or reference line) past it; None where there is no positive value."""
    top = max((v for v in (*values, reference) if v is not None and math.isfinite(v)),
              default=0.0)
    return top * (1.0 + MARGIN) if top > 0 else None


def value_window(series: Sequence[LineSeries]) -> tuple[float, float] | None:
    """The y range of a line chart whose bands run far past its points: the points, and
    of their bands what lies within `MARGIN` of the points' range (at least a tenth of
    their size) past them; None where every band fits (the axis is left to matplotlib)."""
    ys = [y for s in series for y in s.y if math.isfinite(y)]
    ends = [e for s in series for b in s.band for e in b if math.isfinite(e)]
    if not ys or not ends:
        return None
    lo, hi = min(ys), max(ys)
    pad = max(MARGIN * (hi - lo), 0.1 * max(abs(lo), abs(hi)))
    if pad <= 0 or (min(ends) >= lo - pad and max(ends) <= hi + pad):
        return None
    bottom, top = max(lo - pad, min(lo, *ends)), min(hi + pad, max(hi, *ends))
    room = 0.04 * (top - bottom)
    return bottom - room, top + room


def line_chart(
    chart_id: str,
    series: Sequence[LineSeries],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    byte_ticks: bool = False,
    dates: bool = False,
    marked_label: str = "",
    standalone: bool = False,
) -> str:
    """Lines with point markers. `logx` spaces the x axis by powers of two; `byte_ticks`
    labels them as sizes (64 KiB); `dates` reads x as Unix times and ticks them as dates
    (UTC). A series' band, marked points, steps and hover texts are drawn as
    `LineSeries` says; `marked_label` names the marked points in the legend.
    `standalone` gives an SVG file of its own, as `bar_chart` does."""
    with _style(chart_id):
        fig, tipped = _line_figure(series, xlabel=xlabel, ylabel=ylabel, title=title,
                                   logx=logx, byte_ticks=byte_ticks, dates=dates,
                                   marked_label=marked_label)
        svg = _svg(fig, chart_id, standalone)
    for gid, tips in tipped:
        svg = _with_tips(svg, gid if standalone else f"{chart_id}-{gid}", tips)
    return svg


def lines_png(chart: Lines, *, dpi: int = 150) -> bytes:
    """A `Lines` chart, its title drawn, as a PNG image (an image has no hover texts)."""
    with _style("png"):
        fig, _ = _line_figure(chart.series, xlabel=chart.xlabel, ylabel=chart.ylabel,
                              title=chart.title, logx=chart.logx, byte_ticks=chart.byte_ticks,
                              dates=chart.dates, marked_label=chart.marked_label)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _line_figure(
    series: Sequence[LineSeries], *, xlabel: str, ylabel: str, title: str, logx: bool,
    byte_ticks: bool, dates: bool, marked_label: str,
) -> tuple[Any, list[tuple[str, Sequence[str]]]]:
    """The figure of `line_chart`, drawn inside `_style`, and the group id and hover
    texts of each series that has them."""
    from matplotlib.figure import Figure

    scale = 1.0 / 86400.0 if dates else 1.0  # matplotlib's dates: days since 1970
    tipped: list[tuple[str, Sequence[str]]] = []
    fig = Figure(figsize=(_WIDTH_IN, _HEIGHT_IN), layout="constrained")
    ax = fig.add_subplot()
    named_marks = named_cuts = False
    window = value_window(series)
    for i, s in enumerate(series):
        xs = [x * scale for x in s.x]
        ys = list(s.y)
        plain = not (s.band or s.marked or s.steps or s.tips)
        (line,) = ax.plot(xs, ys, marker="o" if plain else None, markersize=3,
                          linewidth=1.2, label=text(s.name))
        if plain:
            continue
        color = line.get_color()
        if s.band and len(s.band) == len(xs):
            ax.fill_between(xs, [b[0] for b in s.band], [b[1] for b in s.band],
                            color=color, alpha=0.18, linewidth=0)
        for index in s.steps:
            if 0 <= index < len(xs):
                ax.axvline(xs[index], color=color, linewidth=0.9, linestyle="--")
        # The points as a line of their own, so that each marker is one <use> of a
        # group the hover texts can be found in.
        gid = f"tips-{i}"
        ax.plot(xs, ys, linestyle="none", marker="o", markersize=3, color=color,
                gid=gid)
        if s.tips and len(s.tips) == len(xs):
            tipped.append((gid, s.tips))
        marked = [j for j in s.marked if 0 <= j < len(xs)]
        if marked:
            ax.plot([xs[j] for j in marked], [ys[j] for j in marked], gid=f"marked-{i}",
                    label=text(marked_label) if marked_label and not named_marks
                    else None, **_RING)
            named_marks = named_marks or bool(marked_label)
        if window is not None and len(s.band) == len(xs):
            for end, edge, marker in ((1, window[1], "^"), (0, window[0], "v")):
                past = [x for x, b in zip(xs, s.band, strict=True)
                        if (b[end] > edge if end else b[end] < edge)]
                if past:
                    ax.plot(past, [edge] * len(past), marker=marker, gid=f"clipped-{i}-{end}",
                            label=None if named_cuts else CLIPPED, **_CUT)
                    named_cuts = True
    if window is not None:
        ax.set_ylim(*window)
    if logx:
        _log2_axis(ax.xaxis, byte_ticks)
    if dates:
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

        locator = AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlabel(text(xlabel))
    ax.set_ylabel(text(ylabel))
    if title:
        ax.set_title(text(title))
    ax.legend(fontsize="small", frameon=False)
    ax.grid(linewidth=0.3)
    return fig, tipped


_GROUP_TAG = re.compile(r"<g[\s>]|</g>")
_USE = re.compile(r"<use ([^>]*?)/>")


def _with_tips(svg: str, group: str, tips: Sequence[str]) -> str:
    """Each marker of the group `group` with its hover text (an SVG <title>), in order;
    the SVG as it was where the markers are not one per text (a point off the canvas)."""
    start = svg.find(f'<g id="{group}"')
    if start < 0:
        return svg
    depth, end = 0, -1
    for tag in _GROUP_TAG.finditer(svg, start):
        depth += -1 if tag.group(0) == "</g>" else 1
        if depth == 0:
            end = tag.end()
            break
    if end < 0:
        return svg
    inside = svg[start:end]
    uses = _USE.findall(inside)
    if len(uses) != len(tips):
        return svg
    shown = iter(tips)
    inside = _USE.sub(lambda m: f"<use {m.group(1)}><title>"
                      f"{html.escape(printable(next(shown), multiline=True))}</title></use>",
                      inside)
    return svg[:start] + inside + svg[end:]


def time_chart(
    chart_id: str,
    x: Sequence[float],
    panels: Sequence[Panel],
    *,
    xlabel: str,
    window: tuple[float, float] | None = None,
    window_label: str = "",
) -> str:
    """Small stacked panels sharing one time axis, one per quantity; `window` is shaded in
    every panel (and named once in the legend by `window_label`)."""
    from matplotlib.figure import Figure

    shown = [p for p in panels if any(v is not None and math.isfinite(v) for v in p.y)]
    with _style(chart_id):
        fig = Figure(figsize=(6.0, 0.6 + 1.35 * max(len(shown), 1)), layout="constrained")
        axes = fig.subplots(max(len(shown), 1), 1, sharex=True, squeeze=False)[:, 0]
        for i, (ax, panel) in enumerate(zip(axes, shown, strict=False)):
            if window is not None:
                ax.axvspan(window[0], window[1], color="#9ab8d8", alpha=0.25, linewidth=0,
                           label=text(window_label) if i == 0 and window_label else None)
            ys = [math.nan if v is None else v for v in panel.y]
            ax.plot(list(x), ys, linewidth=1.1, marker="o", markersize=1.5,
                    **({"color": panel.color} if panel.color else {}))
            ax.set_ylabel(text(panel.ylabel))
            if panel.from_zero:
                ax.set_ylim(bottom=0)
            ax.grid(linewidth=0.3)
            ax.set_axisbelow(True)
            if i == 0 and window is not None and window_label:
                ax.legend(fontsize="small", frameon=False, loc="lower right")
        axes[-1].set_xlabel(text(xlabel))
        return _svg(fig, chart_id)


def heat_map(
    chart_id: str,
    labels: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    colorbar_label: str,
    title: str = "",
    cells: Sequence[Sequence[str]] = (),
    low_is_bad: bool = True,
    marked: Sequence[str] = (),
    columns: Sequence[str] = (),
) -> str:
    """A square matrix of members x members as coloured cells, blank where there is no
    value (the diagonal); with `columns`, a matrix of `labels` (rows) by `columns`. The
    colours run the same way for every figure: the bad end (low when `low_is_bad`, else
    high) is dark. `cells` writes a text in each cell (for a small matrix); labels in
    `marked` are drawn in red, bold."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    across = list(columns) if columns else list(labels)
    n = max(len(labels), len(across), 1)
    side = min(max(2.6, 0.55 * n + 1.6), 12.0)
    # A rectangular matrix: room for its rows, and under them for its tilted column labels.
    longest = max((len(text(c)) for c in across), default=0)
    size = (side + 1.4, side) if not columns else (
        min(max(4.0, 0.45 * len(across) + 0.09 * longest + 3.0), 16.0),
        min(max(2.4, 0.3 * len(labels) + 0.075 * longest + 1.2), 16.0))
    grid = np.array([[math.nan if v is None or not math.isfinite(v) else float(v)
                      for v in row] for row in values], dtype=float).reshape(len(labels), -1)
    with _style(chart_id):
        fig = Figure(figsize=size, layout="constrained")
        ax = fig.add_subplot()
        cmap = colormaps["viridis" if low_is_bad else "viridis_r"].with_extremes(bad="white")
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap,
                          aspect="auto" if columns else "equal")
        bar = fig.colorbar(image, ax=ax, shrink=0.8)
        bar.set_label(text(colorbar_label))
        shown = [text(label) for label in labels]
        shown_across = [text(label) for label in across]
        tilt = len(across) > 3 or max((len(x) for x in shown_across), default=0) > 6
        ax.set_xticks(range(len(across)), shown_across, rotation=45 if tilt else 0,
                      ha="right" if tilt else "center")
        ax.set_yticks(range(len(labels)), shown)
        for tick in (*ax.get_xticklabels(), *ax.get_yticklabels()):
            if tick.get_text() in {text(m) for m in marked}:
                tick.set_color("#b00020")
                tick.set_fontweight("bold")
        if cells and n <= 12:
            finite = grid[np.isfinite(grid)]
            middle = float(np.median(finite)) if finite.size else 0.0
            for i, row in enumerate(cells):
                for j, cell in enumerate(row):
                    if cell and math.isfinite(grid[i, j]):
                        dark = grid[i, j] < middle if low_is_bad else grid[i, j] > middle
                        ax.text(j, i, text(cell), ha="center", va="center", fontsize=7,
                                color="white" if dark else "black")
        ax.spines[:].set_visible(False)
        if title:
            ax.set_title(text(title))
        return _svg(fig, chart_id)


def _log2_axis(axis: object, byte_ticks: bool) -> None:
    """A base-2 log axis labelled in plain text (mathtext tick labels are slow to lay out)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    axis.axes.set_xscale("log", base=2)  # type: ignore[attr-defined]
    axis.set_major_locator(LogLocator(base=2, numticks=12))  # type: ignore[attr-defined]
    axis.set_minor_locator(NullLocator())  # type: ignore[attr-defined]
    # Ticks fall on powers of two: whole numbers of their unit ("64 KiB").
    label = (lambda v: format_bytes(v, decimals=0)) if byte_ticks else (lambda v: f"{v:g}")
    axis.set_major_formatter(FuncFormatter(lambda v, _: label(v)))  # type: ignore[attr-defined, no-untyped-call]


@contextmanager
def _style(chart_id: str) -> Iterator[None]:
    import matplotlib

    with warnings.catch_warnings(), matplotlib.rc_context({
        "svg.fonttype": "none",
        "svg.hashsalt": chart_id,
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }):
        # A chart crowded by long labels is still drawn; the warning would only be noise.
        warnings.filterwarnings("ignore", message="constrained_layout not applied")
        # A character the font lacks is drawn as a box; the warning (two lines, one a
        # source path) must not reach the reader of a report.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from",
                                category=UserWarning)
        yield


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
