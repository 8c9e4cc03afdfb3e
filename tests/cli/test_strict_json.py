"""What `--json` and `export` print is JSON that any parser reads, even from a damaged
store (samples that are NaN or infinite, or zero and negative times whose figures are
NaN): such a number is null, noted beside; and the export of such a store merges back."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement, Rate
from accelbench.core.strict_json import dumps, finite
from accelbench.core.timing import Timing
from accelbench.store import Store

# numpy warns of the damaged samples as it summarizes them (inf - inf); the summary is
# still made, and what matters here is what is printed.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _measurement(size: int, samples: list[float]) -> Measurement:
    case = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": size}, "cpu")
    timings = tuple(Timing(tuple(samples), 10, 0, "converged", 0.95) for _ in range(3))
    return Measurement(case, "ok", timings=timings, rates=(Rate("bandwidth", 1e9, "B/s"),),
                       details={"processes": 3})


def _damaged_store(path: Path) -> str:
    good = [1e-3, 1.1e-3, 0.9e-3, 1e-3]
    with Store.open(path) as store:
        run_id = store.begin_run(
            fingerprint={"format_version": 1, "platform": "cpu", "host": {"hostname": "n1"}},
            fingerprint_id="fp", generation_key="CPU", device="cpu", suite="quick",
            argv=["run"], host="n1", accelbench_version="0")
        store.add_measurement(run_id, _measurement(1, [math.nan, math.inf, *good]))
        store.add_measurement(run_id, _measurement(2, [0.0] * 4))
        store.add_measurement(run_id, _measurement(3, [-s for s in good]))
        store.add_measurement(run_id, _measurement(4, good))
        store.finish_run(run_id, "complete")
    return run_id


def test_numbers_that_are_not_finite_are_null_and_noted() -> None:
    data = {"samples": [math.nan, 1.0, -math.inf], "value": math.inf, "n": 3,
            "nested": [{"low": math.nan}]}
    assert finite(data) == {
        "samples": [None, 1.0, None], "value": None, "n": 3, "nested": [
            {"low": None, "not_finite": {"low": "NaN"}}],
        "not_finite": {"samples[0]": "NaN", "samples[2]": "-Infinity", "value": "Infinity"}}
    assert _strict(dumps([math.nan, {"a": (1.0, math.inf)}])) == [
        None, {"a": [1.0, None], "not_finite": {"a[1]": "Infinity"}}]


@pytest.mark.parametrize("command", [["show", "--json"], ["export"], ["runs", "--json"],
                                     ["history", "memory", "--json"]])
def test_a_damaged_store_prints_json(command: list[str], tmp_path: Path, capsys) -> None:
    path = tmp_path / "damaged.sqlite"
    _damaged_store(path)
    assert main([*command, "--store", str(path)]) == 0
    _strict(capsys.readouterr().out)


def test_the_export_of_a_damaged_store_merges_back(tmp_path: Path, capsys) -> None:
    path = tmp_path / "damaged.sqlite"
    run_id = _damaged_store(path)
    exported = tmp_path / "export.json"
    assert main(["export", "--store", str(path), "-o", str(exported)]) == 0
    data = _strict(exported.read_text(encoding="utf-8"))
    first = data["runs"][0]["measurements"][0]["timings"][0]
    assert first["samples"][:2] == [None, None]
    assert first["not_finite"] == {"samples[0]": "NaN", "samples[1]": "Infinity"}

    merged = tmp_path / "merged.sqlite"
    assert main(["merge", str(exported), "--into", str(merged)]) == 0, capsys.readouterr().err
    with Store.open(merged, create=False) as store:
        back = store.load_run(run_id)
    with Store.open(path, create=False) as store:
        before = store.load_run(run_id)
    assert [m.case.key for m in back.measurements] == [m.case.key for m in before.measurements]
    damaged = back.measurements[0]
    assert all(len(t.samples) == 4 for t in damaged.timings)  # the finite ones, kept
    assert any("6 sample(s) were not finite" in w and "NaN, Infinity" in w
               for w in damaged.warnings)
    # Nothing else changed: the other measurements are as they were.
    assert back.measurements[1:] == before.measurements[1:]
    capsys.readouterr()
    assert main(["export", "--store", str(merged)]) == 0
    _strict(capsys.readouterr().out)
