"""The main job for real on this CPU: the quick suite, stored, reported, read back."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.core.request import RunRequest

pytestmark = pytest.mark.slow


def _accelbench(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One real run of every case of the quick suite, shared by the tests below: two
    processes a case (so that its interval is still taken between processes) and a fifth
    of the suite's sampling, for the run is about the cases, not their figures."""
    folder = tmp_path_factory.mktemp("quick")
    store = folder / "results.sqlite"
    request = folder / "request.json"
    request.write_text(RunRequest(suite="quick", device="cpu", timing={
        "processes": 2, "max_time": 0.2}).to_json(), encoding="utf-8")
    result = _accelbench("run", "--request", str(request), "--store", str(store))
    return store, result


def test_quick_suite_runs_every_case_and_stores_it(quick_run):
    store, result = quick_run
    assert result.returncode == 0, result.stderr
    assert "Report: " in result.stdout
    report = result.stdout.split("Report: ")[1].split()[0]
    text = Path(report).read_text(encoding="utf-8")
    assert "<td>gemm</td>" in text and "GFLOP/s" in text

    from accelbench.store import Store

    with Store.open(store, create=False) as opened:
        stored = opened.load_run("latest")
    statuses = {m.case.label: m.status for m in stored.measurements}
    assert "failed" not in statuses.values(), statuses
    # With one process, only what needs several ranks is left out, and it says why.
    skipped = [m for m in stored.measurements if m.status == "skipped"]
    assert all(m.case.family == "collective" and m.reason is not None
               and "--nproc-per-node" in m.reason for m in skipped)
    assert {"gemm", "memory", "launch", "conv", "attention"} <= {
        m.case.benchmark for m in stored.measurements}
    assert stored.record.status == "complete"
    assert stored.fingerprint["platform"] == "cpu"
    for m in stored.measurements:
        if m.status == "skipped":
            continue
        assert m.samples and all(s > 0 for s in m.samples)
        assert m.primary is not None and m.primary.value > 0
    # Progress went to stderr, one line per case.
    assert result.stderr.count("✓") == len(stored.measurements) - len(skipped)


def _table_rows(text, columns):
    """The body rows of the rich tables in `text` that have `columns` cells."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().split("│")]
        if line.startswith("│") and len(cells) == columns + 2:
            rows.append(tuple(cells[1:-1]))
    return rows


def _expected_row(m):
    """What `show` must print for a stored measurement, worked out without report/."""
    params = " ".join(f"{k}={'yes' if v is True else 'no' if v is False else v}"
                      for k, v in m.case.shown_params)
    if not m.ok:
        return m.case.benchmark, params, "-", "-", m.status
    unit = m.primary.unit
    prefixes = ("s", "ms", "µs", "ns") if unit == "s" else tuple(
        p + unit for p in ("", "k", "M", "G", "T", "P"))
    flags = [name for name, on in (("noisy", m.noisy), ("contended", m.contended)) if on]
    status = f"ok ({', '.join(flags)})" if flags else "ok"
    processes = len(m.timings)
    n = f"{len(m.samples)} in {processes}" if processes > 1 else str(len(m.samples))
    return m.case.benchmark, params, prefixes, n, status


def test_reading_commands_on_the_stored_run(quick_run, capsys, monkeypatch):
    store, _ = quick_run
    assert main(["runs", "--store", str(store), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 1 and runs[0]["status"] == "complete"

    from accelbench.store import Store

    with Store.open(store, create=False) as opened:
        stored = opened.load_run(runs[0]["id"])
    monkeypatch.setenv("COLUMNS", "400")  # one line per row
    assert main(["show", runs[0]["id"][:12], "--store", str(store)]) == 0
    shown = _table_rows(capsys.readouterr().out, columns=7)
    assert len(shown) == len(stored.measurements)
    for (bench, params, result, _, _, n, status), m in zip(
            shown, stored.measurements, strict=True):
        want_bench, want_params, units, want_n, want_status = _expected_row(m)
        assert (bench, params, n, status) == (want_bench, want_params, want_n, want_status)
        if units == "-":
            assert result == "-"
        else:
            number, _, unit = result.partition(" ")
            assert float(number) > 0 and unit in units, (result, m.case.label)
    monkeypatch.delenv("COLUMNS")

    assert main(["export", "--format", "csv", "--store", str(store)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {"gemm", "memory", "launch"} <= {r["benchmark"] for r in rows}

    assert main(["export", "--store", str(store)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["format_version"] == 4 and exported["runs"][0]["measurements"]

    assert main(["report", "-o", "-", "--store", str(store)]) == 0
    assert capsys.readouterr().out.startswith("# accelbench run ")


def test_run_json_and_a_failing_case_give_a_nonzero_exit(tmp_path):
    store = tmp_path / "r.sqlite"
    # int8 GEMM refuses m=16 (a failure); the CPU has no tf32 (a skip, as in validate).
    result = _accelbench("run", "--bench", "gemm", "--dtype", "fp32", "tf32", "int8",
                         "-p", "shape=16", "--max-time", "0.1", "--store", str(store),
                         "--json", "--no-report")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    status = {m["case"]["params"]["dtype"]: m["status"] for m in data["measurements"]}
    assert status == {"fp32": "ok", "tf32": "skipped", "int8": "failed"}
    assert data["report"] is None and data["status"] == "failed"


def test_list_shows_every_benchmark_with_parameters(capsys):
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = {b["name"] for b in data["benchmarks"]}
    assert {"gemm", "memory", "launch"} <= names
    gemm = next(b for b in data["benchmarks"] if b["name"] == "gemm")
    assert {p["name"] for p in gemm["params"]} == {"shape", "dtype", "batch", "fast_accum"}
    fast_accum = next(p for p in gemm["params"] if p["name"] == "fast_accum")
    assert fast_accum["only_when"] == {"dtype": ["fp8"]} and fast_accum["default"] is True
    assert "bf16" in gemm["dtypes"] and gemm["version"]
    assert [s["name"] for s in data["suites"]][:3] == ["quick", "standard", "full"]


def test_reading_commands_do_not_import_torch(quick_run):
    store, _ = quick_run
    code = (
        "import sys\n"
        "from accelbench.cli.main import main\n"
        f"for argv in (['runs'], ['show'], ['report', '-o', '-'], ['export'], ['list']):\n"
        f"    assert main(argv + (['--store', {str(store)!r}] if argv[0] != 'list' else [])) == 0\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
