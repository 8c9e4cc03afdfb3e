"""Tuning differences (analysis.tuning) and the marks they give `compare`, `ab` and
`history`: a case whose sides ran under different GEMM/convolution tuning says so; equal
tuning, or records stored without it, say nothing."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest
from analysis_data import FLEET_STACK, add_run, gemm_case, in_processes

from accelbench.analysis.ab import AbResult, verdicts
from accelbench.analysis.compare import compare
from accelbench.analysis.history import REGRESSED, history
from accelbench.analysis.select import select_group
from accelbench.analysis.tuning import tuning_differences
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.request import AbRequest
from accelbench.core.sequential import PAIR_VALUES
from accelbench.report.ab_tables import ab_tables
from accelbench.report.analysis_tables import comparison_tables
from accelbench.store import Store, StoredRun
from accelbench.store.records import RunRecord
from fakes import stored_measurement

SHA_A = "a1b2c3" + "0" * 58
SHA_B = "d4e5f6" + "1" * 58


def rocm_tuning(*, enabled: bool = True, sha: str = SHA_A, match: bool = True,
                find_mode: str = "default", blas: str = "hipblaslt") -> dict[str, Any]:
    """details["tuning"] as the worker stores it on an MI300X."""
    return {
        "platform": "rocm", "blas": blas,
        "tunableop": {"applies": True, "enabled": enabled, "tuning": False,
                      "record_untuned": False, "file": "tunableop_results0.csv",
                      "file_existed": True, "sha256": sha, "entries": 6,
                      "validators": {"ROCM_VERSION": "6.2.41133-dd7f95766"},
                      "validators_match": match},
        "miopen": {"find_mode": find_mode, "user_db_path": "/home/u/.config/miopen",
                   "user_db_existed": True},
    }


def test_phrases_name_what_differs_a_to_b() -> None:
    base = rocm_tuning()
    assert tuning_differences(base, rocm_tuning()) == []
    assert tuning_differences(rocm_tuning(enabled=False), base) == ["TunableOp on in B only"]
    assert tuning_differences(base, rocm_tuning(sha=SHA_B)) == [
        "TunableOp table differs (a1b2c3… → d4e5f6…)"]
    assert tuning_differences(rocm_tuning(match=False), base) == [
        "validators do not match this stack in A"]
    assert tuning_differences(rocm_tuning(find_mode="NORMAL"), rocm_tuning(find_mode="FAST")) \
        == ["MIOpen find mode NORMAL → FAST"]
    cuda_a = {"platform": "cuda", "blas": "cublaslt", "tunableop": {"applies": True}}
    cuda_b = {"platform": "cuda", "blas": "cublas", "tunableop": {"applies": True}}
    assert tuning_differences(cuda_a, cuda_b) == ["BLAS cublaslt → cublas"]


def test_library_override_files_and_untuned_shapes() -> None:
    a, b = rocm_tuning(), rocm_tuning()
    b["hipblaslt"] = {"variables": {"HIPBLASLT_TUNING_OVERRIDE_FILE": "/t/o.txt"},
                      "files": {"HIPBLASLT_TUNING_OVERRIDE_FILE": {"sha256": SHA_B}}}
    a["tunableop"]["untuned"] = {"count": 0, "shapes": []}
    b["tunableop"]["untuned"] = {"count": 3, "shapes": []}
    assert tuning_differences(a, b) == ["GEMM shapes run untuned 0 → 3",
                                        "hipBLASLt HIPBLASLT_TUNING_OVERRIDE_FILE file in B only"]


def test_records_without_tuning_differ_from_nothing() -> None:
    assert tuning_differences(None, rocm_tuning()) == []
    assert tuning_differences(rocm_tuning(), None) == []
    assert tuning_differences(None, None) == []
    cpu = {"platform": "cpu", "blas": "mkl", "tunableop": {"applies": False, "reason": "x"}}
    assert tuning_differences(cpu, dict(cpu)) == []


# -- compare -------------------------------------------------------------------------------


def _tuned(m: Measurement, tuning: dict[str, Any] | None) -> Measurement:
    if tuning is None:
        return m
    return dataclasses.replace(m, details={**m.details, "tuning": tuning})


def _pair_store(path, tuning_a, tuning_b) -> tuple[str, str]:
    rng = np.random.default_rng(5)
    flop = 2 * 4096**3
    ids = []
    with Store.open(path) as store:
        for i, (tuning, speed) in enumerate(((tuning_a, 1.0), (tuning_b, 1.3))):
            m = in_processes(gemm_case("bf16"), flop / (100e12 * speed), flop, "FLOP/s",
                             rng=rng)
            ids.append(add_run(store, host="mi300x-01", stack=FLEET_STACK,
                               started_at=1.76e9 + 3600 * i, measurements=[_tuned(m, tuning)]))
    return ids[0], ids[1]


def _compare(path, a, b):
    with Store.open(path, create=False) as store:
        return compare(select_group(store, a), select_group(store, b))


def test_compare_marks_a_case_whose_sides_were_tuned_differently(tmp_path, capsys) -> None:
    path = tmp_path / "s.sqlite"
    a, b = _pair_store(path, rocm_tuning(enabled=False), rocm_tuning())
    (case,) = _compare(path, a, b).cases
    assert case.tuning_differs == ("TunableOp on in B only",)
    main_table = comparison_tables(_compare(path, a, b))[0]
    assert "tuning differs: TunableOp on in B only" in main_table.rows[0][-1]
    assert any(note.startswith("tuning differs:") for note in main_table.notes)
    assert main(["compare", a, b, "--store", str(path), "--json"]) in (0, 1, 9)
    data = json.loads(capsys.readouterr().out)
    assert data["cases"][0]["tuning_differs"] == ["TunableOp on in B only"]
    assert main(["compare", a, b, "--store", str(path)]) in (0, 1, 9)
    assert "tuning differs" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("tuning_a", "tuning_b"), [
    (rocm_tuning(), rocm_tuning()),  # the same tuning
    (None, None),  # stored before tuning was kept
    (None, rocm_tuning()),  # an old run against a new one
])
def test_compare_says_nothing_where_tuning_is_equal_or_unknown(tmp_path, tuning_a,
                                                               tuning_b) -> None:
    path = tmp_path / "s.sqlite"
    a, b = _pair_store(path, tuning_a, tuning_b)
    result = _compare(path, a, b)
    (case,) = result.cases
    assert case.tuning_differs == ()
    assert case.to_dict()["tuning_differs"] == []
    main_table = comparison_tables(result)[0]
    assert "tuning" not in main_table.rows[0][-1]
    assert not any("tuning" in note for note in main_table.notes)


# -- ab ------------------------------------------------------------------------------------


def _ab_side(values: list[float], tuning: dict[str, Any] | None) -> Measurement:
    case = gemm_case("bf16")
    figure = Figure("throughput", float(np.median(values)), "FLOP/s", True)
    details: dict[str, Any] = {PAIR_VALUES: values}
    if tuning is not None:
        details["tuning"] = tuning
    return stored_measurement(case, "ok", samples=(1e-3,) * 5, figures=(figure,),
                              details=details)


def _run(run_id: str, m: Measurement) -> StoredRun:
    record = RunRecord(id=run_id, started_at=1.76e9, finished_at=1.76e9 + 60,
                       status="complete", suite="quick", argv=("ab",), device="cuda:0",
                       generation_key=FLEET_STACK, host="mi300x-01",
                       accelbench_version="0.1.0", fingerprint_id="fp", n_ok=1, n_failed=0,
                       n_skipped=0)
    return StoredRun(record, {"format_version": 1, "platform": "rocm"}, (m,))


@pytest.mark.parametrize(("tuning_b", "expected"), [
    (rocm_tuning(find_mode="FAST"), ("MIOpen find mode default → FAST",)),
    (rocm_tuning(), ()),
    (None, ()),
])
def test_ab_marks_cases_whose_sides_were_tuned_differently(tuning_b, expected) -> None:
    rng = np.random.default_rng(3)
    va = [float(v) for v in 100e12 * (1 + 0.01 * rng.standard_normal(8))]
    vb = [float(v) for v in 120e12 * (1 + 0.01 * rng.standard_normal(8))]
    a, b = _ab_side(va, rocm_tuning()), _ab_side(vb, tuning_b)
    request = AbRequest(id="ab1")
    (case,) = verdicts([a], [b], request)
    assert case.verdict is not None
    assert case.tuning_differs == expected
    assert case.to_dict()["tuning_differs"] == list(expected)
    result = AbResult("ab1", _run("ra", a), _run("rb", b), request, [case])
    assert result.to_dict()["cases"][0]["tuning_differs"] == list(expected)
    (table,) = ab_tables(result)
    verdict_text = table.rows[0][-1]
    if expected:
        assert f"tuning differs: {expected[0]}" in verdict_text
        assert any(n.startswith("tuning differs:") for n in table.notes)
    else:
        assert "tuning" not in verdict_text
        assert not any("tuning" in n for n in table.notes)


# -- history -------------------------------------------------------------------------------


def _series_runs(levels: list[float], tunings: list[dict[str, Any] | None]) -> list[StoredRun]:
    case = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
    runs = []
    for i, (v, tuning) in enumerate(zip(levels, tunings, strict=True)):
        started = 1.75e9 + 3600 * i
        figure = Figure("throughput", v * 1e12, "FLOP/s", True, None, v * 0.995e12,
                        v * 1.005e12)
        details = {"tuning": tuning} if tuning is not None else {}
        m = stored_measurement(case, "ok", samples=(1e-3,) * 5, figures=(figure,),
                               started_at=started, details=details)
        record = RunRecord(id=f"run-{i:02d}", started_at=started, finished_at=started + 60,
                           status="complete", suite="quick", argv=("run",), device="cuda:0",
                           generation_key=FLEET_STACK, host="mi300x-01",
                           accelbench_version="0.1.0", fingerprint_id="fp", n_ok=1,
                           n_failed=0, n_skipped=0)
        runs.append(StoredRun(record, {"format_version": 1, "platform": "rocm"}, (m,)))
    return runs


LEVELS = [700.0, 702.0, 698.0, 701.0, 560.0, 562.0, 559.0, 561.0]


def test_history_marks_a_tuning_change_at_a_change_point() -> None:
    tunings: list[dict[str, Any] | None] = [rocm_tuning(), rocm_tuning(), rocm_tuning(),
                                            rocm_tuning()]
    tunings += [rocm_tuning(enabled=False)] * 4
    runs = _series_runs(LEVELS, tunings)
    (series,) = history(runs, runs[0].measurements[0].case.key)
    (step,) = series.change_points
    assert (step.kind, step.index) == (REGRESSED, 4)
    assert step.tuning_differs == ("TunableOp on in the run before only",)
    assert step.to_dict()["tuning_differs"] == ["TunableOp on in the run before only"]
    assert "tuning changed there: TunableOp on in the run before only" in step.describe()


@pytest.mark.parametrize("tunings", [[rocm_tuning()] * 8, [None] * 8])
def test_history_says_nothing_where_the_tuning_stayed_or_is_unknown(tunings) -> None:
    runs = _series_runs(LEVELS, tunings)
    (series,) = history(runs, runs[0].measurements[0].case.key)
    (step,) = series.change_points
    assert step.tuning_differs == ()
    assert "tuning" not in step.describe()


def test_the_sites_regressions_page_says_the_tuning_changed_at_a_step() -> None:
    from accelbench.report.site.pages import site_pages

    tunings: list[dict[str, Any] | None] = [rocm_tuning()] * 4
    tunings += [rocm_tuning(enabled=False)] * 4
    pages = {p.title: p for p in site_pages(_series_runs(LEVELS, tunings), "store")}
    (steps,) = pages["Regressions"].blocks[0].tables
    (row,) = steps.rows
    assert row.cells[-1] == "regressed; tuning changed: TunableOp on in the run before only"
