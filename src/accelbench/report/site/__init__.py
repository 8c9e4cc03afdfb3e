"""`accelbench publish`: a static site of every run in a store, written as files.

Pages: an overview of each node's newest run and what changed since its previous one, a
page per case with its figure over time, the fleet against its median, the generations
chart of each suite measured on several stacks, the steps found (regressions), and each
run's own report. `pages` makes the data of each page from the stored runs with the
analyses the commands use; `render` turns a page into HTML; `build` writes only what
changed into the site's folder.

The site opens from disk (file://) and from any static host: no server, no external
resource, no script library; one small inline script filters the rows and charts by
benchmark, node and stack. Its charts are the inline SVG that matplotlib draws for the
HTML report (`report.charts`, from the chart models of `core.view`), chosen over a
JavaScript charting library because the SVG is static and offline, there is no library
to inline into every page, and the site shows the same charts as the runs' reports.
"""

from accelbench.report.site.build import MANIFEST, Published, publish

__all__ = ["MANIFEST", "Published", "publish"]
