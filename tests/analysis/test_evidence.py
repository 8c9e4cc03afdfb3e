"""The cross-run verdict logic, driven by seeded fake process values.

Each simulated side is a run of three processes (what the quick and generations suites
measure), log-normal around a true level: an A/A pair must be called faster or slower at
most as often as the significance level allows, a known shift must be found, and wide
evidence must be inconclusive rather than a verdict.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from accelbench.analysis import evidence as ev


def _run(rng: np.random.Generator, level: float, sd: float, processes: int = 3,
         run_sd: float = 0.0) -> list[float]:
    """One run's process values: a run-level offset (run_sd) and each process's own noise."""
    offset = run_sd * rng.standard_normal()
    return list(level * np.exp(offset + sd * rng.standard_normal(processes)))


def _verdicts(rng: np.random.Generator, pairs: int, *, shift: float = 1.0, sd: float = 0.02,
              run_sd: float = 0.0, floor: ev.NoiseFloor | None = None,
              min_effect: float = 0.05, processes: int = 3) -> dict[str, int]:
    counts = dict.fromkeys((ev.FASTER, ev.SLOWER, ev.SAME, ev.INCONCLUSIVE), 0)
    for _ in range(pairs):
        a = ev.side([_run(rng, 100.0, sd, processes, run_sd)], floor)
        b = ev.side([_run(rng, 100.0 * shift, sd, processes, run_sd)], floor)
        counts[ev.three_way(ev.weigh(a, b), min_effect, True)] += 1
    return counts


def test_welch_on_logs_is_scipys_welch_t_test() -> None:
    rng = np.random.default_rng(1)
    x, y = _run(rng, 100.0, 0.03), _run(rng, 104.0, 0.05, processes=5)
    found = ev.weigh(ev.side([x]), ev.side([y]))
    expected = stats.ttest_ind(np.log(y), np.log(x), equal_var=False)
    assert found.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    ci = expected.confidence_interval(0.95)
    assert (found.low, found.high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))
    assert found.ratio == pytest.approx(stats.gmean(y) / stats.gmean(x))


def test_three_processes_a_side_can_reach_significance() -> None:
    # A rank test on 3 + 3 values never goes below p = 0.1; this one does.
    assert stats.mannwhitneyu([1, 2, 3], [4, 5, 6]).pvalue > 0.05
    found = ev.weigh(ev.side([[100.0, 101.0, 99.0]]), ev.side([[90.0, 91.0, 89.5]]))
    assert found.significant and found.p_value is not None and found.p_value < 0.01


def test_aa_pairs_are_called_at_most_as_often_as_alpha() -> None:
    rng = np.random.default_rng(2)
    pairs = 4000
    counts = _verdicts(rng, pairs, sd=0.04, min_effect=0.0)
    called = counts[ev.FASTER] + counts[ev.SLOWER]
    # Welch's t on normal logs is exact to within its degrees-of-freedom approximation:
    # the rate is alpha, give or take three binomial standard errors.
    assert called / pairs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / pairs)
    with_effect = _verdicts(np.random.default_rng(3), pairs, sd=0.04, min_effect=0.05)
    assert (with_effect[ev.FASTER] + with_effect[ev.SLOWER]) / pairs <= 0.05


def test_a_known_shift_is_found() -> None:
    rng = np.random.default_rng(4)
    halved = _verdicts(rng, 500, shift=0.5, sd=0.05)
    assert halved[ev.SLOWER] == 500
    ten_pct = _verdicts(rng, 500, shift=1.10, sd=0.01)
    assert ten_pct[ev.FASTER] >= 495


def test_wide_evidence_is_inconclusive_not_a_verdict() -> None:
    rng = np.random.default_rng(5)
    counts = _verdicts(rng, 1000, sd=0.30)
    assert counts[ev.INCONCLUSIVE] >= 900
    assert counts[ev.SAME] == 0  # an interval of ±40% never shows "no change of 5%"
    assert counts[ev.FASTER] + counts[ev.SLOWER] <= 50


def test_tight_evidence_of_no_change_is_same() -> None:
    counts = _verdicts(np.random.default_rng(6), 500, sd=0.005)
    assert counts[ev.SAME] == 500


def test_run_to_run_noise_one_run_cannot_see_is_floored() -> None:
    # Runs move by 6% as a whole, their processes by 1% within: one run's processes claim
    # far more precision than a rerun reproduces.
    rng = np.random.default_rng(7)
    blind = _verdicts(rng, 1000, sd=0.01, run_sd=0.06)
    assert blind[ev.FASTER] + blind[ev.SLOWER] > 200  # what pooling within runs did
    history = [float(np.exp(0.06 * rng.standard_normal())) for _ in range(12)]
    floor = ev.noise_floor(history)
    assert floor is not None and floor.runs == 12
    floored = _verdicts(rng, 1000, sd=0.01, run_sd=0.06, floor=floor)
    assert floored[ev.FASTER] + floored[ev.SLOWER] <= 50
    assert floored[ev.INCONCLUSIVE] > 500


def test_the_floor_is_the_run_to_run_spread_and_one_step_does_not_pass_for_noise() -> None:
    rng = np.random.default_rng(8)
    series = list(np.exp(0.02 * rng.standard_normal(400)))
    floor = ev.noise_floor(series)
    assert floor is not None and floor.rel_sd == pytest.approx(0.02, rel=0.1)
    stepped = [*series[:200], *(2.0 * v for v in series[200:])]
    stepped_floor = ev.noise_floor(stepped)
    assert stepped_floor is not None and stepped_floor.rel_sd == pytest.approx(0.02, rel=0.1)
    # A slow drift is no run-to-run noise either.
    drifting = [v * (1 + 0.001 * i) for i, v in enumerate(series)]
    drift_floor = ev.noise_floor(drifting)
    assert drift_floor is not None and drift_floor.rel_sd == pytest.approx(0.02, rel=0.1)
    assert ev.noise_floor([1.0, 1.1]) is None  # two runs teach no spread
    # With few runs every difference counts: one run 12% off is noise until more tell.
    few = ev.noise_floor([1.0, 1.001, 0.99, 1.12])
    assert few is not None and few.rel_sd > 0.04


def test_a_floor_applies_only_where_it_is_wider() -> None:
    noisy = ev.side([[100.0, 130.0, 80.0]], ev.NoiseFloor(0.01, 5))
    assert noisy.source == "processes"
    quiet = ev.side([[100.0, 100.1, 99.9]], ev.NoiseFloor(0.05, 5))
    assert quiet.source == "noise floor" and quiet.var == pytest.approx(0.05**2)
    assert quiet.df == 4


def test_several_runs_a_side_use_the_spread_of_their_means() -> None:
    side = ev.side([[100.0, 101.0], [110.0, 111.0], [90.0, 91.0]])
    assert side.source == "runs" and side.runs == 3 and side.processes == 6
    means = [np.mean(np.log(r)) for r in ([100.0, 101.0], [110.0, 111.0], [90.0, 91.0])]
    assert side.var == pytest.approx(np.var(means, ddof=1) / 3)


def test_one_value_a_side_is_inconclusive_and_one_process_borrows_the_others_noise() -> None:
    lone = ev.weigh(ev.side([[100.0]]), ev.side([[50.0]]))
    assert lone.p_value is None and ev.three_way(lone, 0.05, True) == ev.INCONCLUSIVE
    borrowed = ev.weigh(ev.side([[100.0]]), ev.side([[50.0, 50.5, 49.5]]))
    assert borrowed.p_value is not None and ev.three_way(borrowed, 0.05, True) == ev.SLOWER


def test_lower_is_better_figures_read_the_interval_turned_round() -> None:
    # Latency halves: B over A is 0.5, which is twice as fast.
    found = ev.weigh(ev.side([[2.0, 2.02, 1.98]]), ev.side([[1.0, 1.01, 0.99]]))
    assert ev.three_way(found, 0.05, False) == ev.FASTER
    assert ev.three_way(found, 0.05, True) == ev.SLOWER


def test_runs_needed_follows_the_noise() -> None:
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert ev.runs_needed(0.05**2, 0.05) == math.ceil(2 * 0.05**2 * z * z / math.log(1.05) ** 2)
    assert ev.runs_needed(0.10**2, 0.05) > ev.runs_needed(0.05**2, 0.05)  # type: ignore[operator]
    assert ev.runs_needed(1e-8, 0.05) == 2
    assert ev.runs_needed(None, 0.05) is None


def test_the_runs_needed_do_detect_the_effect() -> None:
    # Sized for 80% power: with that many runs a side, a real 5% change is called most
    # of the time.
    rng = np.random.default_rng(9)
    sd = 0.04
    n = ev.runs_needed(sd**2, 0.05)
    assert n is not None
    hits = 0
    for _ in range(400):
        a = ev.side([[float(v)] for v in 100 * np.exp(sd * rng.standard_normal(n))])
        b = ev.side([[float(v)] for v in 105 * np.exp(sd * rng.standard_normal(n))])
        hits += ev.weigh(a, b).significant
    assert hits / 400 >= 0.7
