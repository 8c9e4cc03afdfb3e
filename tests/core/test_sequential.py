"""The anytime-valid paired test of `accelbench ab` (core.sequential): its boundary is
where the safe t-test's Bayes factor reaches 1/α, its verdicts read the interval as
`compare` does, and, looked at after every round, it keeps false alarms under α where a
fixed-n t-test does not, with power on a real shift. Simulations are seeded."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import t as student_t

from accelbench.core.sequential import (
    FASTER,
    INCONCLUSIVE,
    PRIOR_G,
    SAME,
    SLOWER,
    UNDECIDED,
    boundary,
    case_alpha,
    judge,
    pairs_needed,
    radius,
)


def bayes_factor(t: float, n: int, g: float = PRIOR_G) -> float:
    """Rouder et al. (2009), eq. 7 with a fixed g: the safe t-test's e-value."""
    nu, big = n - 1, 1.0 + n * g
    ratio = (1.0 + t * t / nu) / (1.0 + t * t / (nu * big))
    return float(math.pow(big, -0.5) * math.pow(ratio, (nu + 1) / 2))


@pytest.mark.parametrize("n", [4, 5, 8, 10, 20, 50, 200])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.0025])
def test_the_boundary_is_where_the_bayes_factor_reaches_one_over_alpha(n: int,
                                                                       alpha: float) -> None:
    b = boundary(n, alpha)
    if math.isinf(b):
        # No t reaches it: the Bayes factor's supremum, (1 + ng)^(ν/2), is below 1/α.
        assert (1 + n * PRIOR_G) ** ((n - 1) / 2) <= 1 / alpha
        return
    assert bayes_factor(b, n) == pytest.approx(1 / alpha, rel=1e-9)
    assert bayes_factor(b * 0.99, n) < 1 / alpha


def test_the_boundary_is_wider_than_a_fixed_n_t_and_shrinks_with_pairs() -> None:
    assert boundary(1, 0.05) == math.inf and boundary(2, 0.05) == math.inf
    assert math.isfinite(boundary(3, 0.05))  # from three pairs at alpha 0.05
    assert boundary(4, 0.05 / 20) == math.inf and math.isfinite(boundary(5, 0.05 / 20))
    widths = [radius(n, 1.0, 0.05) for n in (4, 6, 10, 20, 50, 200)]
    assert widths == sorted(widths, reverse=True)
    for n in (6, 10, 20, 50):
        fixed = float(student_t.ppf(0.975, n - 1))
        assert 1.0 < boundary(n, 0.05) / fixed < 3.0
    with pytest.raises(ValueError):
        boundary(10, 0.0)


def test_case_alpha_shares_the_ab_alpha_between_its_cases() -> None:
    assert case_alpha(0.05, 20) == pytest.approx(0.0025)
    assert case_alpha(0.05, 0) == 0.05


def test_a_clear_slowdown_is_slower_and_a_tight_aa_is_same() -> None:
    rng = random.Random(3)
    a = [100 * math.exp(rng.gauss(0, 0.01)) for _ in range(8)]
    slower = judge(a, [x * 0.8 * math.exp(rng.gauss(0, 0.01)) for x in a], True, 0.05, 0.05)
    assert slower.verdict == SLOWER and slower.speed_high < 1.0
    assert slower.change == pytest.approx(-0.2, abs=0.02)
    assert slower.regressed_by(0.1) and not slower.regressed_by(0.3)
    same = judge(a, [x * math.exp(rng.gauss(0, 0.01)) for x in a], True, 0.05, 0.05)
    assert same.verdict == SAME
    assert 0.95 < same.speed_low <= same.speed <= same.speed_high < 1.05


def test_a_time_figure_is_turned_into_a_speed() -> None:
    a = [1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 0.99, 1.0]
    b = [x * 1.25 for x in a]  # B takes 25% longer: 0.8 times the speed
    v = judge(a, b, False, 0.05, 0.05)
    assert v.verdict == SLOWER
    assert v.ratio == pytest.approx(1.25) and v.speed == pytest.approx(0.8)
    assert v.speed_low <= v.speed <= v.speed_high


def test_too_few_or_too_noisy_pairs_are_undecided_and_say_what_would_decide() -> None:
    early = judge([1.0, 1.1], [1.05, 1.0], True, 0.05, 0.05)
    assert early.verdict == UNDECIDED and not early.decided
    final = judge([1.0, 1.1], [1.05, 1.0], True, 0.05, 0.05, final=True)
    assert final.verdict == INCONCLUSIVE and "pairs" in final.reason
    noisy = judge([1.0, 1.3, 0.8, 1.1], [1.03, 1.26, 0.82, 1.1], True, 0.05, 0.05, final=True)
    assert noisy.verdict == INCONCLUSIVE
    assert noisy.pairs_needed is not None and noisy.pairs_needed > 4
    assert f"about {noisy.pairs_needed} pairs" in noisy.reason
    assert noisy.may_have_regressed_by(0.05) and not noisy.regressed_by(0.05)


def test_pairs_needed_finds_the_first_n_whose_radius_would_decide() -> None:
    sd, effect = 0.03, 0.05
    n = pairs_needed(0.0, sd, effect, 0.05)
    assert n is not None
    assert radius(n, sd, 0.05) < math.log1p(effect) <= radius(n - 1, sd, 0.05)
    assert pairs_needed(0.0, 10.0, effect, 0.05) is None  # beyond MAX_PAIRS


def test_pairs_without_a_positive_figure_on_both_sides_are_left_out() -> None:
    v = judge([1.0, float("nan"), 0.0, 1.0], [1.0, 1.0, 1.0, -1.0], True, 0.05, 0.05)
    assert v.pairs == 1
    none = judge([0.0], [1.0], True, 0.05, 0.05, final=True)
    assert none.pairs == 0 and none.verdict == INCONCLUSIVE
    assert none.to_dict()["ratio"] is None  # valid JSON: no NaN
    with pytest.raises(ValueError):
        judge([1.0], [1.0, 2.0], True, 0.05, 0.05)


# -- simulations: looking after every round ----------------------------------------------

def simulate(shift: float, sigma: float, rounds: int, trials: int, seed: int,
             drift: float = 0.3, alpha: float = 0.05, min_effect: float = 0.05,
             first: float = 1.0) -> dict[str, int]:
    """A/B of one case with host drift: a random walk of the host's speed and a step of
    `drift` halfway (another job starting), both sides in each pair alike; process noise
    `sigma` (`first` times that in the first pair, which `ab` samples for less time than
    the others of a case with a long set-up); B's true speed exp(shift) times A's. Judged
    after every round, stopped when decided."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for _ in range(trials):
        a: list[float] = []
        b: list[float] = []
        host = 0.0
        verdict = None
        for r in range(rounds):
            host += rng.gauss(0, drift / math.sqrt(rounds))
            if r == rounds // 2:
                host += drift
            noise = sigma * (first if r == 0 else 1.0)
            a.append(100 * math.exp(host + rng.gauss(0, noise)))
            b.append(100 * math.exp(host + shift + rng.gauss(0, noise)))
            verdict = judge(a, b, True, min_effect, alpha, final=r == rounds - 1)
            if verdict.decided:
                break
        assert verdict is not None
        counts[verdict.verdict] = counts.get(verdict.verdict, 0) + 1
    return counts


@pytest.mark.parametrize("sigma", [0.01, 0.04, 0.1])
def test_false_alarms_stay_under_alpha_when_looking_after_every_round(sigma: float) -> None:
    trials = 600
    counts = simulate(0.0, sigma, rounds=30, trials=trials, seed=11)
    false_calls = counts.get(FASTER, 0) + counts.get(SLOWER, 0)
    assert false_calls / trials <= 0.05
    if sigma == 0.01:
        assert counts.get(SAME, 0) / trials >= 0.99  # and it decides


@pytest.mark.parametrize("first", [3.0, 10.0])
def test_a_noisier_first_pair_keeps_both_error_rates(first: float) -> None:
    """`ab` samples a case's first pair for the time asked and the others for as long as
    its set-up took: a noisier first pair widens the interval, so neither a false change
    nor a false "same" becomes likelier."""
    trials = 600
    counts = simulate(0.0, 0.02, rounds=20, trials=trials, seed=3, min_effect=0.0,
                      first=first)
    assert (counts.get(FASTER, 0) + counts.get(SLOWER, 0)) / trials <= 0.05
    # truly 5% slower: called the same within ±5% in at most α of the trials
    counts = simulate(-math.log1p(0.05), 0.02, rounds=20, trials=trials, seed=4,
                      first=first)
    assert counts.get(SAME, 0) / trials <= 0.05


def test_a_fixed_n_t_test_looked_at_every_round_would_not() -> None:
    """Why the anytime-valid test: the textbook interval, checked after every round and
    stopped at the first that excludes no change, calls a change in far more than α of
    identical stacks."""
    rng = random.Random(5)
    trials, alarms = 600, 0
    for _ in range(trials):
        d: list[float] = []
        for n in range(1, 31):
            d.append(rng.gauss(0, 0.05))
            if n >= 3:
                mean = sum(d) / n
                sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
                if abs(mean) > float(student_t.ppf(0.975, n - 1)) * sd / math.sqrt(n):
                    alarms += 1
                    break
    assert alarms / trials > 0.15


def test_power_on_a_known_ten_percent_slowdown_under_drift() -> None:
    trials = 400
    counts = simulate(math.log(0.9), 0.03, rounds=20, trials=trials, seed=7)
    assert counts.get(SLOWER, 0) / trials >= 0.9
    assert counts.get(FASTER, 0) == 0 and counts.get(SAME, 0) == 0


def test_the_ab_alpha_shared_by_twenty_cases_keeps_all_of_them_clean() -> None:
    """Twenty identical cases judged at α / 20 each: no false call in any of them."""
    counts = simulate(0.0, 0.04, rounds=30, trials=400, seed=2,
                      alpha=case_alpha(0.05, 20))
    assert counts.get(FASTER, 0) + counts.get(SLOWER, 0) <= 400 * 0.05 / 20 * 3


def test_a_change_is_called_at_the_ab_level_and_same_at_the_case_level() -> None:
    rng = random.Random(9)
    a = [100 * math.exp(rng.gauss(0, 0.02)) for _ in range(6)]
    b = [x * 0.93 * math.exp(rng.gauss(0, 0.02)) for x in a]
    alone = judge(a, b, True, 0.05, 0.05)
    among_many = judge(a, b, True, 0.05, 0.05, cases=200)
    assert alone.verdict == SLOWER
    assert among_many.verdict == UNDECIDED  # its interval at 0.05 / 200 still holds 1
    assert among_many.call_low < alone.call_low <= among_many.speed_low
    assert among_many.speed_high < 1.0  # the case's own interval excludes 1
    same = [x * math.exp(rng.gauss(0, 0.005)) for x in a]
    assert judge(a, same, True, 0.05, 0.05, cases=200).verdict == SAME
