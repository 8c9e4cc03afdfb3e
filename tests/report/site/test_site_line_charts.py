"""Line charts a view marks for the site (`Lines.site`), such as the serving family's
Pareto chart: on the fleet page, from the newest run of each benchmark on each stack,
drawn with the table of their points and the tables of their section."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.view import Lines, LineSeries
from accelbench.report.site.model import lines_grid
from accelbench.report.site.pages import fleet_page
from accelbench.report.site.render import render_page
from accelbench.store import RunRecord, StoredRun
from fakes import stored_measurement

VIEW = "accelbench.benchmarks.llm.view:sections"


@pytest.fixture
def llm_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry with a serve-llm benchmark declaring the serving view (a stand-in
    where the family is not registered)."""
    import accelbench.benchmarks as benchmarks
    from accelbench.core.benchmark import Benchmark
    from accelbench.core.registry import Registry

    if not any(b.name == "serve-llm" for b in benchmarks.REGISTRY):
        stand_in = Benchmark("serve-llm", "llm", "LLM serving", VIEW, views=(VIEW,))
        monkeypatch.setattr(benchmarks, "REGISTRY",
                            Registry([*benchmarks.REGISTRY, stand_in]))
    yield


def _serving(engine: str, speed: float) -> Measurement:
    def values(load: int) -> dict[str, float]:
        return {"ttft_p50": 0.1, "ttft_p99": 0.2 * load, "failed": 0.0,
                "output_tokens": 100.0 * load * speed, "tokens_per_user": 100.0 * speed / load,
                "output_tokens_per_device": 100.0 * load * speed}

    sweep = [{"load": float(c), "kind": "concurrency", "figures": values(c),
              "meets_slo": 0.2 * c <= 0.5} for c in (1, 2, 4)]
    case = Case.make("serve-llm", "v1", "llm", {"model": "llama-tiny", "engine": engine,
                                               "concurrency": 1, "rate": 0.0}, "cpu")
    m: Measurement = stored_measurement(case, figures=[Figure(k, v, "token/s")
                                                       for k, v in values(2).items()],
                                        details={"sweep": sweep, "slo": {"ttft": 0.5}})
    return m


def _run(run_id: str, stack: str, started: float, ms: list[Measurement]) -> StoredRun:
    record = RunRecord(id=run_id, started_at=started, finished_at=started + 60,
                       status="complete", suite="serving", argv=("run",), device="cpu",
                       generation_key=stack, host="n0", accelbench_version="0.1.0",
                       fingerprint_id="fp", n_ok=len(ms), n_failed=0, n_skipped=0)
    return StoredRun(record, {"format_version": 1, "platform": "cpu"}, tuple(ms))


def test_the_fleet_page_has_the_pareto_chart_of_the_newest_run_on_each_stack(
        llm_registry: None) -> None:
    runs = [_run("r1", "stack A", 1.7e9, [_serving("old-engine", 1.0)]),
            _run("r2", "stack A", 1.7e9 + 100, [_serving("vllm", 2.0),
                                                 _serving("transformers-serve", 1.0)]),
            _run("r3", "stack B", 1.7e9 + 200, [_serving("vllm", 0.5)])]
    page = fleet_page(runs)
    blocks = [b for b in page.blocks if b.title.startswith("LLM serving: serve-llm")]
    assert [b.title for b in blocks] == ["LLM serving: serve-llm on stack A",
                                         "LLM serving: serve-llm on stack B"]
    on_a = blocks[0]
    assert "From run r2 on n0" in on_a.about  # r1 is not the newest on stack A
    (plot,) = on_a.plots
    assert isinstance(plot.chart, Lines) and plot.chart.site
    lines = [r.cells[0] for r in plot.table.rows]
    assert "old-engine" not in " ".join(str(c) for c in lines)
    assert lines.count("engine=vllm") == 3 and "Pareto front" in lines
    knee_rows = [r for r in plot.table.rows if r.cells[3] == "SLO knee"]
    assert [r.cells[0] for r in knee_rows] == ["engine=vllm", "engine=transformers-serve"]
    assert len(on_a.tables) == 2  # the table of each case
    html = render_page(page)
    assert html.count('data-chart="c') >= 2 and "SLO knee" in html


def test_lines_grid_writes_a_row_per_point_with_its_mark_and_text() -> None:
    chart = Lines("t", [LineSeries("a", [1.0, 2.0], [3.0, 4.0], marked=[1],
                                   tips=["one", "two"]),
                        LineSeries("b", [5.0], [6.0])],
                  "x (s)", "y (B)", marked_label="best")
    grid = lines_grid(chart)
    assert grid.header == ("Line", "x (s)", "y (B)", "Mark", "Point")
    assert [r.cells for r in grid.rows] == [("a", "1.00", "3.00", "-", "one"),
                                            ("a", "2.00", "4.00", "best", "two"),
                                            ("b", "5.00", "6.00", "-", "-")]

