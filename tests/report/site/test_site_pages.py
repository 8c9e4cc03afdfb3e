"""The published site: every page there, every link resolving, nothing external, stored
text kept as text, and the figures on its pages those the commands give for the store."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from markupsafe import escape
from site_fleet import (
    BUSY,
    GENERATIONS_DB,
    HOSTILE,
    HOSTILE_IMG,
    NODES_A,
    NODES_B,
    RESULTS_DB,
    RUNS_PER_NODE,
    STEPPED,
    kern,
)

from accelbench.cli.main import main
from accelbench.core.units import format_change
from accelbench.report.site import MANIFEST, publish
from accelbench.store import Store

_HREF = re.compile(r'\b(?:href|src)\s*=\s*"([^"]*)"')


def _pages(site: Path) -> dict[str, str]:
    return {p.relative_to(site).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(site.rglob("*.html"))}


def _rows(page: str, key_prefix: str = "") -> dict[str, list[str]]:
    """data-key -> the text of the row's cells (tags dropped, entities read)."""
    out = {}
    for match in re.finditer(r'<tr[^>]*\sdata-key="([^"]*)"[^>]*>(.*?)</tr>', page, re.S):
        key = html.unescape(match.group(1))
        if key.startswith(key_prefix):
            cells = re.findall(r"<td[^>]*>(.*?)</td>", match.group(2), re.S)
            out[key] = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells]
    return out


def _check_links(site: Path, pages: dict[str, str]) -> int:
    checked = 0
    for name, text in pages.items():
        for href in _HREF.findall(text):
            target = html.unescape(href).split("#", 1)[0]
            if not target or target.startswith("data:image/png;base64,"):
                continue  # an anchor; a heat map's cells, as matplotlib embeds them
            assert not re.match(r"^[a-z]+:|^//", target), (name, href)
            resolved = (site / name).parent / target
            assert resolved.is_file(), (name, href)
            assert site.resolve() in resolved.resolve().parents, (name, href)
            checked += 1
    return checked


def _check_self_contained(pages: dict[str, str]) -> None:
    for name, text in pages.items():
        lower = text.lower()
        assert "http:" not in lower and "https:" not in lower, name
        assert not re.search(r"""(?:href|src)\s*=\s*["']?//""", text), name
        assert not re.search(r"url\((?!#)", text), name
        assert "@import" not in text, name


@pytest.mark.parametrize("corpus", [GENERATIONS_DB, RESULTS_DB], ids=["generations", "results"])
def test_the_corpus_sites_link_only_to_their_own_pages(corpus, corpus_copy, tmp_path) -> None:
    store_path = corpus_copy(corpus)
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        done = publish(store, out)
        run_ids = [r.id for r in store.list_runs()]
    pages = _pages(out)
    assert done.written == len(pages) and done.unchanged == 0
    for name in ("index.html", "cases.html", "fleet.html", "generations.html",
                 "regressions.html", "ab.html"):
        assert name in pages
    assert {f"runs/{i}.html" for i in run_ids} <= set(pages)
    assert any(name.startswith("cases/") for name in pages)
    assert _check_links(out, pages) > len(pages)
    _check_self_contained(pages)
    assert (out / MANIFEST).is_file()
    # The script is the filter alone; a run's page is its report, with no script.
    for name, text in pages.items():
        assert text.count("<script") <= 1, name
        if name.startswith("runs/"):
            assert "<script" not in text and '<nav class="site"' in text


def test_the_generated_fleet_site_links_and_stays_self_contained(fleet_site) -> None:
    pages = _pages(fleet_site)
    runs = [n for n in pages if n.startswith("runs/")]
    assert len(runs) == (len(NODES_A) + len(NODES_B)) * RUNS_PER_NODE + 1
    assert _check_links(fleet_site, pages) > 2 * len(runs)
    _check_self_contained(pages)


def test_hostile_text_from_the_store_stays_text(fleet_site) -> None:
    pages = _pages(fleet_site)
    for name, text in pages.items():
        assert "<script>document" not in text, name
        assert "<img src=x" not in text, name
        assert not re.search(r"<[^>]*\sonerror", text), name
    index = pages["index.html"]
    assert escape(HOSTILE) in index  # the host name, shown as text
    assert f'data-node="{escape(HOSTILE)}"' in index
    case = pages[f"cases/{kern(64, tag=HOSTILE_IMG).key}.html"]
    assert escape(HOSTILE_IMG) in case
    # In a chart's hover text as well, escaped.
    assert f"<title>{html.escape(HOSTILE)}, run " in case


def test_the_changes_on_the_overview_are_those_of_compare(fleet_store, fleet_site,
                                                          capsys) -> None:
    with Store.open(fleet_store, create=False) as store:
        n02 = [r for r in store.list_runs() if r.host == "n02"]
    newest, previous = n02[0].id, n02[1].id
    assert main(["compare", previous, newest, "--json", "--store", str(fleet_store)]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    expected = {c["key"]: c for c in data["cases"] if c["verdict"] != "same"}
    shown = _rows((fleet_site / "index.html").read_text(), f"{newest}:")
    assert {k.split(":", 1)[1] for k in shown} == set(expected)
    for key, cells in shown.items():
        case = expected[key.split(":", 1)[1]]
        assert cells[3] == case["verdict"]
        assert cells[4] == format_change(case["change_pct"] / 100)


def test_the_steps_are_those_of_history(fleet_store, fleet_site, capsys) -> None:
    node, shape, first = STEPPED
    key = kern(shape).key
    assert main(["history", key, "--host", node, "--json", "--store", str(fleet_store)]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    (step,) = series["change_points"]
    assert step["index"] == first and step["kind"] == "regressed"
    page = (fleet_site / "regressions.html").read_text()
    rows = _rows(page, f"{key}:")
    (found,) = rows.values()
    # The series of a single run (each node's one launch) cannot tell, and say so; the
    # busy host's series, quiet before and after its one busy run, can.
    unsure = _rows(page, "cannot-tell:")
    assert unsure and all(cells[3] == "1" for cells in unsure.values())
    assert "Cannot tell for" in page
    assert next(iter(rows)) == f"{key}:{node}:{step['run']}"
    assert found[1] == f"kern dtype=bf16 shape={shape}" and found[2] == node
    assert found[5] == step["run"] and found[6] == format_change(step["change_pct"] / 100)
    low, high = (float(x) for x in re.findall(r"\[([\d.]+), ([\d.]+)\]", found[8])[0])
    assert low < 1 + step["change_pct"] / 100 < high < 1
    assert (low, high) == pytest.approx(tuple(step["speed_ci"]), abs=1e-3)  # history's own
    # The case's page marks the step and the busy host's point.
    case = _rows((fleet_site / f"cases/{key}.html").read_text())
    assert case[step["run"]][-1] == f"regressed by {abs(step['change_pct']):.1f}% at run " \
                                    f"{step['run']}"
    busy_node, busy_shape, _ = BUSY
    busy = _rows((fleet_site / f"cases/{kern(busy_shape).key}.html").read_text())
    marked = [cells for cells in busy.values() if cells[2] == busy_node and cells[5] != "-"]
    assert len(marked) == 1 and marked[0][5] == "contended"


def test_the_fleet_page_judges_as_diagnose_does(fleet_store, fleet_site, capsys) -> None:
    assert main(["diagnose", "--json", "--store", str(fleet_store)]) == 1
    data = json.loads(capsys.readouterr().out)
    page = (fleet_site / "fleet.html").read_text()
    nodes = _rows(page, "node:")
    for node in data["nodes"]:
        cells = nodes[f"node:{node['node']}"]
        assert cells[3] == str(node["checks"]) and cells[4] == str(len(node["findings"]))
    failing = set(data["failing"])
    assert {"n04", "n05"} <= failing  # the failed check, the slow launch
    bad = re.findall(r'<tr class="bad" data-key="node:([^"]*)"', page)
    assert {html.unescape(k) for k in bad} == failing
    # The heat map against the median, and the isolate matrices with their tables.
    assert "Speed over the fleet median on" in page
    assert "Isolate: all-reduce bus bandwidth, nodes" in page
    assert page.count('class="chart-svg"') >= 4


def test_the_generations_page_has_the_chart_of_each_suite_on_several_stacks(
        fleet_store, fleet_site, capsys) -> None:
    assert main(["generations", "suite=quick", "--json", "--store", str(fleet_store)]) == 0
    data = json.loads(capsys.readouterr().out)
    page = (fleet_site / "generations.html").read_text()
    assert "Suite quick" in page and "Suite isolate" not in page
    assert page.count('class="chart-svg"') == 1
    table = page[page.index("<table>"):page.index("</table>")]
    assert table.count("<tr>") - 1 == len(data["rows"])  # the header row aside
