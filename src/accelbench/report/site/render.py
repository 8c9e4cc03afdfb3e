"""A page of the site as HTML: Jinja2 with autoescaping on, as the HTML report renders,
so every text from the store reaches the page as text; the only markup not escaped is
the SVG of the charts (`report.charts`, matplotlib escaping the text inside it).

A run's page is its HTML report (`report.html.html_report`), written as of the run's
own end so that the page of a finished run never changes, with the site's navigation
put at its top.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from hashlib import sha256
from typing import Any

from accelbench.report import charts
from accelbench.report.site.model import Page
from accelbench.report.site.pages import NAV
from accelbench.store import StoredExplanation, StoredProfile, StoredRun
from accelbench.version import __version__

FILTER_LABELS = {"bench": "Benchmark", "node": "Node", "stack": "Stack"}


def render_page(page: Page) -> str:
    """The HTML of a page; its charts drawn as inline SVG, ids c1, c2, ... in page order."""
    from markupsafe import Markup

    root = "../" * page.depth
    blocks = []
    number = 0
    for block in page.blocks:
        drawn = []
        for plot in block.plots:
            number += 1
            svg = plot.svg if plot.chart is None else charts.draw(plot.chart, f"c{number}")
            drawn.append((plot, Markup(svg)))  # matplotlib's SVG: its text escaped
        blocks.append((block, drawn))
    return str(_environment().get_template("page.html.j2").render(
        title=page.title, path=page.path, root=root, nav=NAV, intro=page.intro,
        filters=page.filters, labels=FILTER_LABELS, blocks=blocks, version=__version__))


def render_run(run: StoredRun,
               profiles: Sequence[StoredProfile | StoredExplanation] = ()) -> str:
    """The report of one run, as of its end (its start while it runs), with the site's
    navigation at the top."""
    from accelbench.report.html import html_report

    record = run.record
    report = html_report([run], generated_at=record.finished_at or record.started_at,
                         profiles={record.id: list(profiles)})
    nav = _environment().get_template("nav.html.j2").render(nav=NAV, root="../")
    return report.replace("<body>", f"<body>\n{nav}", 1)


def templates_digest() -> str:
    """A hash of the templates: a page rendered by other templates is rendered again."""
    from importlib import resources

    folder = resources.files("accelbench.report.site").joinpath("templates")
    text = "".join(sorted(f.read_text("utf-8") for f in folder.iterdir()
                          if f.name.endswith(".j2")))
    # The navigation is part of every page: a new entry in it renders them again.
    return sha256(f"{__version__}\n{NAV!r}\n{text}".encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    from accelbench.report.html import _shown

    return Environment(
        loader=PackageLoader("accelbench.report.site", "templates"),
        autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        finalize=_shown,
    )
