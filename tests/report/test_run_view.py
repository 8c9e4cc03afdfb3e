"""One run view: a run holding every kind of result (measurements, validation checks,
inference engines, collective sweeps, isolate, energy, a profile) shows the same sections,
in the same order, on the terminal, in Markdown and in HTML."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console
from test_engines_report import _run as engines_run
from test_isolate_report import _run as isolate_run
from test_telemetry_report import _measurements as telemetry_measurements
from test_validation_report import _checks

from accelbench.benchmarks.collectives import ops
from accelbench.benchmarks.collectives.declaration import BENCHMARK as COLLECTIVES
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.profile.analysis import analyze_file
from accelbench.report.html import html_report
from accelbench.report.markdown import run_report
from accelbench.report.run_view import run_sections
from accelbench.report.terminal import print_sections
from accelbench.store import RunRecord, StoredProfile, StoredRun
from fakes import stored_measurement

TRACE = Path(__file__).parents[1] / "fixtures" / "traces" / "cuda_h100_rank0.pt.trace.json.gz"


def _all_reduce(nbytes: int, seconds: float) -> Measurement:
    identity = {**COLLECTIVES.resolve({"op": "all-reduce", "bytes": nbytes}), "world_size": 2,
                "backend": "gloo"}
    case = Case.make("collectives", "v", "collective", identity, "cpu")
    factor = ops.bus_factor("all-reduce", 2)
    assert factor is not None
    return stored_measurement(
        case, "ok", samples=(seconds,), number=1,
        figures=(Figure("busbw", nbytes * factor / seconds, "B/s"),
                 Figure("time", seconds, "s", False)),
        details={"bytes": nbytes, "library": "Gloo", "nodes": 1})


@pytest.fixture(scope="module")
def everything() -> tuple[StoredRun, list[StoredProfile]]:
    measurements = (
        *telemetry_measurements().values(),  # GEMM with telemetry: results and energy
        *_checks(),
        *engines_run().measurements,
        _all_reduce(8, 20e-6), _all_reduce(1 << 20, 1e-3),
        *isolate_run().measurements,
    )
    record = RunRecord(id="20260101-000000-a11", started_at=1.7e9, finished_at=1.7e9 + 9,
                       status="complete", suite="full", argv=("run",), device="cuda:0",
                       generation_key="NVIDIA H100 | CUDA 12.4 | PyTorch 2.14.1",
                       host="node1", accelbench_version="0.1.0", fingerprint_id="fp",
                       n_ok=len(measurements), n_failed=0, n_skipped=0)
    run = StoredRun(record, {"format_version": 1, "platform": "cuda"}, measurements)
    profile = StoredProfile(1, record.id, measurements[0].case.key, "gemm", "gemm bf16",
                            (str(TRACE),), analyze_file(TRACE), 1.7e9)
    return run, [profile]


def test_a_run_of_every_kind_has_every_section(everything) -> None:
    run, profiles = everything
    # What the run checked first; the families' own sections in the registry's order.
    assert [s.key for s in run_sections(run.measurements, profiles)] == [
        "validation", "results", "notes", "collectives", "isolate", "engines", "energy",
        "profiles"]


def test_terminal_markdown_and_html_show_the_same_sections_in_order(everything) -> None:
    run, profiles = everything
    titles = [s.title for s in run_sections(run.measurements, profiles)]

    console = Console(width=200, record=True, markup=False, emoji=False, highlight=False)
    print_sections(run_sections(run.measurements, profiles), console)
    lines = console.export_text().splitlines()
    terminal = [line for line in lines if line in titles]

    markdown = re.findall(r"^## (.+)$", run_report(run.record, run.fingerprint,
                                                    run.measurements, profiles), re.M)
    markdown = [t for t in markdown if t not in ("Stack", "How to read these numbers")]

    page = html_report([run], profiles={run.record.id: profiles})
    html = re.findall(r'<h3 id="run-1-[a-z]+">([^<]+)</h3>', page)

    assert terminal == markdown == html == titles


def test_each_section_keeps_what_it_shows(everything) -> None:
    run, profiles = everything
    text = run_report(run.record, run.fingerprint, run.measurements, profiles)
    for needle in ("Validation: verdict per check and precision", "### micro",
                   "Collectives: peak bus bandwidth", "Profile of gemm bf16",
                   "### Where the device time of the profiled steps went",
                   "| torchscript |", "**gemm dtype=bf16 shape=8192**: throttled"):
        assert needle in text, needle
    page = html_report([run], profiles={run.record.id: profiles})
    # The charts go with their sections: the sweep's after the collectives heading.
    collectives = page.index('id="run-1-collectives"')
    assert page.index("Collective bus bandwidth against message size") > collectives
