"""What a page of the site holds, as plain data: tables whose cells may link to another
page, charts of the neutral model (core.view) each with the table of its values beside
it, and the blocks a page is made of. Every text here comes from the store or is made
from it, and the templates escape all of it; hrefs are relative to the site's root.

A row, a chart or a block names the benchmark, node and stack it is about (empty: any),
which is what the page's filter shows or hides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from typing import TypeAlias

from accelbench.core.units import MISSING, format_value
from accelbench.core.view import Chart, HeatMap, Lines, Table


@dataclass(frozen=True)
class Link:
    text: str
    href: str  # relative to the site's root: "runs/ID.html", "cases/KEY.html", "gpus/KEY.html"


Cell: TypeAlias = "str | Link"


@dataclass(frozen=True)
class Scope:
    """What a row, chart or block is about, for the page's filter (empty: anything)."""

    bench: str = ""
    node: str = ""
    stack: str = ""


ANY = Scope()


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    style: str | None = None  # core.view GOOD, BAD, WARN or None
    scope: Scope = ANY
    key: str = ""  # what the row is of (a case key, a run id): the page's data-key


@dataclass(frozen=True)
class Grid:
    """A table of the site: a title, a header and rows of text or links."""

    title: str
    header: tuple[str, ...]
    rows: tuple[Row, ...]
    numeric: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plot:
    """A chart and, beside it, the table of what it draws. `svg` holds a chart drawn
    already (the generations chart of the HTML report), else `chart` is drawn."""

    title: str
    table: Grid
    chart: Chart | None = None
    svg: str = ""
    caption: str = ""
    scope: Scope = ANY


@dataclass(frozen=True)
class Block:
    title: str
    about: str = ""
    plots: tuple[Plot, ...] = ()
    tables: tuple[Grid, ...] = ()
    scope: Scope = ANY
    anchor: str = ""


@dataclass(frozen=True)
class Page:
    path: str  # relative to the site's root
    title: str
    blocks: tuple[Block, ...]
    intro: tuple[str, ...] = ()  # paragraphs under the title
    filters: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())  # (name, choices)

    @property
    def depth(self) -> int:
        return self.path.count("/")


# -- names of pages ----------------------------------------------------------------------

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def safe_name(text: str) -> str:
    """A file name for `text` (a run id a merged store brought may hold anything): the
    text where it is plain, else its plain characters and a hash of it, so that no two
    texts share a name and none leaves its folder."""
    if _SAFE.match(text) and not text.endswith("."):
        return text
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip("._-")[:64]
    return f"{plain or 'x'}-{sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def run_href(run_id: str) -> str:
    return f"runs/{safe_name(run_id)}.html"


def case_href(case_key: str) -> str:
    return f"cases/{safe_name(case_key)}.html"


def gpu_href(gpu_key: str) -> str:
    """A GPU's page: its key (a serial or UUID, which may hold anything) made safe."""
    return f"gpus/{safe_name(gpu_key)}.html"


# -- tables of the neutral model --------------------------------------------------------


def grid_of(table: Table) -> Grid:
    """A report table (core.view.Table) as a table of the site."""
    styles = list(table.styles)
    rows = tuple(Row(tuple(str(c) for c in r), styles[i] if i < len(styles) else None)
                 for i, r in enumerate(table.rows))
    return Grid(table.title, tuple(table.header), rows, table.numeric, tuple(table.notes))


def heat_map_grid(chart: HeatMap) -> Grid:
    """The table of what a heat map draws: its rows by its columns, each cell as the chart
    writes it (else its value)."""
    across = list(chart.columns) if chart.columns else list(chart.labels)
    rows = []
    for i, (label, values) in enumerate(zip(chart.labels, chart.values, strict=False)):
        written = chart.cells[i] if i < len(chart.cells) else ()
        cells = [written[j] if j < len(written) and written[j]
                 else (MISSING if v is None else format_value(v, ""))
                 for j, v in enumerate(values)]
        rows.append(Row((label, *cells), "bad" if label in chart.marked else None))
    return Grid(chart.title, ("", *across), tuple(rows),
                frozenset(range(1, len(across) + 1)))


def lines_grid(chart: Lines) -> Grid:
    """The table of what a line chart draws: a row per point, with the chart's name of
    its marked points and its hover text where the chart has them."""
    tipped = any(s.tips for s in chart.series)
    marks = any(s.marked for s in chart.series)
    rows = []
    for s in chart.series:
        for j, (x, y) in enumerate(zip(s.x, s.y, strict=False)):
            mark = (chart.marked_label or "marked") if j in s.marked else MISSING
            tip = s.tips[j] if j < len(s.tips) and s.tips[j] else MISSING
            rows.append(Row((s.name, format_value(x, ""), format_value(y, ""),
                             *((mark,) if marks else ()), *((tip,) if tipped else ()))))
    header = ("Line", chart.xlabel, chart.ylabel, *(("Mark",) if marks else ()),
              *(("Point",) if tipped else ()))
    return Grid(chart.title, header, tuple(rows), frozenset({1, 2}))


def choices(values: Sequence[str]) -> tuple[str, ...]:
    """The distinct non-empty values, sorted: a filter's choices."""
    return tuple(sorted({v for v in values if v}))
