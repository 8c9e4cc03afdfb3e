"""The Server QPS search, on fake trials: no LoadGen, no clock."""

from __future__ import annotations

import pytest

from accelbench.benchmarks.serving.search import Trial, search_qps


def capacity(limit: float):
    """Trials of a server that meets the bound up to `limit` QPS; and the rates tried."""
    tried: list[float] = []

    def trial(qps: float) -> Trial:
        tried.append(qps)
        return Trial(qps, qps <= limit, {"qps": qps})

    return trial, tried


def test_doubles_from_a_passing_start_then_bisects_to_within_the_precision() -> None:
    trial, tried = capacity(37.0)
    found = search_qps(trial, 10.0, max_trials=20, precision=0.05)
    assert tried[:3] == [10.0, 20.0, 40.0]  # doubling until a miss
    assert found.stopped == "converged"
    assert found.best is not None and found.best.met
    assert 37.0 / 1.05 <= found.best.qps <= 37.0
    assert found.best.qps == max(t.qps for t in found.trials if t.met)
    assert [t.qps for t in found.trials] == tried


def test_halves_from_a_failing_start() -> None:
    trial, tried = capacity(3.0)
    found = search_qps(trial, 40.0, max_trials=20, precision=0.05)
    assert tried[:5] == [40.0, 20.0, 10.0, 5.0, 2.5]
    assert found.best is not None and 3.0 / 1.05 <= found.best.qps <= 3.0


def test_stops_at_the_trial_budget_with_the_best_so_far() -> None:
    trial, tried = capacity(37.0)
    found = search_qps(trial, 10.0, max_trials=4)
    assert len(tried) == 4 and found.stopped == "trials"
    assert found.best is not None and found.best.qps == 30.0  # 10, 20, 40 (miss), 30


def test_says_when_nothing_met_the_bound_or_nothing_missed_it() -> None:
    never, _ = capacity(0.0)
    none = search_qps(never, 1.0, max_trials=3)
    assert none.best is None and none.stopped == "nothing met the bound"
    always, tried = capacity(float("inf"))
    every = search_qps(always, 1.0, max_trials=3)
    assert every.best is not None and every.best.qps == 4.0
    assert every.stopped == "no trial missed the bound" and tried == [1.0, 2.0, 4.0]


def test_one_trial_is_one_test_at_the_starting_rate() -> None:
    trial, tried = capacity(5.0)
    found = search_qps(trial, 5.0, max_trials=1)
    assert tried == [5.0] and found.best is not None and found.best.qps == 5.0


@pytest.mark.parametrize(("start", "trials"), [(0.0, 3), (-1.0, 3), (1.0, 0)])
def test_refuses_a_search_that_cannot_start(start, trials) -> None:
    trial, _ = capacity(1.0)
    with pytest.raises(ValueError):
        search_qps(trial, start, max_trials=trials)
