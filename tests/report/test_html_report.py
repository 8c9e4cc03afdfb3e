"""The HTML report: self-contained, every value from a result escaped, charts that render in
a real headless browser (Debian's chromium; .ci/run installs it, so in CI it must run)."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from accelbench.analysis.compare import compare
from accelbench.analysis.generations import generations
from accelbench.analysis.select import RunGroup, select_group, select_runs
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.html import html_report
from accelbench.store import RunRecord, Store, StoredRun
from browser import probed
from fakes import stored_measurement

CORPUS = Path(__file__).parents[1] / "fixtures" / "analysis" / "generations-schema1.db"
HOSTILE = ("<script>document.title='pwned';"
           "document.documentElement.setAttribute('data-pwned','1')</script>")
HOSTILE_IMG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "results.sqlite"
    shutil.copyfile(CORPUS, path)  # a copy: opening a store may write beside it
    with Store.open(path, create=False) as store:
        a = select_group(store, "20221101")
        b = select_group(store, "20221115")
        runs = select_runs(store, [])
    return path, a, b, runs


@pytest.fixture(scope="module")
def full_report(corpus) -> str:
    _, a, b, runs = corpus
    return html_report([a.latest, b.latest], comparisons=[compare(a, b)],
                       generations=generations(runs))


def _hostile_run() -> StoredRun:
    params = {"model": HOSTILE, "dtype": "bf16", "mode": "train", "batch": 8}
    case = Case.make("model", "v1", "model", params, "cuda:0")
    samples = (0.10, 0.101, 0.099, 0.1005, 0.0995, 0.1, 0.1002)
    good = stored_measurement(case=case, status="ok", samples=samples, number=1,
                       figures=(Figure("throughput", 80.0, "sample/s"),
                                Figure("time", 0.1, "s", False)),
                       warnings=(f"noisy: {HOSTILE}",))
    gemm = stored_measurement(
        case=Case.make("gemm", "g1", "micro", {"shape": HOSTILE_IMG, "dtype": "fp16"}, "cuda:0"),
        status="ok", samples=samples, number=1,
        figures=(Figure("throughput", 1e14, "FLOP/s", True, 2e14),))
    failed = stored_measurement(case=Case.make("memory", "m1", "micro", {"op": "copy"}, "cuda:0"),
                         status="failed", reason=f"RuntimeError: {HOSTILE_IMG}")
    record = RunRecord(
        id="20250101-000000-beef", started_at=1.7e9, finished_at=1.7e9 + 5, status="complete",
        suite="quick", argv=("run",), device="cuda:0", generation_key=f"{HOSTILE} | ROCm 6.2",
        host=HOSTILE, accelbench_version="0.1.0", fingerprint_id="fp", n_ok=2, n_failed=1,
        n_skipped=0,
    )
    fingerprint = {"format_version": 1, "platform": "rocm",
                   "device": {"name": HOSTILE_IMG, "type": "cuda"},
                   "host": {"hostname": HOSTILE}, "environment": {"HIP_X": HOSTILE}}
    return StoredRun(record, fingerprint, (good, gemm, failed))


@pytest.fixture(scope="module")
def hostile_report() -> str:
    run = _hostile_run()
    group = RunGroup("x", (run,))
    return html_report([run], comparisons=[compare(group, group)])


@pytest.mark.slow
def test_report_has_every_section_and_chart(full_report) -> None:
    assert full_report.startswith("<!DOCTYPE html>")
    for text in ("Comparison:", "Generations", "Stack fingerprint", "AMD Instinct MI250X",
                 "gfx90a", "Geometric mean per family", "only in B",
                 "Collective bus bandwidth against message size",
                 "Training throughput per model and precision", "gemm: % of the published peak",
                 "memory: % of the published peak"):
        assert text in full_report, text
    assert full_report.count('<figure class="chart">') == full_report.count("<svg ") >= 10
    ids = re.findall(r'\bid="([^"]+)"', full_report)
    assert len(ids) == len(set(ids)), "two elements share an id"


def test_report_is_self_contained(full_report) -> None:
    assert "http" not in full_report.lower()
    assert "<script" not in full_report and "@import" not in full_report
    assert not re.search(r"\bsrc\s*=", full_report)
    assert set(re.findall(r'href="(.)', full_report)) == {"#"}
    assert not re.search(r"url\((?!#)", full_report)


def test_every_value_from_a_result_is_escaped(hostile_report) -> None:
    assert "<script" not in hostile_report
    assert "<img" not in hostile_report
    assert not re.search(r"<[^>]*onerror", hostile_report)  # as text only, never in a tag
    escaped = html.escape(HOSTILE, quote=False)
    assert escaped.split(";")[0] in hostile_report or "&lt;script&gt;" in hostile_report
    assert hostile_report.count("&lt;script&gt;") >= 5  # host, key, params, note, charts
    assert "http" not in hostile_report.lower()


@pytest.mark.slow
def test_report_command_writes_html_and_markdown(corpus, tmp_path, capsys) -> None:
    path, *_ = corpus
    out = tmp_path / "r.html"
    assert main(["report", "20221101", "*H100*", "-o", str(out), "--store", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"Report: {out}"
    text = out.read_text()
    assert "Comparison:" in text and "Generations" in text and "<svg" in text
    assert main(["report", "20221101", "20221115", "-o", "-", "--store", str(path)]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("## B: ") and "| gemm batch=1 dtype=bf16 shape=4096 |" in markdown
    assert "# accelbench run " in markdown
    assert main(["report", "--store", str(path)]) == 0
    written = Path(capsys.readouterr().out.split("Report: ")[1].strip())
    assert written.suffix == ".html" and written.parent.name == "reports"


# -- in a real browser -------------------------------------------------------------------

PROBE = """<script>
(function () {
  var charts = Array.prototype.map.call(document.querySelectorAll("figure.chart svg"),
    function (svg) {
      var box = svg.getBoundingClientRect();
      return {width: box.width, height: box.height,
              marks: svg.querySelectorAll("path, rect, line, use").length,
              texts: svg.querySelectorAll("text").length};
    });
  document.documentElement.setAttribute("data-probe", JSON.stringify({
    title: document.title,
    pwned: document.documentElement.getAttribute("data-pwned"),
    scripts: document.scripts.length,
    images: document.images.length,
    text: document.body.textContent,
    charts: charts
  }));
})();
</script>
"""


def _browser_probe(report: str, tmp_path: Path) -> dict[str, Any]:
    page = tmp_path / "report.html"
    page.write_text(report.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    return probed(page, tmp_path / "profile")


@pytest.mark.browser
def test_charts_render_and_hostile_strings_stay_text_in_a_browser(tmp_path) -> None:
    run = _hostile_run()
    group = RunGroup("x", (run,))
    report = html_report([run], comparisons=[compare(group, group)],
                         title=f"accelbench run {run.record.id}")
    probe = _browser_probe(report, tmp_path)
    assert probe["pwned"] is None, "a hostile string ran as script"
    assert probe["title"] == "accelbench run 20250101-000000-beef"
    assert probe["scripts"] == 1 and probe["images"] == 0  # only the probe itself
    assert HOSTILE in probe["text"] and HOSTILE_IMG in probe["text"]
    assert probe["charts"], "no chart in the page"
    for chart in probe["charts"]:
        assert chart["width"] > 150 and chart["height"] > 80, chart
        assert chart["marks"] > 5 and chart["texts"] > 2, chart


@pytest.mark.browser
def test_corpus_report_charts_render_in_a_browser(full_report, tmp_path) -> None:
    probe = _browser_probe(full_report, tmp_path)
    assert len(probe["charts"]) >= 10
    assert all(c["width"] > 150 and c["marks"] > 5 for c in probe["charts"])
    assert probe["scripts"] == 1 and probe["images"] == 0
