"""Telemetry in the reports: the power-and-clock chart and the energy table of the HTML
report, the same table in Markdown, and a throttled case marked in the results table as a
contended one is, so that a throttled figure never reads as clean."""

from __future__ import annotations

import html
import re

import pytest
from rich.console import Console

from accelbench.core.case import Case
from accelbench.core.measurement import Measurement, Rate
from accelbench.core.telemetry import ENERGY_J, GFX_CLOCK_MHZ, POWER_W, THROTTLE, Series
from accelbench.core.timing import Timing
from accelbench.core.units import format_value
from accelbench.report.energy import COLUMNS, energy_table
from accelbench.report.html import html_report
from accelbench.report.markdown import run_report
from accelbench.report.results import row
from accelbench.report.run_view import run_sections
from accelbench.report.terminal import print_sections
from accelbench.store import RunRecord, StoredRun

HOSTILE = "<script>alert(1)</script>\x1b[2J"
SAMPLES = (0.010, 0.0101, 0.0099, 0.01005, 0.00995, 0.01, 0.01002, 0.00998)
FLOP = 2 * 4096**3
T = tuple(round(0.1 * i, 4) for i in range(21))  # 0.0 .. 2.0 s
WINDOW = (0.3, 1.8)


def _series(*, power: float = 300.0, clock: list[float] | None = None,
            throttle: list[float] | None = None, counter_scale: float = 1.0,
            missing: dict[str, str] | None = None, names: dict[int, str] | None = None
            ) -> Series:
    """A recorded-looking series: steady power, an energy counter that integrates it
    (times `counter_scale`), the GFX clock, optionally throttle bits."""
    powers = [power + (5.0 if i % 2 else -5.0) for i in range(len(T))]
    energy, total = [], 1000.0
    for i, p in enumerate(powers):
        if i:
            total += counter_scale * 0.5 * (p + powers[i - 1]) * (T[i] - T[i - 1])
        energy.append(total)
    channels: dict[str, tuple[float | None, ...]] = {
        POWER_W: tuple(powers), ENERGY_J: tuple(energy),
        GFX_CLOCK_MHZ: tuple(clock or [2100.0] * len(T)),
    }
    if throttle is not None:
        channels[THROTTLE] = tuple(throttle)
    return Series(0.1, T, channels, sources=("nvml", "clocks"), missing=missing or {},
                  throttle_names=names or {}, window=WINDOW)


def _case(name: str, shape: str) -> Case:
    return Case.make(name, "g1", "micro", {"shape": shape, "dtype": "bf16"}, "cuda:0")


def _measured(case: Case, series: tuple[Series, ...] = ()) -> Measurement:
    return Measurement(
        case, "ok", timings=(Timing(SAMPLES, 10, 0, "converged", 0.95),),
        rates=(Rate("throughput", FLOP, "FLOP/s", 1e15),),
        telemetry=tuple(s.to_dict() for s in series),
    )


def _measurements() -> dict[str, Measurement]:
    sag = [2100.0] * 8 + [1500.0] * 5 + [2100.0] * 8
    bits = [0.0] * 9 + [4.0] * 3 + [0.0] * 9
    return {
        "steady": _measured(_case("gemm", "4096"),
                            (_series(missing={"rapl": "permission denied"}),
                             _series(power=310.0))),
        "throttled": _measured(_case("gemm", "8192"),
                               (_series(power=450.0, clock=sag, throttle=bits,
                                        names={2: "HW slowdown"}),)),
        "suspect": _measured(_case("gemm", "2048"), (_series(counter_scale=1.5),)),
        "bare": _measured(_case("gemm", "1024")),
    }


def _run(measurements: list[Measurement]) -> StoredRun:
    record = RunRecord(
        id="20250101-000000-beef", started_at=1.7e9, finished_at=1.7e9 + 5,
        status="complete", suite="quick", argv=("run",), device="cuda:0",
        generation_key="NVIDIA H100 | CUDA 12.4", host="node1", accelbench_version="0.1.0",
        fingerprint_id="fp", n_ok=len(measurements), n_failed=0, n_skipped=0)
    return StoredRun(record, {"format_version": 1, "platform": "cuda"}, tuple(measurements))


@pytest.fixture(scope="module")
def ms() -> dict[str, Measurement]:
    return _measurements()


@pytest.fixture(scope="module")
def report(ms) -> str:
    return html_report([_run(list(ms.values()))])


def _html_rows(page: str) -> dict[str, list[str]]:
    """The energy table's rows, by case, as text."""
    section = page.split('<h3 id="run-1-energy">Energy</h3>', 1)[1].split("</table>", 1)[0]
    rows = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", section, re.S):
        cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        if cells:
            rows[cells[0]] = cells
    return rows


def test_the_recorded_figures_are_what_the_table_is_checked_against(ms) -> None:
    assert not ms["steady"].throttled and ms["throttled"].throttled
    assert ms["suspect"].energy is not None and ms["suspect"].energy.counter_suspect
    assert ms["bare"].energy is None and not ms["bare"].throttled


@pytest.mark.slow
def test_html_energy_table_has_each_case_with_telemetry_and_its_flags(ms, report) -> None:
    rows = _html_rows(report)
    assert set(rows) == {"gemm dtype=bf16 shape=4096", "gemm dtype=bf16 shape=8192",
                         "gemm dtype=bf16 shape=2048"}  # the case without telemetry: none
    steady = dict(zip(COLUMNS, rows["gemm dtype=bf16 shape=4096"], strict=True))
    m = ms["steady"]
    energy = m.energy
    assert energy is not None
    power, per_call = m.figure("power"), m.figure("energy_per_call")
    work = m.figure("throughput_per_joule")
    assert power is not None and per_call is not None and work is not None
    assert work.unit == "FLOP/J"
    assert steady["Mean power"] == format_value(power.value, "W")
    assert steady["Mean power"].endswith(" W") and steady["Mean power"].startswith("30")
    assert steady["Peak power"] == format_value(energy.peak_power_w, "W")
    assert steady["Energy per call"] == format_value(per_call.value, "J")
    assert steady["Energy per call"].endswith("J")
    assert steady["Work per joule"] == format_value(work.value, "FLOP/J")
    assert steady["Work per joule"].endswith("GFLOP/J")
    assert steady["Clock min"] == steady["Clock median"] == "2100 MHz"
    assert steady["Throttled"] == "no"
    assert steady["Counter check"].endswith(" ok")

    throttled = dict(zip(COLUMNS, rows["gemm dtype=bf16 shape=8192"], strict=True))
    assert throttled["Clock min"] == "1500 MHz" and throttled["Clock median"] == "2100 MHz"
    assert throttled["Throttled"].startswith("yes: HW slowdown; GFX clock fell to 1500 MHz")
    suspect = dict(zip(COLUMNS, rows["gemm dtype=bf16 shape=2048"], strict=True))
    assert suspect["Counter check"] == "50.0% suspect"
    assert suspect["Throttled"] == "no"
    # Throttled and suspect rows are marked as doubtful; the steady one is not.
    section = report.split('<h3 id="run-1-energy">Energy</h3>', 1)[1].split("</table>", 1)[0]
    marked = re.findall(r'<tr class="warn"><td>([^<]*)</td>', section)
    assert marked == ["gemm dtype=bf16 shape=8192", "gemm dtype=bf16 shape=2048"]


def test_html_notes_name_the_sources_and_what_was_missing(report) -> None:
    notes = report.split('<h3 id="run-1-energy">Energy</h3>', 1)[1].split("<figure", 1)[0]
    assert "gemm dtype=bf16 shape=4096: sources nvml, clocks; rapl not used: permission denied" \
        in html.unescape(notes)
    assert "energy counter disagrees with integrated power by 50%" in html.unescape(notes)


def test_html_draws_power_and_clock_for_each_case_with_telemetry(report) -> None:
    energy = report.split('<h3 id="run-1-energy">Energy</h3>', 1)[1]
    figures = re.findall(r'<figure class="chart">(.*?)</figure>', energy, re.S)
    assert len(figures) == 3  # none for the case without telemetry
    first = figures[0]
    assert "Power and clock: gemm dtype=bf16 shape=4096" in first
    assert "<svg " in first and "power (W)" in first and "GFX clock (MHz)" in first
    assert "From the series of process 1 of 2. Shaded: the timed part." in first
    assert "its one process" in figures[1]
    ids = re.findall(r'\bid="([^"]+)"', report)
    assert len(ids) == len(set(ids)), "two elements share an id"


def test_html_results_mark_the_throttled_case(report) -> None:
    results = report.split('<h3 id="run-1-results">Results</h3>', 1)[1].split("<h3 ", 1)[0]
    assert re.search(r'<tr class="warn"><td>gemm</td><td>dtype=bf16 shape=8192</td>'
                     r'.*?<td>ok \(throttled\)</td>', results)
    assert "<strong>gemm dtype=bf16 shape=8192</strong>: throttled: HW slowdown; GFX clock " \
        "fell to 1500 MHz" in report


def test_a_run_without_telemetry_has_no_energy_section(ms) -> None:
    page = html_report([_run([ms["bare"]])])
    assert '<h3 id="run-1-energy">Energy</h3>' not in page and "Power and clock" not in page
    markdown = run_report(_run([ms["bare"]]).record, {}, [ms["bare"]])
    assert "## Energy" not in markdown and "throttled" not in markdown


def test_markdown_has_the_same_energy_table(ms) -> None:
    measurements = list(ms.values())
    text = run_report(_run(measurements).record, {}, measurements)
    section = text.split("## Energy", 1)[1].split("\n## ", 1)[0]
    assert "| " + " | ".join(COLUMNS) + " |" in section
    table = energy_table(measurements)
    assert table is not None
    for cells in table.rows:
        assert "| " + " | ".join(cells) + " |" in section
    assert "| 50.0% suspect |" in section
    assert "| yes: HW slowdown; GFX clock fell to 1500 MHz" in section
    assert "- gemm dtype=bf16 shape=4096: sources nvml, clocks; rapl not used: " \
        "permission denied" in section
    results = text.split("## Results", 1)[1].split("\n## ", 1)[0]
    assert "| gemm | dtype=bf16 shape=8192 |" in results and "| ok (throttled) |" in results


def test_terminal_row_is_marked_throttled_with_its_reasons(ms) -> None:
    r = row(ms["throttled"])
    assert r.throttled and r.doubtful and r.status == "ok (throttled)"
    assert r.note.startswith("throttled: HW slowdown; GFX clock fell to 1500 MHz")
    clean = row(ms["steady"])
    assert not clean.throttled and not clean.doubtful and clean.status == "ok"
    console = Console(width=200, record=True, markup=False, emoji=False, highlight=False)
    print_sections(run_sections(list(ms.values())), console)
    out = console.export_text()
    assert "ok (throttled)" in out
    assert "gemm dtype=bf16 shape=8192: throttled: HW slowdown" in out


@pytest.mark.slow
def test_stored_text_from_sources_is_escaped_everywhere() -> None:
    series = _series(power=300.0, clock=[2100.0] * 9 + [1000.0] * 3 + [2100.0] * 9,
                     throttle=[0.0] * 9 + [1.0] * 3 + [0.0] * 9,
                     missing={HOSTILE: HOSTILE}, names={0: HOSTILE})
    series = Series(series.interval_s, series.t, series.channels, sources=(HOSTILE,),
                    missing=series.missing, throttle_names=series.throttle_names,
                    window=series.window)
    m = _measured(_case("gemm", "4096"), (series,))
    page = html_report([_run([m])])
    assert "<script>alert" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in page
    text = run_report(_run([m]).record, {}, [m])
    assert "<script>" not in text and "\x1b" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in text
    console = Console(width=300, record=True, markup=False, emoji=False, highlight=False)
    print_sections(run_sections([m]), console)
    out = console.export_text()
    assert "\x1b[2J" not in out and "\\x1b[2J" in out



@pytest.mark.parametrize(("value", "unit", "text"), [
    (350.2, "W", "350 W"), (3200.0, "W", "3.20 kW"), (0.0123, "J", "12.3 mJ"),
    (4.5e-6, "J", "4.50 µJ"), (0.0, "J", "0 J"), (2.1e11, "FLOP/J", "210 GFLOP/J"),
    (3.0e9, "B/J", "3.00 GB/J"), (None, "W", "-"),
])
def test_power_energy_and_work_per_joule_read_with_prefixes(value, unit, text) -> None:
    assert format_value(value, unit) == text
