"""Number formatting and the Markdown report's escaping."""

import math
from pathlib import Path

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.core.units import (
    WIDE_INTERVAL,
    axis_scale,
    format_bytes,
    format_change,
    format_factor,
    format_number,
    format_p,
    format_params,
    format_pct,
    format_plain,
    format_ratio,
    format_rel,
    format_share,
    format_size,
    format_time,
    format_timestamp,
    format_value,
    interval_factor,
)
from accelbench.report.results import row
from accelbench.report.text import escape, markdown_table
from fakes import stored_measurement


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (5.52e10, "FLOP/s", "55.2 GFLOP/s"),
        (1.2e15, "FLOP/s", "1.20 PFLOP/s"),
        (3.35e12, "B/s", "3.35 TB/s"),
        (4.3e-6, "s", "4.30 µs"),
        (0.25, "s", "250 ms"),
        (12.0, "s", "12.0 s"),
        (5e-10, "s", "0.500 ns"),
        (None, "s", "-"),
        (17.0, "item/s", "17.0 item/s"),
    ],
)
def test_format_value(value, unit, text):
    assert format_value(value, unit) == text


def test_percentages():
    assert format_pct(None) == "-"
    assert format_pct(87.26) == "87.3%"
    assert format_rel(0.0123) == "±1.2%"


@pytest.mark.parametrize(("rel", "text"), [
    (0.0123, "±1.2%"), (0.5, "±50.0%"),  # up to ±50%: a percentage
    (0.75, "×/÷ 2.00"), (34.91, "×/÷ 69.8"), (26.16, "×/÷ 52.3"),  # beyond: a factor
    (math.inf, "×/÷ ∞"), (None, "-"), (math.nan, "-"),
])
def test_a_wide_interval_reads_as_a_factor_either_way(rel, text):
    assert format_rel(rel) == text


def test_the_factor_is_that_of_a_log_symmetric_interval_as_wide():
    """[v / F, v * F] has the half-width the factor was made from, so ×/÷ F and ±x% state
    the same interval."""
    for rel in (0.51, 2.0, 34.91):
        factor = interval_factor(rel)
        assert (factor - 1 / factor) / 2 == pytest.approx(rel)
    assert interval_factor(0.5) == pytest.approx((1 + math.sqrt(5)) / 2)
    assert WIDE_INTERVAL == 0.5


def test_the_results_table_shows_a_wide_interval_as_a_factor():
    case = Case.make("gemm", "v", "micro", {"shape": "64", "dtype": "fp32"}, "cpu")
    wild = stored_measurement(case, "ok", number=1, samples=(
        1e-3, 9e-3, 0.3e-3, 30e-3, 0.1e-3, 2e-3, 50e-3, 0.05e-3),
        figures=(Figure("throughput", 2e9, "FLOP/s"),))
    assert wild.spread is not None and wild.spread.rel_half_width > 10
    assert row(wild).ci == format_rel(wild.spread.rel_half_width) == "×/÷ 33.3"


def test_markdown_cells_cannot_break_the_table_or_inject_html():
    assert escape("a|b\nc<script>") == "a\\|b c&lt;script&gt;"


def test_rows_show_failure_reasons_and_noise():
    case = Case.make("gemm", "v", "micro", {"shape": "64", "dtype": "fp8"}, "cpu")
    failed = row(stored_measurement(case, "failed", reason="fp8 not available on cpu"))
    assert failed.status == "failed" and failed.note == "fp8 not available on cpu"
    noisy = row(stored_measurement(case, "ok", samples=(1e-3, 1.2e-3, 0.9e-3), number=1,
                            figures=(Figure("throughput", 2e9, "FLOP/s", peak=4e9),),
                            warnings=("noisy: IQR is 15% of the median",)))
    assert noisy.result == "2.00 GFLOP/s"
    assert noisy.pct_of_peak == "50.0%"
    assert noisy.status == "ok (noisy)"
    assert noisy.samples == "3"


@pytest.mark.parametrize(
    ("value", "decimals", "text"),
    [
        (5 << 20, None, "5.00 MiB"),
        (64 << 10, None, "64.0 KiB"),
        (1000, None, "1000 B"),
        (68702699520, 1, "64.0 GiB"),
        (3 << 40, 1, "3.0 TiB"),
        (65536, 0, "64 KiB"),
        (None, None, "-"),
    ],
)
def test_binary_sizes(value, decimals, text):
    assert format_bytes(value, decimals) == text


def test_message_sizes_read_as_they_are_typed():
    assert [format_size(s) for s in (8, 1000, 1024, 3 << 20, None)] == [
        "8", "1000", "1K", "3M", "-"]


def test_shares_ratios_changes_and_p_values():
    assert format_share(0.4781) == "47.8%" and format_share(None) == "-"
    assert format_ratio(1.04213, 1.01, 1.075) == "1.042 [1.010, 1.075]"
    assert format_ratio(math.nan) == "-" and format_ratio(2.0, math.nan, 3.0) == "2.000"
    assert format_factor(1.234) == "1.23x"
    assert format_change(0.1234) == "+12.3%" and format_change(-0.05) == "-5.0%"
    assert format_change(math.inf) == "-"
    assert format_p(0.0312) == "0.031" and format_p(1e-6) == "<1e-4" and format_p(None) == "-"
    assert format_time(2.5e-3) == "2.50 ms" and format_number(3.14159) == "3.14"


def test_time_stamps_are_utc():
    assert format_timestamp(0) == "1970-01-01 00:00"
    assert format_timestamp(3661, seconds=True) == "1970-01-01 01:01:01"


def test_switches_read_one_way_in_every_table():
    assert format_plain(True) == "yes" and format_plain(False) == "no"
    assert format_plain(["a", 1]) == "a, 1" and format_plain(4096) == "4096"
    assert format_params((("pinned", True), ("size", 64))) == "pinned=yes size=64"
    case = Case.make("memory", "v", "micro", {"pinned": True, "size": 64}, "cpu")
    assert case.label == "memory pinned=yes size=64"
    assert row(stored_measurement(case, "skipped", reason="-")).params == "pinned=yes size=64"


def test_rows_show_the_parameters_chosen_at_planning_time():
    case = Case.make("gemm", "v", "micro", {"shape": "64", "cast": False}, "cpu",
                     shown=("shape",))
    assert row(stored_measurement(case, "skipped", reason="-")).params == "shape=64"


def test_axis_scale_takes_one_prefix_for_a_whole_axis():
    assert axis_scale([2e9, 5e11], "FLOP/s") == (1e9, "GFLOP/s")
    assert axis_scale([3e-6, 9e-6], "s") == (1e-6, "µs")
    assert axis_scale([], "s") == (1e-9, "ns")
    assert axis_scale([5.0], "item/s") == (1.0, "item/s")


def test_one_markdown_table_writer_escapes_every_cell():
    lines = markdown_table(("a|b", "n"), [("x\r\ny", "1"), ("<b>", "\\")], numeric={1})
    assert lines == ["| a\\|b | n |", "|---|---:|", "| x  y | 1 |", "| &lt;b&gt; | \\\\ |"]


def test_presentation_lives_in_report_only():
    """analysis/ returns data; report/ writes it and reads parameters from the case."""
    src = Path(__file__).parents[2] / "src" / "accelbench"
    for path in (src / "analysis").glob("*.py"):
        assert "accelbench.report" not in path.read_text(encoding="utf-8"), path.name
    assert "REGISTRY" not in (src / "report" / "results.py").read_text(encoding="utf-8")
