"""The neutral model of what a report shows: tables, charts and the sections that hold
them. Families build these from their results (benchmarks/<family>/view.py); `report/`
renders them for the terminal, Markdown and HTML and knows no family by name.

Every value here is plain data: cells and labels are text that each renderer escapes
itself, and a chart is the data of its figure, drawn (as SVG) only by the HTML report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

GOOD = "good"
BAD = "bad"
WARN = "warn"


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)
    numeric: frozenset[int] = frozenset()  # columns to right-align
    styles: list[str | None] = field(default_factory=list)  # per row: GOOD, BAD, WARN or None
    ruled: bool = False  # a line between rows (for cells of several lines)


# -- charts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BarSeries:
    """Bars, one per category, with their intervals; `marked`: the indices of bars drawn
    with an open red ring at their end, such as figures measured on a busy host or a
    throttled device."""

    name: str
    values: Sequence[float | None]  # one per category; None: no bar
    errors: Sequence[tuple[float, float] | None] = ()  # (low, high) per category
    marked: Sequence[int] = ()


@dataclass(frozen=True)
class LineSeries:
    """A line of points; optionally each point's interval drawn as a band (`band`: one
    (low, high) per point), points marked apart (`marked`: indices drawn as open red
    rings, such as figures measured on a busy host), steps (`steps`: indices where a new
    level starts, drawn as a dashed line) and a text per point shown on hover (`tips`)."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    band: Sequence[tuple[float, float]] = ()
    marked: Sequence[int] = ()
    steps: Sequence[int] = ()
    tips: Sequence[str] = ()


@dataclass(frozen=True)
class Panel:
    """One quantity over time, in a panel of its own: `y` holds one value per time, None
    where nothing was read (the line breaks there)."""

    ylabel: str
    y: Sequence[float | None]
    color: str | None = None
    from_zero: bool = False  # the axis starts at 0 (power: a wiggle is not a swing)


@dataclass(frozen=True)
class Bars:
    """Grouped bars with error bars: one group per category, one bar per series."""

    title: str
    categories: Sequence[str]
    series: Sequence[BarSeries]
    ylabel: str
    caption: str = ""
    reference: float | None = None  # a line drawn across (1.0 for a speed-up)
    horizontal: bool = False
    marked_label: str = ""  # the legend's name of the series' marked bars


@dataclass(frozen=True)
class Lines:
    title: str
    series: Sequence[LineSeries]
    xlabel: str
    ylabel: str
    caption: str = ""
    logx: bool = False
    byte_ticks: bool = False  # the x axis is a size in bytes, ticked at powers of two
    dates: bool = False  # x is a Unix time, ticked as dates (UTC)
    marked_label: str = ""  # the legend's name of the series' marked points
    # Also drawn on the published site's fleet page, from the newest run of its
    # benchmark on each stack (a chart that compares configurations, not one run's detail).
    site: bool = False


@dataclass(frozen=True)
class TimeSeries:
    """Quantities over one time axis, a panel each, an optional window shaded."""

    title: str
    x: Sequence[float]
    panels: Sequence[Panel]
    xlabel: str
    caption: str = ""
    window: tuple[float, float] | None = None
    window_label: str = ""


@dataclass(frozen=True)
class HeatMap:
    """A square matrix over `labels` (None: not measured), each cell written out; with
    `columns`, a matrix of `labels` (rows) by `columns`."""

    title: str
    labels: Sequence[str]
    values: Sequence[Sequence[float | None]]
    colorbar_label: str
    caption: str = ""
    cells: Sequence[Sequence[str]] = ()
    low_is_bad: bool = True
    marked: Sequence[str] = ()  # labels drawn in red
    columns: Sequence[str] = ()  # a rectangular matrix: its column labels


Chart: TypeAlias = Bars | Lines | TimeSeries | HeatMap


# -- sections ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """A part of a run's report. A family's view returns sections; one keyed "results"
    adds its tables and charts to the run's Results section rather than making its own.
    A section marked `first` comes before the results (what the run checked)."""

    key: str  # unique in a report: the HTML anchor
    title: str
    tables: tuple[Table, ...] = ()
    about: str = ""  # how to read it, shown under the title
    items: tuple[tuple[str, str], ...] = ()  # (what, text): a list after the tables
    charts: tuple[Chart, ...] = ()
    first: bool = False


RESULTS = "results"  # the key of the Results section, which every family's rows share
