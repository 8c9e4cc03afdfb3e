"""The serving section of a run's report: a table per case of its loads, the Pareto
chart per model (a line per configuration, the front, the knee ringed), drawn in the HTML
report and written in the Markdown one; measurements built by hand, as a store holds
them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from accelbench.benchmarks.llm.metrics import SLO
from accelbench.benchmarks.llm.sweep import SweepPoint
from accelbench.benchmarks.llm.view import FRONT, KEY, KNEE, sections
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.view import BAD, GOOD, WARN, Lines
from accelbench.report import charts
from accelbench.store import RunRecord, StoredRun
from fakes import stored_measurement

VIEW = "accelbench.benchmarks.llm.view:sections"
SLO_TEXT = "ttft:500ms"


def _values(load: float, *, ttft99: float = 0.2, failed: float = 0.0,
            speed: float = 1.0) -> dict[str, float]:
    """A load's figures: per-user speed falls and per-device throughput rises with it."""
    return {"ttft_p50": ttft99 / 2, "ttft_p99": ttft99, "tpot_p50": 0.02, "tpot_p99": 0.03,
            "itl_p99": 0.03, "e2e_p99": 1.0, "requests": load * speed,
            "output_tokens": 100 * load * speed, "tokens_per_user": speed * 100 / load,
            "output_tokens_per_device": 100 * load * speed, "goodput": load * speed,
            "slo_met": 100.0, "failed": failed}


def _figures(values: dict[str, float]) -> tuple[Figure, ...]:
    return tuple(Figure(k, v, "s" if "_p" in k else "token/s",
                        not ("_p" in k or k == "failed")) for k, v in values.items())


def _case(engine: str = "vllm", model: str = "llama-tiny", concurrency: int = 4,
          rate: float = 0.0) -> Case:
    return Case.make("serve-llm", "v1", "llm", {
        "model": model, "engine": engine, "concurrency": concurrency, "rate": rate,
        "slo": SLO_TEXT}, "cpu")


def _swept(engine: str = "vllm", model: str = "llama-tiny", speed: float = 1.0,
           slow_from: float = 8) -> Measurement:
    points = [SweepPoint(c, "concurrency", _values(c, speed=speed,
                                                   ttft99=0.9 if c >= slow_from else 0.2),
                         c < slow_from)
              for c in (1, 2, 4, 8)]
    m: Measurement = stored_measurement(_case(engine, model), figures=_figures(_values(4)),
                              details={"sweep": [p.to_dict() for p in points],
                                       "slo": SLO.parse(SLO_TEXT).to_dict()})
    return m


def _single(concurrency: int, engine: str = "transformers-serve", **over: Any) -> Measurement:
    m: Measurement = stored_measurement(_case(engine, concurrency=concurrency),
                                        figures=_figures(_values(concurrency, **over)),
                                        details={"slo": SLO.parse(SLO_TEXT).to_dict()})
    return m


def test_a_swept_case_has_a_row_per_load_and_its_knee_marked() -> None:
    (section,) = sections([_swept()])
    assert section.key == KEY
    (table,) = section.tables
    assert table.header[0] == "Concurrency"
    assert [r[0] for r in table.rows] == ["1", "2", "4", "8"]
    assert table.styles == [None, None, GOOD, WARN]
    assert table.rows[3][:3] == ("8", "450 ms", "900 ms")  # TTFT p50, p99
    assert table.rows[3][5:] == ("8.00", "800", "12.5", "8.00", "0")
    assert table.notes == ["SLO: ttft p99 within 500 ms.",
                           "Knee: concurrency 4, the highest load meeting the SLO."]


def test_cases_without_a_sweep_are_one_line_over_their_loads() -> None:
    ms = [_single(8, ttft99=0.9), _single(1), _single(2, failed=1.0)]
    (section,) = sections(ms)
    assert [t.rows[0][0] for t in section.tables] == ["8", "1", "2"]
    # Over the bound; within it; a failed request.
    assert [t.styles[0] for t in section.tables] == [WARN, GOOD, BAD]
    assert section.tables[1].notes[1] == "concurrency 1: meets the SLO."
    assert section.tables[2].notes[1] == "concurrency 2: misses the SLO."
    (chart,) = section.charts
    assert isinstance(chart, Lines) and chart.site and chart.marked_label == KNEE
    (line,) = chart.series  # one configuration: no front drawn apart
    assert line.name == "transformers-serve"
    assert list(line.x) == [100.0, 50.0, 12.5]  # by load: 1, 2, 8
    assert list(line.marked) == [0]  # concurrency 2 failed a request, 8 missed the bound
    assert line.tips[0].startswith("transformers-serve, concurrency 1: 100 token/s per user")


def test_the_chart_has_a_line_per_configuration_and_the_front() -> None:
    ms = [_swept("vllm", speed=2.0), _swept("transformers-serve", speed=1.0)]
    (section,) = sections(ms)
    (chart,) = section.charts
    assert isinstance(chart, Lines)
    names = [s.name for s in chart.series]
    assert names == ["engine=vllm", "engine=transformers-serve", FRONT]
    vllm, _, front = chart.series
    assert list(vllm.marked) == [2]  # concurrency 4
    # vLLM is twice as fast on both axes at every load: the front is its line.
    assert list(front.x) == sorted(vllm.x) and list(front.y) == sorted(vllm.y, reverse=True)
    # Up to 1600 token/s: the axis in ktoken/s.
    assert chart.ylabel == "output tokens per device (ktoken/s)" and max(vllm.y) == 1.6


def test_each_model_has_its_own_chart() -> None:
    (section,) = sections([_swept(model="llama-1b"), _swept(model="llama-8b")])
    assert [c.title for c in section.charts] == [
        "Throughput per device against speed per user, llama-1b",
        "Throughput per device against speed per user, llama-8b"]


def test_damaged_details_are_read_as_far_as_they_go() -> None:
    m = _swept()
    damaged = stored_measurement(m.case, figures=m.measured, details={
        "sweep": [{"load": "x"}, 5, *m.details["sweep"][:1], {"kind": "users", "load": 1}],
        "slo": {"ttft": "soon"}})
    (section,) = sections([damaged])
    (table,) = section.tables
    assert [r[0] for r in table.rows] == ["1"]
    assert table.notes[0].startswith("SLO: no latency bound")


def test_failed_cases_add_nothing_but_the_loads_they_measured() -> None:
    failed = stored_measurement(_case(), "failed", reason="every request failed: refused")
    assert sections([failed]) == []
    swept = _swept()
    died = stored_measurement(swept.case, "failed", reason="the engine died during the load",
                              details={**swept.details, "sweep": swept.details["sweep"][:2]})
    (section,) = sections([died])
    (table,) = section.tables
    assert [r[0] for r in table.rows] == ["1", "2"]
    assert GOOD not in table.styles  # no knee: the sweep did not finish
    assert table.notes[1] == ("The case failed (the engine died during the load); the loads "
                              "above were measured before it did.")
    (chart,) = section.charts
    assert isinstance(chart, Lines)
    (line,) = chart.series
    assert line.name == "vllm (failed)" and not line.marked and len(line.x) == 2


@pytest.fixture
def llm_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry with a serve-llm benchmark declaring the view (a stand-in where the
    family is not registered)."""
    import accelbench.benchmarks as benchmarks
    from accelbench.core.benchmark import Benchmark
    from accelbench.core.registry import Registry

    if not any(b.name == "serve-llm" for b in benchmarks.REGISTRY):
        stand_in = Benchmark("serve-llm", "llm", "LLM serving", VIEW, views=(VIEW,))
        monkeypatch.setattr(benchmarks, "REGISTRY",
                            Registry([*benchmarks.REGISTRY, stand_in]))
    yield


def _run(ms: list[Measurement], run_id: str = "20260101-000000-l1",
         stack: str = "CPU | PyTorch 2.14.1", started: float = 1.7e9) -> StoredRun:
    record = RunRecord(id=run_id, started_at=started, finished_at=started + 60,
                       status="complete", suite="", argv=("run",), device="cpu",
                       generation_key=stack, host="n0", accelbench_version="0.1.0",
                       fingerprint_id="fp", n_ok=len(ms), n_failed=0, n_skipped=0)
    return StoredRun(record, {"format_version": 1, "platform": "cpu"}, tuple(ms))


def test_the_html_report_draws_the_pareto_chart_with_the_knee(llm_registry: None) -> None:
    from accelbench.report.html import html_report

    page = html_report([_run([_swept("vllm", speed=2.0), _swept("transformers-serve")])])
    section = page[page.index(f'id="run-1-{KEY}"'):]
    assert len(re.findall(r'<svg class="chart-svg" role="img" data-chart="chart-\d+"',
                          section)) == 1
    svg = section[:section.index("</svg>")]
    assert "#b00020" in svg and KNEE in svg and FRONT in svg
    assert "<title>engine=vllm, concurrency 4: 50.0 token/s per user" in svg


def test_the_markdown_report_has_the_table_of_each_case(llm_registry: None) -> None:
    from accelbench.report.markdown import run_report

    run = _run([_swept()])
    text = run_report(run.record, run.fingerprint, run.measurements)
    assert "## LLM serving" in text
    assert "| 4 | 100 ms | 200 ms | 30.0 ms | 1.00 s | 4.00 | 400 | 25.0 | 4.00 | 0 |" in text
    assert "Knee: concurrency 4, the highest load meeting the SLO." in text


def test_the_chart_draws_with_hostile_names() -> None:
    m = stored_measurement(Case.make("serve-llm", "v1", "llm", {
        "model": "$x$ <b>", "engine": "_a\u202e", "concurrency": 1}, "cpu"),
        figures=_figures(_values(1)))
    (section,) = sections([m])
    svg = charts.draw(section.charts[0], "c1")
    assert "<b>" not in svg
