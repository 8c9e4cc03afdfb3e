"""History of a case over stored runs, with its change points, from a store of known steps."""

from __future__ import annotations

import json

import pytest
from analysis_data import (
    HISTORY_IMPROVED_AT,
    HISTORY_REGRESSED_AT,
    HISTORY_STACK,
    make_history,
)

from accelbench.analysis.history import IMPROVED, REGRESSED, case_matcher, history
from accelbench.analysis.select import select_runs
from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED, EXIT_USAGE, UserError
from accelbench.store import Store


@pytest.fixture(scope="module")
def history_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("history") / "results.sqlite"
    ids = make_history(path)
    with Store.open(path) as store:
        runs = select_runs(store, [])
    return path, ids, runs


def test_known_steps_are_found_and_described(history_store) -> None:
    _, ids, runs = history_store
    series = history(runs, case_matcher("gemm dtype=bf16"))
    assert series[0].generation_key == HISTORY_STACK
    main_series = series[0]
    assert len(main_series.points) == len(ids)
    improved, regressed = main_series.change_points
    assert (improved.kind, improved.index, improved.run_id) == (
        IMPROVED, HISTORY_IMPROVED_AT, ids[HISTORY_IMPROVED_AT])
    assert (regressed.kind, regressed.index) == (REGRESSED, HISTORY_REGRESSED_AT)
    assert improved.change == pytest.approx(0.08, abs=0.015)
    assert regressed.change == pytest.approx(-0.12, abs=0.015)
    assert regressed.describe().startswith("regressed by 1")
    assert regressed.describe().endswith(f"at run {ids[HISTORY_REGRESSED_AT]}")
    assert main_series.latest_regression is regressed


def test_other_stacks_make_their_own_series_and_flat_cases_have_no_change(history_store):
    _, _, runs = history_store
    series = history(runs, case_matcher("gemm"))
    assert len(series) == 2 and len(series[1].points) == 1
    flat = history(runs, case_matcher("memory op=copy"))
    assert len(flat) == 1 and flat[0].change_points == []


def test_stack_host_and_limit_filters(history_store) -> None:
    _, ids, runs = history_store
    only = history(runs, case_matcher("gemm"), stacks="*ROCm 6.2*", limit=10)
    assert len(only) == 1 and [p.run_id for p in only[0].points] == ids[-10:]
    with pytest.raises(UserError, match="no stored result"):
        history(runs, case_matcher("gemm"), hosts="other-*")


def test_a_larger_minimum_effect_hides_smaller_steps(history_store) -> None:
    _, _, runs = history_store
    (series, _) = history(runs, case_matcher("gemm"), min_effect=0.10)
    assert [c.kind for c in series.change_points] == [REGRESSED]
    assert series.small_steps == 1


def test_case_key_selects_one_case(history_store) -> None:
    _, _, runs = history_store
    key = runs[0].measurements[0].case.key
    assert all(s.case.key == key for s in history(runs, case_matcher(key)))


def test_history_command(history_store, capsys) -> None:
    path, ids, _ = history_store
    argv = ["history", "gemm dtype=bf16", "--store", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "regressed by" in out and ids[HISTORY_REGRESSED_AT] in out
    assert main([*argv, "--fail-on-regression"]) == EXIT_CASE_FAILED
    capsys.readouterr()
    assert main([*argv, "--json", "--stack", "*6.2*"]) == 0
    data = json.loads(capsys.readouterr().out)
    (series,) = data["series"]
    assert [c["kind"] for c in series["change_points"]] == ["improved", "regressed"]
    assert data["ends_on_regression"]
    assert main(["history", "memory", "--store", str(path), "--fail-on-regression"]) == 0
    capsys.readouterr()
    assert main(["history", "gemm nonsense", "--store", str(path)]) == EXIT_USAGE
    assert "NAME=GLOB" in capsys.readouterr().err
