"""`accelbench export --format openmetrics` (and `prometheus`): each node's newest figures
and verdicts, read back with prometheus-client's own parsers, so the output is valid."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import (
    text_string_to_metric_families as prometheus_text_to_metric_families,
)

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.errors import EXIT_NODES, EXIT_USAGE
from accelbench.report.openmetrics import metric_unit
from accelbench.store import Store
from fakes import stored_measurement

SAMPLES = (1.0, 1.01, 0.99, 1.004, 0.996, 1.002, 0.998, 1.006)


def _gemm(rate: float, node_device: str = "cuda:0", **params: Any) -> Measurement:
    case = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16", **params},
                     node_device)
    return stored_measurement(case, samples=tuple(1e-3 * s for s in SAMPLES), number=10,
                              figures=(Figure("throughput", rate, "FLOP/s", True, 2 * rate),
                                       Figure("time", 1e-3, "s", False)))


COPY = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 256}, "cuda:0")


def _check(name: str, status: str, reason: str | None = None) -> Measurement:
    case = Case.make(name, "v1", "validation", {"op": "matmul", "dtype": "fp32"}, "cuda:0")
    figures = (Figure("error", 1e-6, "", False), Figure("tolerance", 1e-5, "", False),
               Figure("margin", 90.0, "%")) if status != "skipped" else ()
    return stored_measurement(case, status, reason=reason, figures=figures)


def _add(store: Store, host: str, started_at: float, ms: Sequence[Measurement],
         suite: str = "quick", status: str = "complete") -> str:
    fingerprint = {"format_version": 1, "platform": "rocm",
                   "device": {"name": "AMD Instinct MI300X", "type": "cuda"},
                   "runtime": {"name": "ROCm", "version": "6.3.1"},
                   "driver": {"driver_version": "6.8.5"}, "torch": {"version": "2.9.1"}}
    run_id = store.begin_run(fingerprint=fingerprint, fingerprint_id=f"fp-{host}",
                             generation_key="MI300X | ROCm 6.3 | PyTorch 2.9.1",
                             device="cuda:0", suite=suite, argv=["run"], host=host,
                             accelbench_version="0.1.0", started_at=started_at)
    for m in ms:
        store.add_measurement(run_id, m)
    if status != "running":
        store.finish_run(run_id, status, finished_at=started_at + 60)
    return run_id


@pytest.fixture
def fleet(store_path: Path) -> dict[str, str]:
    """Two nodes: gpu-a with two quick runs and a validate run; gpu-b with one quick run,
    and an older one stored after it."""
    with Store.open(store_path) as store:
        ids = {
            "a1": _add(store, "gpu-a", 1000.0, [
                _gemm(100e12), stored_measurement(COPY, figures=(Figure("bandwidth", 5e12,
                                                                        "B/s"),))]),
            "a2": _add(store, "gpu-a", 2000.0, [_gemm(110e12)]),
            "a3": _add(store, "gpu-a", 3000.0, [
                _check("numerics", "ok"), _check("amp", "failed", "error 2e-3 > 1e-3"),
                _check("torchvision", "skipped", "pip install torchvision")],
                suite="validate", status="failed"),
            "b2": _add(store, "gpu-b", 2500.0, [
                _gemm(90e12), stored_measurement(COPY, "failed", reason="out of memory")]),
            "b1": _add(store, "gpu-b", 500.0, [_gemm(50e12)]),
        }
    return ids


def _export(capsys: pytest.CaptureFixture[str], *argv: str, rc: int = 0) -> str:
    capsys.readouterr()
    assert main(["export", *argv]) == rc
    return capsys.readouterr().out


def _samples(text: str) -> list[Any]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _value(samples: list[Any], name: str, **labels: str) -> float:
    found = [s.value for s in samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return float(found[0])


def _has(samples: list[Any], name: str, **labels: str) -> bool:
    return any(s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
               for s in samples)


GEMM_LABEL = "gemm dtype=bf16 shape=4096"


def test_each_node_and_case_shows_its_newest_measurement(fleet, capsys) -> None:
    out = _export(capsys, "--format", "openmetrics")
    assert out.endswith("\n# EOF\n") and out.count("# EOF") == 1
    samples = _samples(out)
    flops = "accelbench_figure_flop_per_second"
    gemm_a = {"node": "gpu-a", "device": "cuda:0", "case": GEMM_LABEL, "figure": "throughput"}
    assert _value(samples, flops, **gemm_a) == 110e12  # a2, not a1
    assert _value(samples, flops, node="gpu-b", figure="throughput") == 90e12  # not b1
    assert _value(samples, "accelbench_figure_peak_ratio", **gemm_a) == 0.5
    assert _value(samples, "accelbench_figure_seconds", node="gpu-a", figure="time") == 1e-3
    # The copy of gpu-a comes from its first run: the later runs did not measure it.
    assert _value(samples, "accelbench_figure_bytes_per_second", node="gpu-a",
                  benchmark="memory", figure="bandwidth") == 5e12
    run_of = {(s.labels["node"], s.labels["case"]): s.labels["run_id"] for s in samples
              if s.name == "accelbench_case_run_info"}
    assert run_of[("gpu-a", GEMM_LABEL)] == fleet["a2"]
    assert run_of[("gpu-a", "memory op=copy size_mib=256")] == fleet["a1"]
    assert run_of[("gpu-b", GEMM_LABEL)] == fleet["b2"]
    assert run_of[("gpu-a", "numerics dtype=fp32 op=matmul")] == fleet["a3"]
    assert _value(samples, "accelbench_case_timestamp_seconds", node="gpu-b",
                  case=GEMM_LABEL) == 2500.0
    # The failed copy of gpu-b is its newest: a status, and no figure from anywhere.
    assert _value(samples, "accelbench_case_status", node="gpu-b", benchmark="memory",
                  accelbench_case_status="failed") == 1
    assert not _has(samples, "accelbench_figure_bytes_per_second", node="gpu-b")
    halfwidth = _value(samples, "accelbench_case_interval_halfwidth_ratio", node="gpu-a",
                       case=GEMM_LABEL)
    assert 0 < halfwidth < 0.02


def test_each_node_shows_its_newest_run(fleet, capsys) -> None:
    samples = _samples(_export(capsys, "--format", "openmetrics"))
    info = {s.labels["node"]: s.labels for s in samples if s.name == "accelbench_run_info"}
    assert info["gpu-a"]["run_id"] == fleet["a3"] and info["gpu-a"]["suite"] == "validate"
    assert info["gpu-b"]["run_id"] == fleet["b2"]
    assert {k: info["gpu-a"][k] for k in ("device_name", "runtime", "runtime_version",
                                          "driver_version", "torch_version",
                                          "accelbench_version", "fingerprint_id")} == {
        "device_name": "AMD Instinct MI300X", "runtime": "ROCm", "runtime_version": "6.3.1",
        "driver_version": "6.8.5", "torch_version": "2.9.1", "accelbench_version": "0.1.0",
        "fingerprint_id": "fp-gpu-a"}
    a = {"node": "gpu-a", "device": "cuda:0"}
    assert _value(samples, "accelbench_run_started_timestamp_seconds", **a) == 3000.0
    assert _value(samples, "accelbench_run_finished_timestamp_seconds", **a) == 3060.0
    assert _value(samples, "accelbench_run_status", accelbench_run_status="failed", **a) == 1
    assert _value(samples, "accelbench_run_status", accelbench_run_status="complete", **a) == 0
    assert [_value(samples, "accelbench_run_cases", status=s, **a)
            for s in ("ok", "failed", "skipped")] == [1, 1, 1]


def test_validation_verdicts(fleet, capsys) -> None:
    samples = _samples(_export(capsys, "--format", "openmetrics"))
    passed, skipped = "accelbench_validation_check_passed", "accelbench_validation_check_skipped"
    assert _value(samples, passed, node="gpu-a", check="numerics") == 1
    assert _value(samples, passed, node="gpu-a", check="amp") == 0
    assert not _has(samples, passed, check="torchvision")
    assert [_value(samples, skipped, check=c) for c in ("numerics", "amp", "torchvision")] == [
        0, 0, 1]
    assert _value(samples, "accelbench_case_status", benchmark="torchvision",
                  accelbench_case_status="skipped") == 1
    # Benchmarks are no checks; a check's figures are exported like any other.
    assert not _has(samples, passed, check="gemm")
    assert _value(samples, "accelbench_figure_ratio", benchmark="numerics",
                  figure="margin") == pytest.approx(0.9)
    assert _value(samples, "accelbench_figure", benchmark="numerics", figure="error",
                  unit="") == 1e-6


def test_a_failed_check_carries_its_reason_code_and_a_pass_none(fleet, capsys) -> None:
    samples = _samples(_export(capsys, "--format", "openmetrics"))
    reason = "accelbench_check_reason"
    assert _value(samples, reason, node="gpu-a", check="amp", code="ACCEL_AMP") == 1
    assert [s.labels["code"] for s in samples if s.name == reason] == ["ACCEL_AMP"]
    assert not _has(samples, reason, check="numerics")
    assert not _has(samples, reason, check="torchvision")


def test_units_are_base_units_in_the_metric_name() -> None:
    assert metric_unit("FLOP/s") == ("flop_per_second", 1.0)
    assert metric_unit("OP/s") == ("ops_per_second", 1.0)
    assert metric_unit("B/s") == ("bytes_per_second", 1.0)
    assert metric_unit("sample/s") == ("samples_per_second", 1.0)
    assert metric_unit("token/J") == ("tokens_per_joule", 1.0)
    assert metric_unit("s") == ("seconds", 1.0)
    assert metric_unit("B") == ("bytes", 1.0)
    assert metric_unit("W") == ("watts", 1.0)
    assert metric_unit("%") == ("ratio", 0.01)
    for unknown in ("", "furlong", "B/fortnight", "s/", "_total", "%/s"):
        assert metric_unit(unknown) is None


HOSTILE = ('node "1"\\ \n}{x="y"} # EOF\r\t', "日本\u202e\u2028\x1b[2J", "a" * 500)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_stored_text_round_trips(store_path, capsys, hostile) -> None:
    case = Case.make("gemm", "g1", "micro", {"shape": hostile, "dtype": "bf16"}, hostile)
    m = stored_measurement(case, figures=(Figure(hostile, 1.0, f"B/{hostile}"),
                                          Figure("throughput", 2.0, "FLOP/s")))
    with Store.open(store_path) as store:
        _add(store, hostile, 1000.0, [m], suite=hostile)
    for fmt, parse in (("openmetrics", text_string_to_metric_families),
                       ("prometheus", prometheus_text_to_metric_families)):
        samples = [s for f in parse(_export(capsys, "--format", fmt)) for s in f.samples]
        expected = {"node": hostile, "device": hostile, "benchmark": "gemm",
                    "case": f"gemm dtype=bf16 shape={hostile}"}
        assert _value(samples, "accelbench_figure", figure=hostile, unit=f"B/{hostile}",
                      **expected) == 1.0
        assert _value(samples, "accelbench_figure_flop_per_second", **expected) == 2.0
        assert _value(samples, "accelbench_run_info", node=hostile, suite=hostile) == 1


def test_a_lone_surrogate_is_written_escaped(store_path, capsys, monkeypatch) -> None:
    from accelbench.analysis.latest import latest
    from accelbench.report.openmetrics import render

    with Store.open(store_path) as store:
        _add(store, "node", 1000.0, [_gemm(1e12)])
        run = store.load_run("latest")
    record = run.record.__class__(**{**run.record.__dict__, "host": "bad\ud800"})
    out = render(latest([run.__class__(record, run.fingerprint, run.measurements)]),
                 "openmetrics")
    assert _has(_samples(out), "accelbench_run_info", node="bad\\ud800")


def test_a_repeated_figure_name_gives_one_series(store_path, capsys) -> None:
    case = Case.make("gemm", "g1", "micro", {"shape": "1"}, "cpu")
    m = stored_measurement(case, figures=(Figure("throughput", 1.0, "FLOP/s"),
                                          Figure("throughput", 2.0, "FLOP/s")))
    with Store.open(store_path) as store:
        _add(store, "n", 1000.0, [m])
    out = _export(capsys, "--format", "openmetrics")
    # Read the text itself: prometheus-client's parser keeps the first of two equal series.
    lines = [line for line in out.splitlines()
             if line.startswith("accelbench_figure_flop_per_second{")]
    assert len(lines) == 1 and lines[0].endswith(" 1.0")


def test_prometheus_text_is_what_node_exporter_reads(fleet, capsys, tmp_path) -> None:
    target = tmp_path / "accelbench.prom"
    assert _export(capsys, "--format", "prometheus", "-o", str(target)) == ""
    text = target.read_text(encoding="utf-8")
    # No OpenMetrics-only lines or types, and no client-side timestamps.
    assert "# EOF" not in text and "# UNIT" not in text
    types = {line.split()[3] for line in text.splitlines() if line.startswith("# TYPE")}
    assert types == {"gauge"}
    for line in text.splitlines():
        if not line.startswith("#"):
            assert len(line.rsplit("} ", 1)[1].split()) == 1, line
    samples = [s for f in prometheus_text_to_metric_families(text) for s in f.samples]
    assert _value(samples, "accelbench_figure_flop_per_second", node="gpu-a",
                  figure="throughput") == 110e12
    assert _value(samples, "accelbench_run_info", node="gpu-b") == 1


def test_no_sample_carries_a_timestamp(fleet, capsys) -> None:
    assert all(s.timestamp is None
               for s in _samples(_export(capsys, "--format", "openmetrics")))


def test_the_node_filter(fleet, capsys) -> None:
    samples = _samples(_export(capsys, "--format", "openmetrics", "--node", "gpu-b"))
    assert {s.labels.get("node") for s in samples} == {"gpu-b"}
    both = _samples(_export(capsys, "--format", "openmetrics", "--node", "gpu-b",
                            "--node", "gpu-a"))
    assert {s.labels.get("node") for s in both} == {"gpu-a", "gpu-b"}
    # Runs named and a node: the node's newest among those runs.
    older = _samples(_export(capsys, "--format", "openmetrics", fleet["a1"], fleet["b2"],
                             "--node", "gpu-a"))
    assert _value(older, "accelbench_figure_flop_per_second", node="gpu-a",
                  figure="throughput") == 100e12
    # The other formats take the filter too.
    csv_out = _export(capsys, "--format", "csv", "--node", "gpu-b")
    assert fleet["b1"] in csv_out and fleet["b2"] in csv_out and fleet["a1"] not in csv_out


@pytest.mark.parametrize("argv", [["--node", "gpu-c"], ["--node", "gpu-a", "--node", "gpu-c"],
                                  ["REF-B2", "--node", "gpu-a"]])
def test_a_node_with_no_run_is_refused(fleet, capsys, tmp_path, argv) -> None:
    argv = [fleet["b2"] if a == "REF-B2" else a for a in argv]
    target = tmp_path / "out.om"
    capsys.readouterr()
    assert main(["export", "--format", "openmetrics", "-o", str(target), *argv]) == EXIT_NODES
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("accelbench: error: no run of node")
    assert not target.exists()


def test_an_empty_node_name_is_refused(fleet, capsys) -> None:
    assert main(["export", "--format", "openmetrics", "--node", " "]) == EXIT_USAGE
    assert "--node: expected a name" in capsys.readouterr().err


def test_a_store_without_runs(store_path, capsys) -> None:
    Store.open(store_path).close()
    assert _export(capsys, "--format", "openmetrics") == "# EOF\n"
    assert _export(capsys, "--format", "prometheus") == ""


def test_a_running_run_has_no_finish(store_path, capsys) -> None:
    with Store.open(store_path) as store:
        _add(store, "n", 1000.0, [_gemm(1e12)], status="running")
    samples = _samples(_export(capsys, "--format", "openmetrics"))
    assert _value(samples, "accelbench_run_status", accelbench_run_status="running") == 1
    assert not _has(samples, "accelbench_run_finished_timestamp_seconds")
    assert _value(samples, "accelbench_figure_flop_per_second", figure="throughput") == 1e12


def test_nan_figures_stay_nan(store_path, capsys) -> None:
    case = Case.make("gemm", "g1", "micro", {"shape": "1"}, "cpu")
    with Store.open(store_path) as store:
        _add(store, "n", 1000.0, [stored_measurement(
            case, figures=(Figure("throughput", math.nan, "FLOP/s"),))])
    samples = _samples(_export(capsys, "--format", "openmetrics"))
    assert math.isnan(_value(samples, "accelbench_figure_flop_per_second"))


def test_without_prometheus_client(fleet, capsys, monkeypatch, tmp_path) -> None:
    for name in [n for n in sys.modules if n.startswith("prometheus_client")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import raises ImportError
    target = tmp_path / "out.om"
    capsys.readouterr()
    assert main(["export", "--format", "openmetrics", "-o", str(target)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == ("accelbench: error: --format openmetrics needs prometheus-client: "
                   "pip install 'accelbench[metrics]'\n")
    assert not target.exists()
    assert main(["export", "--format", "json", "-o", str(target)]) == 0  # needs none of it


@pytest.mark.slow
def test_the_cli_imports_neither_torch_nor_prometheus_client(fleet) -> None:
    code = (
        "import sys\n"
        "from accelbench.cli.main import main\n"
        "assert main(['export', '--format', 'csv']) == 0\n"
        "assert main(['runs']) == 0\n"
        "assert 'prometheus_client' not in sys.modules, 'prometheus_client was imported'\n"
        "assert main(['export', '--format', 'openmetrics']) == 0\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_cli_names_the_formats_the_renderer_writes() -> None:
    from accelbench.cli.export_cmd import METRIC_FORMATS
    from accelbench.report.openmetrics import FORMATS

    assert METRIC_FORMATS == FORMATS


def test_a_store_of_an_older_accelbench(tmp_path, capsys) -> None:
    import shutil

    path = tmp_path / "results.sqlite"
    shutil.copyfile(Path(__file__).parents[1] / "fixtures" / "store" / "results-schema1.db",
                    path)
    samples = _samples(_export(capsys, "--format", "openmetrics", "--store", str(path)))
    info = {s.labels["node"]: s.labels for s in samples if s.name == "accelbench_run_info"}
    assert {k: info["gpu-node-07"][k] for k in ("torch_version", "driver_version",
                                                "platform", "device_name")} == {
        "torch_version": "2.4.1+cu124", "driver_version": "550.90.07", "platform": "cuda",
        "device_name": "NVIDIA H100 80GB HBM3"}
    assert _value(samples, "accelbench_case_status", node="gpu-node-07",
                  case="gemm dtype=fp8 shape=4096", accelbench_case_status="failed") == 1
