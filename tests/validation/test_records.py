"""A check's verdict is an ordinary measurement record (format 3): stored, read back,
exported and merged like any other, a failed one with the figures it found."""

from __future__ import annotations

import json

import torch
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import numerics
from accelbench.core.measurement import FORMAT_VERSION, Measurement
from accelbench.report.readable import check_readable
from accelbench.store import Store
from accelbench.store.export import export_json
from accelbench.store.record_schema import check_runs


def _failed_check(monkeypatch) -> Measurement:
    real = torch.softmax
    monkeypatch.setattr(torch, "softmax", lambda x, dim: real(x, dim) * (
        1.0 if x.dtype == torch.float64 else 1.5))
    return run_check(numerics.BENCHMARK, op="softmax", dtype="bf16")


def test_a_failed_check_keeps_its_figures_through_the_store_and_an_export(monkeypatch,
                                                                         tmp_path):
    passed = run_check(numerics.BENCHMARK, op="softmax", dtype="fp32")
    failed = _failed_check(monkeypatch)
    assert failed.status == "failed" and set(figures(failed)) == {"error", "tolerance", "margin"}
    record = failed.to_dict()
    assert record["format_version"] == FORMAT_VERSION == 3
    assert record["timings"] == [] and passed.to_dict()["time_name"] == ""
    assert Measurement.from_dict(json.loads(json.dumps(record))) == failed

    with Store.open(tmp_path / "results.sqlite") as store:
        run_id = store.begin_run(fingerprint={"format_version": 1}, fingerprint_id="fp",
                                 generation_key="cpu", device="cpu", suite="validate",
                                 argv=["validate"], host="h", accelbench_version="0.1.0")
        store.add_measurement(run_id, passed)
        store.add_measurement(run_id, failed)
        store.finish_run(run_id, "failed")
        stored = store.load_run(run_id)
    assert [m.status for m in stored.measurements] == ["ok", "failed"]
    assert figures(stored.measurements[1]) == figures(failed)
    assert stored.measurements[1].figures == failed.measured  # no time figure is derived
    check_runs([stored], "store")  # what merge asks of every run it copies
    check_readable(stored, "store")
    exported = export_json([stored])
    assert exported["runs"][0]["measurements"][1]["figures"][0]["name"] == "error"
