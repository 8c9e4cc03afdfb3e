"""Validation checks in the reports: the pass/fail matrix per check and precision with the
failing checks first, every check with its error, tolerance and margin, in HTML, Markdown
and the terminal; stored text escaped as everywhere."""

from __future__ import annotations

import re

from accelbench.analysis.checks import check_results, matrix, result_text
from accelbench.benchmarks.validation.view import checks_table, matrix_table
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.html import html_report
from accelbench.report.markdown import run_report
from accelbench.report.results import row
from accelbench.store import RunRecord, StoredRun
from fakes import check_measurement, stored_measurement

HOSTILE = "<script>document.title='pwned'</script>"


def _checks():
    return [
        check_measurement("numerics", {"op": "matmul", "dtype": "fp32"}, error=1e-5,
                          tolerance=2e-4),
        check_measurement("numerics", {"op": "matmul", "dtype": "tf32"}, "skipped",
                          reason="tf32 is a GPU matrix-core mode; not available on cpu"),
        check_measurement("numerics", {"op": "softmax", "dtype": "fp32"}, error=1e-7,
                          tolerance=1e-5),
        check_measurement("numerics", {"op": "softmax", "dtype": "fp16"}, "failed", error=3e-3,
                          tolerance=1e-3, reason="wrong result: softmax in fp16: 12 of 262144 "
                          "elements of output outside the tolerance"),
        check_measurement("torchvision", {"check": "nms"}, "skipped",
                          reason=f"torchvision is not installed {HOSTILE}"),
        check_measurement("determinism", {"op": "matmul", "dtype": "fp32"}, error=0.0,
                          tolerance=0.0, warnings=("contended: 3 other processes busy",)),
    ]


def _run(measurements, suite="validate") -> StoredRun:
    record = RunRecord(
        id="20260101-000000-cafe", started_at=1.8e9, finished_at=1.8e9 + 60, status="failed",
        suite=suite, argv=("validate",), device="cpu", generation_key="AMD EPYC | CPU | PyTorch",
        host="node1", accelbench_version="0.1.0", fingerprint_id="fp", n_ok=3, n_failed=1,
        n_skipped=2)
    fingerprint = {"format_version": 1, "platform": "cpu", "device": {"name": "AMD EPYC"}}
    return StoredRun(record, fingerprint, tuple(measurements))


def test_the_matrix_puts_failing_checks_first_with_a_cell_per_precision():
    m = matrix(check_results(_checks()))
    assert m.rows[0] == "numerics op=softmax"
    assert m.precisions == ["fp32", "tf32", "fp16", "-"]
    assert m.cells[("numerics op=softmax", "fp16")] == "fail"
    assert m.cells[("numerics op=matmul", "tf32")] == "skip"
    assert ("numerics op=softmax", "tf32") not in m.cells
    table = matrix_table(check_results(_checks()))
    assert table is not None
    assert table.rows[0] == ("numerics op=softmax", "pass", "", "FAIL", "")
    assert table.styles[0] == "bad"


def test_the_checks_table_gives_error_tolerance_margin_and_reason_failing_first():
    table = checks_table(check_results(_checks()))
    assert table is not None
    first = table.rows[0]
    assert first == ("numerics op=softmax", "fp16", "FAIL", "0.003", "0.001", "-200.0%",
                     "ACCEL_NUMERICS: wrong result: softmax in fp16: 12 of 262144 elements "
                     "of output outside the tolerance")
    assert table.rows[1][:6] == ("numerics op=matmul", "fp32", "pass", "1e-05", "0.0002", "95.0%")
    determinism = next(r for r in table.rows if r[0] == "determinism op=matmul")
    assert determinism[3:7] == ("0", "0", "-", "")  # exact, and the host's load says nothing
    assert table.notes == ["6 checks: 3 passed, 1 failed, 2 skipped."]
    assert [r[2] for r in table.rows] == ["FAIL", "pass", "pass", "pass", "skip", "skip"]


def test_a_check_in_a_results_table_reads_as_its_verdict():
    checks = _checks()
    assert result_text(checks[0]) == "pass, margin 95.0%"
    assert result_text(checks[1]) == "skip"
    failed = row(checks[3])
    assert (failed.result, failed.status, failed.ok) == ("FAIL, margin -200.0%", "failed", False)
    assert failed.note.startswith("wrong result: softmax in fp16")
    assert result_text(checks[5]) == "pass, error 0"


def test_the_html_report_has_a_validation_section_and_no_results_of_checks():
    page = html_report([_run(_checks())])
    assert "<h3 id=\"run-1-validation\">Validation</h3>" in page
    assert "<caption>Validation: verdict per check and precision</caption>" in page
    assert "<caption>Validation checks</caption>" in page
    assert '<h3 id="run-1-results">Results</h3>' not in page
    matrix_rows = re.findall(r"<tr class=\"(bad|good)\"><td>(numerics op=\w+)</td>", page)
    assert matrix_rows[0] == ("bad", "numerics op=softmax")
    assert "<script" not in page and "torchvision is not installed &lt;script&gt;" in page


def test_a_run_of_checks_and_measurements_shows_both():
    gemm = stored_measurement(Case.make("gemm", "g1", "micro", {"shape": "512"}, "cpu"),
                              samples=(0.01, 0.011, 0.0105), figures=(
                                  Figure("throughput", 2.6e10, "FLOP/s"),))
    page = html_report([_run([gemm, *_checks()], suite="quick")])
    assert '<h3 id="run-1-results">Results</h3>' in page and "Validation</h3>" in page
    results = page.split('<h3 id="run-1-results">Results</h3>', 1)[1]
    assert "<caption>validation</caption>" not in results


def test_the_markdown_report_has_the_validation_tables():
    text = run_report(_run(_checks()).record, {}, _checks())
    assert "## Validation" in text and "### Validation checks" in text
    assert "### Validation: verdict per check and precision" in text
    assert "## Results" not in text
    assert "| numerics op=softmax | fp16 | FAIL | 0.003 | 0.001 | -200.0% |" in text
