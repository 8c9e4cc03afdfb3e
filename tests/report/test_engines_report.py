"""The engines tables and chart in the terminal, Markdown and HTML reports."""

from __future__ import annotations

import numpy as np

from accelbench.benchmarks.models.engines.view import HEADER, engines_tables
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.html import html_report
from accelbench.report.markdown import run_report
from accelbench.store import RunRecord, StoredRun
from fakes import stored_measurement

PARAMS = {"model": "resnet50", "dtype": "bf16", "batch": 32, "image": 224, "provider": "",
          "ort_level": "", "int8": "", "config": ""}
SHOWN = ["model", "dtype", "batch", "engine", "image"]


def _m(engine: str, seconds: float | None, p50: float | None = None, **details):
    case = Case.make("infer-engine", "v1", "model", {**PARAMS, "engine": engine}, "cuda:0",
                     SHOWN)
    if seconds is None:
        return stored_measurement(case, "failed", reason="parity with eager fp32 failed: "
                                  "max relative error 0.5 > 0.1 (max abs error 3.2, ...)")
    samples = tuple(seconds * (1 + 0.01 * np.random.default_rng(1).standard_normal(9)))
    figures = [Figure("throughput", 32 / seconds, "sample/s"),
               Figure("p50", p50 or seconds, "s", False)]
    if engine != "eager":
        figures.append(Figure("compile_time", 12.5, "s", False))
    parity = {"max_abs": 0.01, "max_rel": 0.004, "cosine": 0.99991, "top1": 0.96,
              "tolerance": {"max_rel": 0.1, "cosine": 0.99, "top1": 0.7}, "ok": True}
    return stored_measurement(case, "ok", samples=samples, figures=tuple(figures),
                              details={"parity": parity, **details})


def _run() -> StoredRun:
    ms = (_m("eager", 0.02), _m("compile", 0.01),
          _m("onnxruntime", 0.008,
             engine_details={"providers_used": ["MIGraphXExecutionProvider",
                                                "CPUExecutionProvider"]}),
          _m("torchscript", None))
    record = RunRecord(id="20260101-000000-e1", started_at=1.7e9, finished_at=1.7e9 + 9,
                       status="complete", suite="standard", argv=("run",), device="cuda:0",
                       generation_key="MI300X | ROCm 6.4 | PyTorch 2.14.1", host="node1",
                       accelbench_version="0.1.0", fingerprint_id="fp", n_ok=3, n_failed=1,
                       n_skipped=0)
    return StoredRun(record, {"format_version": 1, "platform": "rocm"}, ms)


def test_the_engines_table_has_speedup_parity_and_providers_per_engine() -> None:
    [table] = engines_tables(_run().measurements)
    assert table.header == HEADER
    assert table.title == "Engines: infer-engine batch=32 dtype=bf16 image=224 model=resnet50 " \
                          "on cuda:0"
    rows = {r[0]: r for r in table.rows}
    assert rows["eager"][5] == "1.00x (reference)"
    assert rows["compile"][5].startswith("2.00x [")
    assert rows["onnxruntime"][5].startswith("2.50x [")
    assert rows["onnxruntime"][8] == "MIGraphXExecutionProvider, CPUExecutionProvider"
    assert rows["compile"][4] == "12.5 s"
    assert rows["compile"][6] == "0.004, 0.999910, 96.0%"
    assert rows["compile"][7] == "<= 0.1, >= 0.99, >= 70%"
    failed = rows["torchscript"]
    assert failed[1].startswith("failed: parity with eager fp32 failed") and failed[5] == "-"
    assert table.styles[3] == "bad" and table.notes  # how to read it, under the last table


def test_markdown_and_html_reports_show_the_engines_and_their_chart() -> None:
    run = _run()
    md = run_report(run.record, run.fingerprint, run.measurements)
    assert "## Engines: infer-engine batch=32 dtype=bf16 image=224 model=resnet50" in md
    assert "| compile | ok |" in md
    page = html_report([run])
    assert '<h3 id="run-1-engines">Engines</h3>' in page
    assert "Throughput over eager: infer-engine batch=32" in page
    assert page.count("<svg") >= 1


def test_the_ratio_names_the_figure_it_is_over_when_latency_ranks_the_other_way() -> None:
    # An int8 engine: more throughput over timed windows, yet a slower single call.
    eager, int8 = _m("eager", 0.02), _m("int8", 0.0113, p50=0.025)
    [table] = engines_tables([eager, int8])
    rows = {r[0]: r for r in table.rows}
    assert rows["int8"][5].startswith("1.77x")
    assert table.header[5] == "Throughput over eager"
    assert "may rank the engines otherwise" in " ".join(table.notes)


def test_a_ratio_over_a_busy_figure_is_ringed_on_the_chart() -> None:
    """A speed-up over eager rests on two figures: a busy-host engine is ringed, and every
    bar is when eager itself was measured on a busy host."""
    import dataclasses

    from accelbench.benchmarks.models.engines.groups import engine_groups
    from accelbench.benchmarks.models.engines.view import speedup_chart

    busy = {"format_version": 1, "contended": True, "reasons": ["load 9 on 2 cores"]}

    def on_a_busy_host(m):
        return dataclasses.replace(m, hosts=(busy,))

    quiet = [_m("eager", 0.02), _m("compile", 0.01), _m("onnxruntime", 0.008)]
    assert all(not s.marked for s in speedup_chart(engine_groups(quiet)[0]).series)
    one_busy = [quiet[0], on_a_busy_host(quiet[1]), quiet[2]]
    chart = speedup_chart(engine_groups(one_busy)[0])
    assert list(chart.series[0].marked) == [chart.categories.index("compile")]
    assert chart.marked_label
    eager_busy = [on_a_busy_host(quiet[0]), quiet[1], quiet[2]]
    assert len(speedup_chart(engine_groups(eager_busy)[0]).series[0].marked) == 3
