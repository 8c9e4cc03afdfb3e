"""Records of format 1 (derived figures stored) upgrade to format 2 (raw first) when read,
and every figure derived from the upgraded record is the one format 1 stored."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import FORMAT_VERSION, Figure, Measurement, Rate, from_result
from accelbench.core.timing import Timing
from accelbench.errors import StoreError
from accelbench.store import Store

FIXTURES = Path(__file__).parent.parent / "fixtures"
CORPORA = [FIXTURES / "store" / "results-v1.json", FIXTURES / "analysis" / "generations-v1.json"]


def v1_records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in CORPORA:
        for run in json.loads(path.read_text())["runs"]:
            out.extend(run["measurements"])
    return out


def old_value_samples(record: dict[str, Any]) -> list[float]:
    """What format 1 readers took as the headline figure of each sample."""
    figure = record["figures"][0]
    t = [s for s in record["samples"] if s > 0]
    median = sorted(t)[len(t) // 2] if len(t) % 2 else sum(sorted(t)[len(t) // 2 - 1:][:2]) / 2
    if figure["higher_is_better"]:
        return [figure["value"] * median / s for s in t]
    return [figure["value"] * s / median for s in t]


@pytest.mark.parametrize("record", v1_records(), ids=lambda r: r["case"]["benchmark"])
def test_every_corpus_record_derives_the_figures_format_1_stored(
        record: dict[str, Any]) -> None:
    assert record["format_version"] == 1
    m = Measurement.from_dict(record)
    assert [f.name for f in m.figures] == [f["name"] for f in record["figures"]]
    for derived, stored in zip(m.figures, record["figures"], strict=True):
        assert derived.unit == stored["unit"]
        assert derived.higher_is_better == stored["higher_is_better"]
        assert derived.peak == stored["peak"]
        assert derived.value == pytest.approx(stored["value"], rel=1e-12, nan_ok=True)
    assert m.samples == tuple(record["samples"])
    assert m.number == (record["number"] if record["samples"] else 0)
    if record["samples"] and record["figures"]:
        assert m.value_samples() == pytest.approx(old_value_samples(record), rel=1e-12)


def test_format_1_rates_become_work_per_call() -> None:
    by_bench: dict[str, Measurement] = {}
    for record in v1_records():
        by_bench.setdefault(record["case"]["benchmark"], Measurement.from_dict(record))
    gemm, train = by_bench["gemm"], by_bench["train"]
    (rate,) = gemm.rates
    assert rate.over == "median" and rate.unit == "FLOP/s"
    assert gemm.stats is not None
    assert rate.amount == pytest.approx(gemm.figures[0].value * gemm.stats.median)
    assert {r.name for r in train.rates} >= {"throughput", "model_flops"}
    assert all(r.over == "mean" for r in train.rates)  # total work over total time
    assert [f.name for f in train.measured][:2] == ["mfu", "peak_memory"]
    assert train.time_name == "window_time"
    # The timing's own facts move out of the free-form details.
    assert "stop_reason" not in gemm.details and gemm.timings[0].stop_reason
    launch = by_bench["launch"]
    assert launch.rates == () and launch.time_name == "latency"


def test_format_1_tables_hid_switches_at_off_values() -> None:
    params = {"batch": 8, "cast": False, "warmup": 0, "config": "", "compile": True}
    record: dict[str, Any] = {"format_version": 1, "status": "skipped", "reason": "r",
              "case": Case.make("train", "v", "model", params, "cpu").to_dict()}
    del record["case"]["shown"]
    assert Measurement.from_dict(record).case.shown == ("batch", "compile")


def test_a_format_1_record_of_another_shape_keeps_its_figures_as_stored() -> None:
    record = {
        "format_version": 1,
        "case": Case.make("odd", "v", "micro", {"n": 1}, "cpu").to_dict(),
        "status": "ok", "samples": [1.0, 2.0, 3.0], "number": 1,
        "figures": [{"name": "score", "value": 7.0, "unit": "pt", "higher_is_better": True,
                     "peak": None}],
    }
    m = Measurement.from_dict(record)
    assert m.rates == () and [(f.name, f.value) for f in m.figures] == [("score", 7.0)]
    assert m.value_samples() == pytest.approx([14.0, 7.0, 14.0 / 3])


def test_a_record_round_trips_and_exports_intervals() -> None:
    case = Case.make("gemm", "v", "micro", {"shape": 64, "dtype": "fp32"}, "cpu")
    timing = Timing((1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 0.95e-3, 1.0e-3, 1.02e-3), 4, 3,
                    "converged")
    m = from_result(case, _result(timing), ("noisy: x",), 10.0, 2.0)
    record = m.to_dict()
    assert record["format_version"] == FORMAT_VERSION == 3
    assert "figures" not in record  # the store keeps what was measured, not what follows
    assert Measurement.from_dict(json.loads(json.dumps(record))) == m
    exported = m.export_dict()
    throughput = exported["figures"][0]
    assert throughput["name"] == "throughput"
    assert throughput["value"] == pytest.approx(2 * 64**3 / 1.0e-3)
    assert throughput["low"] < throughput["value"] < throughput["high"]
    time = exported["figures"][1]
    assert time["low"] <= time["value"] <= time["high"] and time["name"] == "time"
    assert Measurement.from_dict(exported) == m  # the derived part is not read back


def test_unknown_record_versions_are_refused() -> None:
    record = Measurement(Case.make("x", "v", "micro", {}, "cpu"), "ok").to_dict()
    record["format_version"] = 4
    with pytest.raises(StoreError, match="format version 4, newer"):
        Measurement.from_dict(record)
    record["format_version"] = "2"
    with pytest.raises(StoreError, match="invalid format_version"):
        Measurement.from_dict(record)


def test_the_migration_keeps_only_what_is_read(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copyfile(FIXTURES / "store" / "results-schema1.db", path)
    with Store.open(path) as store:
        runs = [store.load_run(r.id) for r in store.list_runs()]
    conn = sqlite3.connect(path)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(measurements)")]
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        versions = {row[0] for row in conn.execute(
            "SELECT format_version FROM measurement_cases")}
    finally:
        conn.close()
    assert columns == ["id", "run_id", "case_key", "status", "record"]
    assert "figures" not in names and "measurement_cases" in names
    assert versions == {1}  # records are upgraded when read, never rewritten
    assert sum(len(r.measurements) for r in runs) == 5
    gemm = next(m for r in runs for m in r.measurements
                if m.ok and m.case.benchmark == "gemm" and m.case.device == "cuda:0")
    assert math.isclose(gemm.figures[0].value, 6.9138e14, rel_tol=1e-12)


def _result(timing: Timing):
    from accelbench.core.measurement import CaseResult

    return CaseResult(timing, rates=(Rate("throughput", 2 * 64**3, "FLOP/s"),),
                      figures=(Figure("peak_memory", 1e6, "B", higher_is_better=False),))


def test_a_rate_over_the_mean_weighs_each_process_alike() -> None:
    case = Case.make("train", "v", "model", {"model": "m"}, "cpu")
    timings = (Timing((1.0,) * 5, 1, 0, "converged"), Timing((2.0,) * 50, 1, 0, "converged"),
               Timing((1.5,) * 5, 1, 0, "converged"))
    m = Measurement(case, "ok", timings=timings,
                    rates=(Rate("throughput", 10.0, "sample/s", over="mean"),))
    throughput, time_figure = m.figure("throughput"), m.figure("time")
    assert throughput is not None and time_figure is not None
    # The geometric mean of the processes' values, whatever the samples each took.
    center = (1.0 * 2.0 * 1.5) ** (1 / 3)
    assert throughput.value == pytest.approx(10.0 / center)
    assert time_figure.value == pytest.approx(center)
    assert float(np.median(m.value_samples())) == pytest.approx(10.0 / center)


def test_a_format_1_record_that_says_what_it_shows_keeps_it() -> None:
    case = Case.make("train", "v", "model", {"batch": 8, "cast": False}, "cpu",
                     shown=("batch", "cast")).to_dict()
    record = {"format_version": 1, "status": "skipped", "reason": "r", "case": case}
    assert Measurement.from_dict(record).case.shown == ("batch", "cast")


def test_a_format_1_figure_without_a_number_is_kept_as_stored() -> None:
    record = {
        "format_version": 1,
        "case": Case.make("odd", "v", "micro", {}, "cpu").to_dict(),
        "status": "ok", "samples": [1.0, 2.0], "number": 1,
        "figures": [{"name": "x", "value": None, "unit": "s", "higher_is_better": False}],
    }
    m = Measurement.from_dict(record)
    assert m.rates == () and m.measured[0].value is None


def test_a_format_2_record_reads_as_format_3_without_telemetry() -> None:
    case = Case.make("gemm", "v", "micro", {"shape": 64, "dtype": "fp32"}, "cpu")
    timing = Timing((1.0e-3, 1.1e-3, 0.9e-3), 4, 3, "converged")
    record = from_result(case, _result(timing), (), 10.0, 2.0).to_dict()
    record["format_version"] = 2
    del record["telemetry"]
    m = Measurement.from_dict(record)
    assert m.telemetry == () and m.energy is None and not m.throttled
    assert m.to_dict()["format_version"] == 3
    assert not {"power", "energy_per_call", "throughput_per_joule"} & {f.name for f in m.figures}
