"""Each kind of page of the site in a real headless browser (Debian's chromium; CI installs
it), opened from disk: no error in the console, nothing requested, charts drawn, hostile
text never run, and the filter hiding what it should. One browser start per page kind."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from site_fleet import HOSTILE, STEPPED, kern

from browser import probed

# First in <head>: every error and console.error from then on is kept.
CATCH = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push(String(e.message)); });
(function () {
  var original = console.error;
  console.error = function () {
    window.__errors.push(Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();
</script>
"""
# Last in <body>: what the page did (its charts drawn, before the filter hides any),
# and the filter tried on its first choice.
PROBE = """<script>
(function () {
  var charts = Array.prototype.map.call(document.querySelectorAll("figure.chart svg"),
    function (svg) {
      var box = svg.getBoundingClientRect();
      return {width: box.width, height: box.height,
              marks: svg.querySelectorAll("path, rect, line, use, image").length,
              titles: svg.querySelectorAll("title").length};
    });
  var filtered = null;
  var form = document.getElementById("filters");
  if (form) {
    var select = form.querySelector("select");
    var name = select.name, choice = select.options[1].value;
    select.value = choice;
    select.dispatchEvent(new Event("change", {bubbles: true}));
    var scoped = document.querySelectorAll("[data-" + name + "]");
    var shown = 0, wrong = 0;
    Array.prototype.forEach.call(scoped, function (element) {
      var visible = element.offsetParent !== null || element.getClientRects().length > 0;
      if (!visible) return;
      if (element.getAttribute("data-" + name) === choice) shown += 1; else wrong += 1;
    });
    filtered = {name: name, shown: shown, wrong: wrong, visibleForm: !form.hidden};
  }
  document.documentElement.setAttribute("data-probe", JSON.stringify({
    errors: window.__errors,
    requests: performance.getEntriesByType("resource").map(function (r) { return r.name; }),
    pwned: document.documentElement.getAttribute("data-pwned"),
    scripts: document.scripts.length,
    images: document.images.length,
    text: document.body.textContent,
    charts: charts,
    filtered: filtered
  }));
})();
</script>
"""


def _probe(page: Path) -> dict[str, Any]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"(<head>)", lambda m: m.group(1) + CATCH, text, count=1)
    probe_page = page.with_name(f"probe-{page.name}")  # beside it: its links resolve alike
    probe_page.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    profile = page.parent / f".profile-{page.stem}"
    try:
        return probed(probe_page, profile, window="1400,2000")
    finally:
        shutil.rmtree(profile, ignore_errors=True)
        probe_page.unlink()


def _page_of(site: Path, kind: str) -> Path:
    if kind == "case":
        return site / "cases" / f"{kern(STEPPED[1]).key}.html"
    if kind == "run":
        return max((site / "runs").glob("*.html"))
    return site / f"{kind}.html"


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["index", "case", "fleet", "generations", "run"])
def test_each_kind_of_page_works_from_disk_in_a_browser(fleet_site, kind) -> None:
    probe = _probe(_page_of(fleet_site, kind))
    assert probe["errors"] == [], probe["errors"]
    assert probe["requests"] == [], probe["requests"]  # nothing fetched, from anywhere
    assert probe["pwned"] is None, "a hostile string ran as script"
    assert probe["images"] == 0
    own = 1 if probe["filtered"] is not None else 0  # the filter's; the probes' are 2
    assert probe["scripts"] == 2 + own
    for chart in probe["charts"]:
        assert chart["width"] > 150 and chart["height"] > 80, chart
        assert chart["marks"] > 5, chart
    if kind == "index":
        assert HOSTILE in probe["text"]  # the host name, shown as text
    if kind == "case":
        assert probe["charts"] and all(c["titles"] > 10 for c in probe["charts"])
    if kind in ("index", "case", "fleet"):
        filtered = probe["filtered"]
        assert filtered is not None and filtered["visibleForm"]
        assert filtered["shown"] > 0 and filtered["wrong"] == 0, filtered
