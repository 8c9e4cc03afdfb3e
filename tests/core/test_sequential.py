"""The paired test of `accelbench ab` (core.sequential): repeated t-tests whose nominal
level is calibrated so that looking after every round, up to the A/B's horizon, crosses
with a chance of α; its verdicts read the intervals as `compare` does (a change at the
A/B's shared α, "same" as two one-sided tests), and, looked at after every round, it
keeps false alarms under α where a fixed-n t-test does not, with power on a real shift.
Simulations are seeded."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import t as student_t

from accelbench.core import sequential
from accelbench.core.sequential import (
    FASTER,
    FIRST_LOOK,
    HORIZON,
    INCONCLUSIVE,
    MAX_HORIZON,
    SAME,
    SLOWER,
    UNDECIDED,
    PairedVerdict,
    boundary,
    case_alpha,
    judge,
    nominal_level,
    pairs_needed,
    radius,
    step_down,
)


def crossing_rate(alpha: float, horizon: int, two_sided: bool, paths: int, seed: int,
                  df: int | None = None) -> float:
    """How often normal pair sequences (or Student-t ones with `df` degrees of freedom:
    heavy-tailed pairs) cross the boundary at some look up to the horizon, drawn
    independently of the calibration's own simulation."""
    rng = np.random.default_rng(seed)
    z = (rng.standard_t(df, (paths, horizon)) if df is not None
         else rng.standard_normal((paths, horizon)))
    crossed = np.zeros(paths, dtype=bool)
    for n in range(FIRST_LOOK, horizon + 1):
        x = z[:, :n]
        t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(n))
        c = boundary(n, alpha, horizon, two_sided)
        crossed |= (np.abs(t) if two_sided else t) >= c
    return float(crossed.mean())


@pytest.mark.parametrize(("alpha", "horizon", "two_sided"),
                         [(0.05, 20, False), (0.05, 20, True), (0.05, 8, True),
                          (0.01, 30, True)])
def test_looking_at_every_round_up_to_the_horizon_crosses_with_a_chance_of_alpha(
        alpha: float, horizon: int, two_sided: bool) -> None:
    """The calibration holds on sequences it did not see: at most α, and not much less
    (a boundary far wider than it need be would waste pairs)."""
    rate = crossing_rate(alpha, horizon, two_sided, 40_000, seed=17)
    sigma = math.sqrt(alpha * (1 - alpha) / 40_000)
    assert rate <= alpha + 3 * sigma
    assert rate >= 0.8 * alpha


def test_heavy_tailed_pair_noise_does_not_raise_the_false_alarm_rate() -> None:
    """A pair 15-30% off in an otherwise quiet case: Student-t noise with 3 degrees of
    freedom. The t statistic's sd takes such a pair in whole, so the test errs safe."""
    assert crossing_rate(0.05, 20, True, 20_000, seed=5, df=3) <= 0.05


def test_the_boundary_is_finite_from_the_first_look_to_the_horizon_and_shrinks() -> None:
    assert boundary(FIRST_LOOK - 1, 0.05) == math.inf
    assert math.isfinite(boundary(FIRST_LOOK, 0.05))
    assert boundary(HORIZON + 1, 0.05) == math.inf  # past the horizon: nothing is judged
    assert math.isfinite(boundary(HORIZON + 1, 0.05, beyond=True))
    widths = [radius(n, 1.0, 0.05) for n in (3, 4, 6, 10, 20)]
    assert widths == sorted(widths, reverse=True)
    for n in (6, 10, 20):  # wider than one fixed-n t-test, narrower than Bonferroni's
        fixed = float(student_t.ppf(0.975, n - 1))
        looks = HORIZON - FIRST_LOOK + 1
        bonferroni = float(student_t.ppf(1 - 0.05 / 2 / looks, n - 1))
        assert fixed < boundary(n, 0.05) < bonferroni
    # one-sided at α is narrower than two-sided at α; a longer horizon, wider
    assert boundary(9, 0.05, two_sided=False) < boundary(9, 0.05)
    assert boundary(9, 0.05, horizon=10) < boundary(9, 0.05, horizon=40)
    with pytest.raises(ValueError):
        boundary(10, 0.0)


def test_the_nominal_level_is_seeded_and_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    simulate = nominal_level.__wrapped__  # past the cache: two simulations, one seed
    assert simulate(0.05, 20, True) == simulate(0.05, 20, True) == nominal_level(0.05, 20, True)
    assert nominal_level(0.05, FIRST_LOOK - 1, True) == 0.0
    assert boundary(MAX_HORIZON + 1, 0.05, horizon=10 * MAX_HORIZON) == math.inf
    # A horizon past the most calibrated for is simulated as that most (a small one here:
    # the real one, 200 looks, takes seconds).
    monkeypatch.setattr(sequential, "MAX_HORIZON", 12)
    assert simulate(0.05, 120, True) == simulate(0.05, 12, True) != simulate(0.05, 11, True)


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
    # "same": each bound at α
    assert (radius(n, sd, 0.05, two_sided=False) < math.log1p(effect)
            <= radius(n - 1, sd, 0.05, two_sided=False))
    # a change: two-sided at the change call's level, past the horizon an estimate
    far = pairs_needed(0.08, 0.2, effect, 0.05, 0.05 / 20)
    assert far is not None and far > HORIZON
    assert (radius(far, 0.2, 0.05 / 20, beyond=True) < 0.08
            <= radius(far - 1, 0.2, 0.05 / 20, beyond=True))
    assert pairs_needed(0.0, 10.0, effect, 0.05) is None  # beyond MAX_PAIRS


def test_pairs_without_a_positive_figure_on_both_sides_are_left_out() -> None:
    v = judge([1.0, float("nan"), 0.0, 1.0], [1.0, 1.0, 1.0, -1.0], True, 0.05, 0.05)
    assert v.pairs == 1
    none = judge([0.0], [1.0], True, 0.05, 0.05, final=True)
    assert none.pairs == 0 and none.verdict == INCONCLUSIVE
    assert none.to_dict()["ratio"] is None  # valid JSON: no NaN
    with pytest.raises(ValueError):
        judge([1.0], [1.0, 2.0], True, 0.05, 0.05)


def at_most_alpha(count: int, trials: int, alpha: float = 0.05) -> bool:
    """A rate from a finite simulation is at most α, within three of its standard errors:
    the boundary is calibrated to cross with a chance of 0.9 α exactly (a tighter bound
    here would reject a correct calibration by chance)."""
    return count / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


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
            verdict = judge(a, b, True, min_effect, alpha, final=r == rounds - 1,
                            horizon=rounds)
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
    assert at_most_alpha(false_calls, trials)
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
    assert at_most_alpha(counts.get(FASTER, 0) + counts.get(SLOWER, 0), trials)
    # truly 5% slower: called the same within ±5% in at most α of the trials
    counts = simulate(math.log(0.95), 0.02, rounds=20, trials=trials, seed=4,
                      first=first)
    assert at_most_alpha(counts.get(SAME, 0), trials)


def test_a_fixed_n_t_test_looked_at_every_round_would_not() -> None:
    """Why the calibrated boundary: the textbook interval, checked after every round and
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


def test_a_quiet_aa_is_called_the_same_within_the_pairs_a_budget_holds() -> None:
    """What the calibrated boundary buys: an A/A whose pairs differ by 3% (sd of ln(B/A),
    the quiet cases of the quick suite on a 2-core VM) is called the same within ten
    pairs in most trials, and rarely faster or slower."""
    trials = 400
    counts = simulate(0.0, 0.03 / math.sqrt(2), rounds=10, trials=trials, seed=21)
    assert counts.get(SAME, 0) / trials >= 0.85
    assert at_most_alpha(counts.get(FASTER, 0) + counts.get(SLOWER, 0), trials)


# -- many cases: Holm's step-down, made sequential --------------------------------------

def simulate_family(shifts: list[float], sigma: float, rounds: int, trials: int, seed: int,
                    alpha: float, holm: bool = True) -> tuple[int, list[int]]:
    """An A/B of len(shifts) cases, B's true speed exp(shift) times A's, each pair's
    ln(B / A) with noise `sigma`; judged after every round through `step_down` (with
    `holm` false, every case at α / m: Bonferroni), no minimum effect (so no case is
    ever called the same: each unchanged one is looked at every round). Returns the
    trials with a false call among the unchanged cases, and each case's calls."""
    rng = random.Random(seed)
    m = len(shifts)
    false_trials, calls = 0, [0] * m
    for _ in range(trials):
        # drawn ahead, so that both tests of a seed judge the same pairs
        drawn = [[math.exp(shift + rng.gauss(0, sigma)) for shift in shifts]
                 for _ in range(rounds)]
        pairs: list[tuple[list[float], list[float]]] = [([], []) for _ in shifts]
        called: set[int] = set()
        for r in range(rounds):
            active = [i for i in range(m) if i not in called]
            for i in active:
                pairs[i][0].append(1.0)
                pairs[i][1].append(drawn[r][i])
            final = r == rounds - 1

            def judge_at(i: int, shares: int, pairs=pairs, final=final) -> PairedVerdict:
                a, b = pairs[i]
                return judge(a, b, True, 0.0, alpha, final=final,
                             cases=shares if holm else m, horizon=rounds)

            judged = step_down(active, m, len(called), judge_at)
            called |= {i for i, (v, _) in judged.items()
                       if v is not None and v.verdict in (FASTER, SLOWER)}
        false_trials += any(shifts[i] == 0.0 for i in called)
        for i in called:
            calls[i] += 1
    return false_trials, calls


def test_the_step_down_keeps_false_calls_under_alpha_and_calls_more_than_bonferroni(
) -> None:
    """Three cases 20% slower and three unchanged: once the three are called, each
    unchanged one is judged at α / 3 rather than α / 6, and still the chance of any
    false call among them is at most α. α is large here so that a simulation of a few
    hundred A/Bs can tell: the step-down spends the shares freed, near α, where
    Bonferroni spends about half of it."""
    shifts = [math.log(0.8)] * 3 + [0.0] * 3
    trials, alpha = 500, 0.2
    holm, calls = simulate_family(shifts, 0.05, rounds=10, trials=trials, seed=31,
                                  alpha=alpha)
    bonferroni, _ = simulate_family(shifts, 0.05, rounds=10, trials=trials, seed=31,
                                    alpha=alpha, holm=False)
    assert at_most_alpha(holm, trials, alpha)
    assert all(c == trials for c in calls[:3])  # the changed ones, every time
    # the same pairs judged both ways: every false call of Bonferroni's is one of the
    # step-down's too, which calls in about 8% more of the trials (here: 15-17% against
    # 8-9%, over seeds)
    assert holm - bonferroni >= 0.05 * trials


def test_the_step_down_calls_a_slowdown_that_bonferroni_would_leave_undecided() -> None:
    """Many cases slowed alike (a slower build): each call frees a share of α for the
    rest, so that all are called in fewer rounds."""
    shifts = [math.log(0.9)] * 12
    _, holm = simulate_family(shifts, 0.03, rounds=6, trials=200, seed=8, alpha=0.05)
    _, bonferroni = simulate_family(shifts, 0.03, rounds=6, trials=200, seed=8,
                                    alpha=0.05, holm=False)
    assert sum(holm) > sum(bonferroni)
    assert sum(holm) >= 0.9 * 12 * 200


def test_a_case_called_same_frees_no_share() -> None:
    """Only a call frees its share: a case decided the same may be one of those that do
    not differ, so the others are still judged at α / m."""
    seen: list[tuple[int, int]] = []

    def judge_at(case: int, shares: int) -> PairedVerdict:
        seen.append((case, shares))
        verdict = {0: SLOWER, 1: SAME}.get(case, UNDECIDED)
        return PairedVerdict(5, 1.0, 0.9, 1.1, 1.0, 0.9, 1.1, verdict, 0.01)

    judged = step_down([0, 1, 2], total=4, called=1, judge_at=judge_at)
    assert seen == [(0, 3), (1, 3), (2, 3), (2, 2)]
    assert {case: shares for case, (_, shares) in judged.items()} == {0: 3, 1: 3, 2: 2}


def test_the_pairs_to_pass_a_gate_are_fewer_than_to_call_a_change_same() -> None:
    from accelbench.core.sequential import FIRST_LOOK, pairs_needed, pairs_to_pass, radius

    call = 0.05 / 15
    gate = pairs_to_pass(0.0, 0.05, 0.05, call, 10)
    same = pairs_needed(0.0, 0.05, 0.02, 0.05, call, 10)
    assert gate is not None and (same is None or gate < same)
    # the fewest: at that many pairs the interval clears a 5% slowdown, one fewer not
    needed = -math.log1p(-0.05)
    assert radius(gate, 0.05, call, 10, True, beyond=True) < needed
    assert gate == FIRST_LOOK or radius(gate - 1, 0.05, call, 10, True, beyond=True) >= needed
    # noisier needs more; a mean at or past the slowdown, none; no noise, the first look
    noisier = pairs_to_pass(0.0, 0.08, 0.05, call, 10)
    assert noisier is not None and noisier > gate
    assert pairs_to_pass(math.log(0.94), 0.05, 0.05, call, 10) is None
    assert pairs_to_pass(0.0, 0.0, 0.05, call, 10) == FIRST_LOOK
