"""Figures measured on a busy host or a throttled device are marked on every chart that
draws them: the generations chart, a case's chart on the site, the comparison and A/B
charts. A 2x "gain" from one torch to the next that was host load must not look like a
gain."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from test_charts import SVG_NS, marks, parse_inline, texts, tick_values

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.report import charts
from accelbench.report.html import BUSY
from accelbench.store import Store, StoredRun
from fakes import stored_measurement

OLD = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.9.1"
NEW = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.14.1"
CONTENDED = {"format_version": 1, "contended": True, "reasons": ["load 9 on 4 cores"]}
QUIET = {"format_version": 1, "contended": False, "reasons": []}
CASE = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
FLOP = 2 * 4096**3


def gemm(rate: float, host: dict[str, object], rng: np.random.Generator,
         factor: float = 1.03) -> Measurement:
    """A GEMM at `rate`, its figure stated within [rate / factor, rate * factor]."""
    per_call = FLOP / rate
    samples = tuple(float(v) for v in per_call * (1 + 0.005 * rng.standard_normal(20)))
    m = stored_measurement(CASE, "ok", samples=samples, number=10, figures=(
        Figure("throughput", rate, "FLOP/s", True, low=rate / factor, high=rate * factor),
        Figure("time", per_call, "s", False)))
    return dataclasses.replace(m, hosts=(host,))


def add_run(store: Store, stack: str, host: str, started_at: float, m: Measurement) -> str:
    run_id = store.begin_run(
        fingerprint={"format_version": 1, "platform": "rocm", "host": {"hostname": host},
                     "device": {"name": "AMD Instinct MI300X", "type": "cuda"}},
        fingerprint_id=f"fp-{host}", generation_key=stack, device="cuda:0", suite="quick",
        argv=["run"], host=host, accelbench_version="0.1.0", started_at=started_at)
    store.add_measurement(run_id, m)
    store.finish_run(run_id, "complete", finished_at=started_at + 60)
    return run_id


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Torch 2.9.1 measured on a quiet host; 2.14.1 "twice as fast", on a contended one."""
    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(0)
    with Store.open(path) as s:
        add_run(s, OLD, "node1", 1.75e9, gemm(500e12, QUIET, rng))
        add_run(s, NEW, "node1", 1.75e9 + 3600, gemm(1000e12, CONTENDED, rng))
    return path


def test_a_contended_generation_is_ringed_in_the_generations_svg(store: Path,
                                                                 tmp_path: Path) -> None:
    chart = tmp_path / "gen.svg"
    assert main(["generations", "--store", str(store), "--chart", str(chart)]) == 0
    root = ET.fromstring(chart.read_bytes())
    assert root.tag == f"{SVG_NS}svg"
    ringed = [el for el in root.iter() if el.get("id") == "marked"]
    assert len(ringed) == 1
    assert len([u for u in ringed[0].iter() if u.tag == f"{SVG_NS}use"]) == 1  # 2.14.1's bar
    assert BUSY in texts(root)


def stored_runs(path: Path) -> list[StoredRun]:
    with Store.open(path) as s:
        return [s.load_run(r.id) for r in reversed(s.list_runs())]


def test_a_contended_point_is_ringed_on_a_case_chart(tmp_path: Path) -> None:
    """The site's chart of a case over time: the busy run's point ringed, and its wide
    interval cut at the axis instead of setting it."""
    from accelbench.report.site.pages import case_page, case_series

    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(1)
    rates = (22e9, 21.7e9, 22.2e9, 12.1e9, 12.0e9)
    with Store.open(path) as s:
        for i, rate in enumerate(rates):
            busy = i == 3
            add_run(s, OLD, "node1", 1.75e9 + 86400 * i,
                    gemm(rate, CONTENDED if busy else QUIET, rng, factor=52.3 if busy else 1.03))
    by_case = case_series(stored_runs(path), 0.05)
    page = case_page(CASE.key, by_case[CASE.key])
    (plot,) = page.blocks[0].plots
    assert plot.chart is not None
    root = parse_inline(charts.draw(plot.chart, "case"))
    assert max(tick_values(root, "y")) < 30  # GFLOP/s: the points', not the band's 632
    assert marks(root, "clipped-0-1") == 1
    assert marks(root, "marked-0") == 1
    assert "busy host or throttled" in texts(root)


def test_a_contended_case_is_ringed_on_the_comparison_chart(store: Path) -> None:
    from accelbench.analysis.compare import compare
    from accelbench.analysis.select import RunGroup
    from accelbench.report.html import html_report

    runs = stored_runs(store)
    comparison = compare(RunGroup("a", (runs[0],)), RunGroup("b", (runs[1],)))
    page = html_report([], comparisons=[comparison])
    svg = page[page.index("<svg "):page.index("</svg>") + len("</svg>")]
    root = parse_inline(svg)
    assert marks(root, "marked") == 1 and BUSY in texts(root)


def test_a_contended_case_is_ringed_on_the_ab_chart(store: Path) -> None:
    from accelbench.analysis.ab import AbResult, verdicts
    from accelbench.core.request import AbRequest
    from accelbench.core.sequential import PAIR_VALUES
    from accelbench.report.html import ab_chart

    runs = stored_runs(store)
    rng = np.random.default_rng(2)
    sides = []
    for run, speed in zip(runs, (1.0, 2.0), strict=True):
        (m,) = run.measurements
        pairs = [float(v) for v in 500e12 * speed * (1 + 0.01 * rng.standard_normal(6))]
        sides.append(StoredRun(run.record, run.fingerprint,
                               (dataclasses.replace(m, details={PAIR_VALUES: pairs}),)))
    ab = AbRequest(max_rounds=6)
    result = AbResult("ab1", sides[0], sides[1], ab,
                      verdicts(sides[0].measurements, sides[1].measurements, ab))
    drawn = ab_chart(result, "ab")
    assert drawn is not None
    root = parse_inline(str(drawn.svg))
    assert marks(root, "marked") == 1 and BUSY in texts(root)
    assert "Ring" in drawn.caption
