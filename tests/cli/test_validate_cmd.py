"""`accelbench validate`: bad input is one line, the usage exit code and nothing stored; a
run on the CPU stores every check with its verdict; a failing check makes the exit code 1.
The checks run in spawned worker processes here, as they do for a user."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED, EXIT_OK, EXIT_USAGE
from accelbench.store import Store


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("accelbench: error: ") and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--check", "numerix"], "unknown check 'numerix' (did you mean numerics?); checks: "),
    (["--check", "amp,determinsm"], "unknown check 'determinsm' (did you mean determinism?)"),
    (["--check", "gemm"], "'gemm' is a benchmark, not a check: measure it with "
                          "`accelbench run --bench gemm`"),
    (["--check", ""], "--check: expected a name or comma-separated names"),
    (["--tolerance-scale", "0"], "--tolerance-scale: expected a positive number above 0, "
                                 "got '0'"),
    (["--tolerance-scale", "-2"], "--tolerance-scale: expected a positive number above 0"),
    (["--tolerance-scale", "nan"], "--tolerance-scale: expected a positive number above 0"),
    (["--tolerance-scale", "inf"], "--tolerance-scale: expected a positive number above 0"),
    (["--tolerance-scale", "loose"], "got 'loose'"),
    (["--burn", "0"], "--burn: expected a finite number of seconds above 0"),
    (["--burn", "-60"], "--burn: expected a finite number of seconds above 0"),
    (["--burn", "inf"], "--burn: expected a finite number of seconds above 0"),
    (["--burn", "1h"], "--burn: expected a finite number of seconds above 0 and at most "
                       "1e+07, got '1h'"),
    (["--memtest-fraction", "0"], "--memtest-fraction: expected a fraction above 0 and "
                                  "below 1, got '0'"),
    (["--memtest-fraction", "1"], "--memtest-fraction: expected a fraction above 0 and below 1"),
    (["--memtest-fraction", "1.5"], "--memtest-fraction: expected a fraction"),
    (["--memtest-fraction", "nan"], "--memtest-fraction: expected a fraction"),
    (["--check", "numerics", "--memtest-fraction", "0.5"],
     "--memtest-fraction applies to the memtest check, which is not selected"),
    (["--check", "memtest", "--tolerance-scale", "2"],
     "--tolerance-scale: none of the selected checks (memtest) has a tolerance"),
    (["--dtype", "fp128"], "unknown dtype 'fp128'"),
    (["--check", "torchvision", "--dtype", "bf16"],
     "dtype bf16 is not measured by the selected benchmarks (torchvision)"),
    (["--device", "tpu"], "unknown device 'tpu'"),
])
def test_bad_input_is_one_line_and_touches_no_store(argv, fragment, capsys, store_path):
    assert main(["validate", *argv]) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not store_path.exists()


def _accelbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_validate_on_the_cpu_stores_every_check_with_its_verdict(tmp_path):
    store = tmp_path / "results.sqlite"
    result = _accelbench("validate", "--device", "cpu", "--check", "numerics", "torchvision",
                         "--dtype", "fp32", "tf32", "--store", str(store), "--json",
                         "--no-telemetry")
    assert result.returncode == EXIT_OK, result.stderr
    data = json.loads(result.stdout)
    checks = data["checks"]
    assert data["summary"]["fail"] == 0 and data["summary"]["pass"] > 20
    assert {c["check"] for c in checks} == {"numerics", "torchvision"}
    skipped = [c for c in checks if c["verdict"] == "skip"]
    assert {c["precision"] for c in skipped if c["check"] == "numerics"} >= {"tf32"}
    passed = [c for c in checks if c["verdict"] == "pass" and c["check"] == "numerics"]
    assert all(c["error"] <= c["tolerance"] and 0 < c["margin_pct"] <= 100 for c in passed)
    with Store.open(store, create=False) as opened:
        run = opened.load_run(data["run_id"])
    assert run.record.suite == "validate" and run.record.status == "complete"
    assert {m.case.family for m in run.measurements} == {"validation"}
    assert len(run.measurements) == len(checks)

    shown = _accelbench("show", data["run_id"], "--store", str(store))
    assert shown.returncode == 0
    assert "Validation: verdict per check and precision" in shown.stdout
    assert "numerics op=matmul" in shown.stdout


@pytest.mark.slow
def test_a_failing_check_makes_the_exit_code_1_and_is_shown_first(tmp_path):
    store = tmp_path / "results.sqlite"
    report = tmp_path / "validation.html"
    # A tolerance a billion times tighter than torch.testing's: no arithmetic meets it.
    result = _accelbench("validate", "--device", "cpu", "--check", "numerics", "--dtype",
                         "fp16", "--tolerance-scale", "1e-9", "--store", str(store),
                         "--report", str(report), "--no-telemetry")
    assert result.returncode == EXIT_CASE_FAILED, result.stderr
    table = result.stdout.split("Validation checks", 1)[1]
    verdicts = [word for line in table.splitlines() for word in line.split("│")[3:4]
                if word.strip()]
    order = [v.strip() for v in verdicts]
    assert order[0] == "FAIL" and "skip" in order
    assert order == sorted(order, key=["FAIL", "pass", "skip"].index)
    assert "checks: 0 passed" in result.stdout
    assert "Validation" in report.read_text()


@pytest.mark.slow
def test_run_includes_the_validation_family(tmp_path):
    store = tmp_path / "results.sqlite"
    result = _accelbench("run", "--suite", "validate", "--bench", "numerics", "-p",
                         "op=softmax", "--dtype", "bf16", "--device", "cpu", "--store",
                         str(store), "--no-report", "--no-telemetry")
    assert result.returncode == EXIT_OK, result.stderr
    # The check is shown once, in the run's validation section, with its verdict.
    assert "Validation checks" in result.stdout
    assert re.search(r"numerics op=softmax\s.*\bpass\b", result.stdout)
