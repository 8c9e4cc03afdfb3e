"""The workload: lengths, arrivals (vLLM's gamma gaps, the ramp-up) and planned prompts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from accelbench.benchmarks.llm.workload import (
    Arrivals,
    Lengths,
    arrival_offsets,
    plan_requests,
)


@pytest.mark.parametrize(("text", "kind", "low", "high", "canonical"), [
    ("128", "fixed", 128, 128, "128"),
    (" 7 ", "fixed", 7, 7, "7"),
    ("uniform:64-256", "uniform", 64, 256, "uniform:64-256"),
    ("uniform: 5 - 5", "uniform", 5, 5, "uniform:5-5"),
    ("normal:128,16", "normal", 128, 16, "normal:128,16"),
    ("normal:100.5,0", "normal", 100.5, 0, "normal:100.5,0"),
])
def test_lengths_parse(text, kind, low, high, canonical):
    lengths = Lengths.parse(text)
    assert (lengths.kind, lengths.low, lengths.high) == (kind, low, high)
    assert str(lengths) == canonical
    assert Lengths.parse(str(lengths)) == lengths


@pytest.mark.parametrize("text", ["0", "-3", "abc", "", "uniform:10-5", "uniform:0-5",
                                  "uniform:5", "normal:128", "normal:0.5,1", "normal:1e,2",
                                  "normal:10,-1", "128 tokens", "1.5"])
def test_bad_lengths_are_refused_in_one_line(text):
    with pytest.raises(ValueError) as raised:
        Lengths.parse(text)
    assert "\n" not in str(raised.value)
    assert repr(text) in str(raised.value)


def test_lengths_samples_stay_in_their_bounds():
    rng = np.random.default_rng(0)
    assert Lengths.parse("32").sample(rng, 5) == [32] * 5
    uniform = Lengths.parse("uniform:3-6").sample(rng, 2000)
    assert set(uniform) == {3, 4, 5, 6}  # both ends are included
    assert Lengths.parse("uniform:3-6").largest == 6
    normal = Lengths.parse("normal:10,8")
    drawn = normal.sample(rng, 20000)
    assert min(drawn) == 1  # clipped below at 1, which this spread reaches
    assert max(drawn) <= normal.largest == 42
    assert all(isinstance(x, int) for x in drawn)
    assert abs(np.mean(Lengths.parse("normal:500,20").sample(rng, 20000)) - 500) < 1


def test_lengths_samples_are_seeded():
    lengths = Lengths.parse("uniform:1-1000")
    first = lengths.sample(np.random.default_rng(5), 50)
    assert first == lengths.sample(np.random.default_rng(5), 50)
    assert first != lengths.sample(np.random.default_rng(6), 50)


@pytest.mark.parametrize(("given", "word"), [
    ({"rate": 0}, "rate"), ({"rate": -1}, "rate"), ({"rate": math.nan}, "rate"),
    ({"rate": 1, "burstiness": 0}, "burstiness"),
    ({"rate": 1, "burstiness": math.inf}, "burstiness"),
    ({"rate": 1, "ramp_up": -1}, "ramp-up"),
])
def test_bad_arrivals_are_refused(given, word):
    with pytest.raises(ValueError, match=word):
        Arrivals(**given)


def test_an_infinite_rate_sends_everything_at_once():
    assert arrival_offsets(4, Arrivals(math.inf), seed=0) == [0.0] * 4
    assert arrival_offsets(0, Arrivals(2.0), seed=0) == []


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gaps_follow_vllms_gamma(burstiness):
    """vLLM's --burstiness: gaps ~ gamma(shape=b, scale=1/(rate*b)): mean 1/rate, and
    Poisson (exponential gaps) at b=1."""
    rate = 8.0
    offsets = arrival_offsets(4001, Arrivals(rate, burstiness), seed=1)
    assert offsets[0] == 0.0
    gaps = np.diff(offsets)
    assert np.all(gaps >= 0)
    fit = stats.kstest(gaps, stats.gamma(a=burstiness, scale=1 / (rate * burstiness)).cdf)
    assert fit.pvalue > 1e-3
    assert abs(gaps.mean() * rate - 1) < 0.06
    assert abs(gaps.std() / gaps.mean() - 1 / math.sqrt(burstiness)) < 0.1


def test_offsets_are_seeded():
    a = arrival_offsets(20, Arrivals(3.0), seed=7)
    assert a == arrival_offsets(20, Arrivals(3.0), seed=7)
    assert a != arrival_offsets(20, Arrivals(3.0), seed=8)


def test_a_ramp_up_starts_at_a_tenth_of_the_rate():
    """A Poisson load with a ramp is a Poisson process of rate r(t) = rate * (0.1 + 0.9
    t/R) for t < R: mapped through its cumulative rate (written out here) its arrivals
    are a unit-rate Poisson process."""
    rate, ramp = 10.0, 30.0
    offsets = np.array(arrival_offsets(3000, Arrivals(rate, ramp_up=ramp), seed=2))

    def cumulative(t: np.ndarray) -> np.ndarray:
        inside = rate * (0.1 * t + 0.9 * t * t / (2 * ramp))
        return np.where(t < ramp, inside, rate * 0.55 * ramp + rate * (t - ramp))

    unit_gaps = np.diff(cumulative(offsets))
    assert stats.kstest(unit_gaps, "expon").pvalue > 1e-3
    first = np.sum(offsets < 3.0)  # expected 10 * (0.3 + 0.135) = 4.35
    last = np.sum((offsets >= ramp) & (offsets < ramp + 30))  # expected 300
    assert first < 15 and 240 < last < 360
    assert np.sum(offsets < ramp) == pytest.approx(0.55 * rate * ramp, rel=0.25)


def test_a_ramp_up_keeps_the_same_gaps_in_mean_units():
    """Without ramp and with it, the same draws: after the ramp, the same arrivals,
    shifted by the time the ramp lost."""
    plain = np.array(arrival_offsets(200, Arrivals(5.0), seed=3))
    ramped = np.array(arrival_offsets(200, Arrivals(5.0, ramp_up=4.0), seed=3))
    after = plain * 5.0 >= 0.55 * 5.0 * 4.0
    assert np.allclose(ramped[after] - plain[after], 4.0 - 0.55 * 4.0)
    assert np.all(ramped[~after] >= plain[~after])


TOKENS = list(range(10, 60))


def test_warmup_requests_come_first_and_are_marked():
    planned = plan_requests(5, 2, Lengths.parse("8"), Lengths.parse("uniform:2-4"),
                            TOKENS, shared_prefix=0, seed=0)
    assert [p.warmup for p in planned] == [True] * 2 + [False] * 5
    assert all(len(p.prompt_ids) == 8 and 2 <= p.max_tokens <= 4 for p in planned)
    assert all(set(p.prompt_ids) <= set(TOKENS) for p in planned)
    assert len({p.prompt_ids for p in planned}) == 7


def test_measured_requests_do_not_depend_on_the_warmup():
    args = (Lengths.parse("uniform:4-20"), Lengths.parse("normal:16,4"), TOKENS)
    one = plan_requests(6, 0, *args, shared_prefix=3, seed=11)
    two = plan_requests(6, 4, *args, shared_prefix=3, seed=11)
    assert [p for p in two if not p.warmup] == one
    assert plan_requests(6, 0, *args, shared_prefix=3, seed=12) != one


def test_a_shared_prefix_starts_every_prompt():
    planned = plan_requests(40, 3, Lengths.parse("uniform:2-30"), Lengths.parse("4"),
                            TOKENS, shared_prefix=5, seed=4)
    prefix = planned[0].prompt_ids[:5]
    assert all(p.prompt_ids[:5] == prefix for p in planned)
    # each prompt has at least one token of its own, then is as long as drawn
    assert min(len(p.prompt_ids) for p in planned) == 6
    assert max(len(p.prompt_ids) for p in planned) > 20
    assert len({p.prompt_ids[5:] for p in planned}) == len(planned)


def test_bad_plans_are_refused():
    fixed = Lengths.parse("8")
    with pytest.raises(ValueError, match="no room"):
        plan_requests(1, 0, fixed, fixed, TOKENS, shared_prefix=8, seed=0)
    with pytest.raises(ValueError, match="token ids"):
        plan_requests(1, 0, fixed, fixed, [], shared_prefix=0, seed=0)
    with pytest.raises(ValueError):
        plan_requests(-1, 0, fixed, fixed, TOKENS, shared_prefix=0, seed=0)
