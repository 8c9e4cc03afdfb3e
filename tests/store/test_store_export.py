"""JSON and CSV export, the versioned JSON loader, and the committed corpus of old results."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from accelbench.errors import StoreError
from accelbench.report.csv_table import CSV_COLUMNS, write_csv
from accelbench.store import Store, export_json, load_json

CORPUS = Path(__file__).parent.parent / "fixtures" / "store"


@pytest.fixture
def old_runs():
    return load_json(json.loads((CORPUS / "results-v1.json").read_text()))


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    # A copy: opening a store may write next to it (WAL) and must never touch the corpus.
    path = tmp_path / "results.sqlite"
    shutil.copyfile(CORPUS / "results-schema1.db", path)
    return path


def test_old_json_export_loads(old_runs) -> None:
    gpu, cpu = old_runs
    assert gpu.record.status == "complete" and cpu.record.status == "interrupted"
    assert (gpu.record.n_ok, gpu.record.n_failed, gpu.record.n_skipped) == (2, 1, 1)
    assert gpu.record.argv == ("run", "--suite", "quick")
    assert gpu.fingerprint["device"]["arch"] == "sm_90"
    gemm, copy, fp8, conv = gpu.measurements
    assert gemm.samples[0] == 1.9871e-4 and gemm.number == 50
    assert gemm.figure("throughput").pct_of_peak == pytest.approx(69.9, abs=0.1)
    assert copy.noisy
    assert fp8.status == "failed" and fp8.samples == () and "fp8" in fp8.reason
    assert conv.status == "skipped" and conv.figures == ()
    assert cpu.measurements[0].case.device == "cpu"


def test_old_sqlite_store_loads_and_matches_the_export(old_store: Path, old_runs) -> None:
    with Store.open(old_store, create=False) as store:
        stored = [store.load_run(r.id) for r in reversed(store.list_runs())]
    assert stored == old_runs


def test_old_sqlite_store_accepts_new_runs(old_store: Path, old_runs) -> None:
    with Store.open(old_store) as store:
        run_id = store.begin_run(
            fingerprint={}, fingerprint_id="fp-new", generation_key="cpu", device="cpu",
            suite=None, argv=[], host="h", accelbench_version="0.2.0",
        )
        store.add_measurement(run_id, old_runs[1].measurements[0])
        assert store.list_runs()[0].id == run_id
        assert len(store.list_runs()) == 3


def test_json_round_trip(old_runs) -> None:
    data = export_json(old_runs)
    assert data["format"] == "accelbench-results" and data["format_version"] == 4
    assert load_json(json.loads(json.dumps(data))) == old_runs


def test_json_round_trip_from_a_store(old_store: Path) -> None:
    with Store.open(old_store) as store:
        runs = [store.load_run(r.id) for r in store.list_runs()]
    assert load_json(json.loads(json.dumps(export_json(runs)))) == runs


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "not an accelbench results export"),
        ({"format": "pytest-benchmark", "format_version": 1}, "not an accelbench results export"),
        ({"format": "accelbench-results", "format_version": 5, "runs": []},
         "format version 5, newer than this accelbench reads"),
        ({"format": "accelbench-results", "format_version": "1", "runs": []},
         "invalid format_version"),
        ({"format": "accelbench-results", "format_version": 1, "runs": [{"run": {}}]},
         "missing field"),
    ],
)
def test_load_json_refuses(data, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        load_json(data)


def test_load_json_refuses_a_newer_measurement_format(old_runs) -> None:
    data = export_json(old_runs)
    data["runs"][0]["measurements"][0]["format_version"] = 99
    with pytest.raises(StoreError, match="measurement record is format version 99, newer"):
        load_json(data)


def test_csv(old_runs) -> None:
    out = io.StringIO()
    write_csv(old_runs, out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert tuple(rows[0]) == CSV_COLUMNS
    # gemm and memcpy have two figures each, fp8 and conv one row each, the CPU run two.
    assert len(rows) == 2 + 2 + 1 + 1 + 2
    gemm = rows[0]
    assert gemm["case"] == "gemm dtype=bf16 shape=4096"
    assert json.loads(gemm["params"]) == {"dtype": "bf16", "shape": 4096}
    assert (gemm["figure"], gemm["unit"], float(gemm["value"])) == ("throughput", "FLOP/s",
                                                                    6.9138e14)
    assert float(gemm["median_s"]) == pytest.approx(1.9884e-4)
    assert float(gemm["ci_low_s"]) <= float(gemm["median_s"]) <= float(gemm["ci_high_s"])
    assert gemm["samples"] == "7" and gemm["run_id"] == old_runs[0].record.id
    assert rows[2]["warnings"] == "noisy: IQR is 9.8% of the median"
    failed = rows[4]
    assert failed["status"] == "failed" and failed["reason"].startswith("RuntimeError")
    assert failed["figure"] == failed["value"] == failed["median_s"] == ""
    assert failed["samples"] == "0"
