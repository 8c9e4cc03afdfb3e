"""Number formatting and the Markdown report's escaping."""

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.markdown import escape
from accelbench.report.table import row
from accelbench.report.units import format_pct, format_rel, format_value
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
