"""How sure `isolate` is: passes until the naming holds still, and what it may conclude.

The simulated host is noisy the way a shared one is: every pair's figure moves from pass
to pass by a lognormal factor, and now and then a pass of one pair is disturbed (twice as
slow), so single passes name links that are not slow. Whatever the noise, two runs must
never name two different things conclusively: a run that cannot tell says so. The
simulations (hundreds of seeded runs each) are in the slow tier."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from accelbench.benchmarks.isolate.schedule import NODE, Pair
from accelbench.benchmarks.isolate.settle import (
    BUDGET,
    MAX_PASSES,
    SETTLED,
    Settled,
    Settling,
    agreed,
    next_step,
    repeat,
    settle,
)
from accelbench.benchmarks.isolate.verdict import PairFigures, Verdict, judge, pair_figures

NBYTES = 1 << 20
LATENCY_S, P2P_S, ALLREDUCE_S = 20e-6, 1e-3, 1.5e-3


def test_the_last_passes_must_name_the_same() -> None:
    assert agreed([["a"], ["b"], ["b"], ["b"]], 3)
    assert agreed([[], [], []], 3)
    assert not agreed([["b"], ["b"]], 3)
    assert not agreed([["b"], ["a", "b"], ["b"]], 3)
    assert agreed([["a", "b"], ["b", "a"]], 2)  # the same names in another order


@pytest.mark.parametrize(("passes", "elapsed", "expected"), [
    ([["x"], ["x"], ["x"]], 10.0, SETTLED),
    ([["x"], [], ["x"]], 10.0, None),
    ([["x"], []], 59.0, None),  # another 29.5 s pass ends at 88.5 s, within 90 s
    ([["x"], []], 61.0, BUDGET),  # another would end at 91.5 s
    ([["x"]], 100.0, BUDGET),  # one pass is always made, even past the budget
    ([[str(i)] for i in range(5)], 1.0, MAX_PASSES),
])
def test_passes_stop_when_settled_or_out_of_time_or_passes(passes, elapsed, expected) -> None:
    assert next_step(passes, elapsed, Settling(3, 5, 90.0)) == expected


def test_repeat_makes_passes_until_one_rule_stops_them() -> None:
    answers = iter([(["n1"], 1.0), ([], 2.0), (["n2"], 3.0), (["n2"], 4.0), (["n2"], 5.0),
                    (["never"], 6.0)])
    named, stopped = repeat(lambda: next(answers), Settling(3, 10, 100.0))
    assert named == [["n1"], [], ["n2"], ["n2"], ["n2"]] and stopped == SETTLED


def test_conclusive_only_when_the_passes_settled_on_what_the_pooled_figures_name() -> None:
    passes = [["n1"], ["n2"], ["n2"], ["n2"]]
    sure = settle(passes, ["n2"], SETTLED, 3)
    assert sure.conclusive and sure.named_in("n2") == 3 and sure.named_in("n1") == 1
    assert "conclusive: the last 3 of 4 passes named the same" in sure.describe()
    assert not settle(passes, ["n1", "n2"], SETTLED, 3).conclusive
    late = settle([["n1"], ["n2"]], ["n2"], BUDGET, 3)
    assert not late.conclusive
    assert late.describe() == ("inconclusive: the time budget ended before 3 passes in a row "
                               "named the same (pass 1: n1; pass 2: n2)")
    assert Settled.from_dict(late.to_dict()) == late
    with pytest.raises(ValueError, match="unknown reason"):
        Settled.from_dict({**late.to_dict(), "stopped": "bored"})
    with pytest.raises(ValueError):
        Settling(agree=0)


def test_a_verdict_keeps_its_passes_and_reads_one_stored_before_them() -> None:
    figures = [pair_figures(Pair(NODE, a, b, (i, j)), [LATENCY_S], [P2P_S], [ALLREDUCE_S],
                            NBYTES, 1.0)
               for (i, a), (j, b) in itertools.combinations(enumerate("xyz"), 2)]
    verdict = judge(figures)
    settled = settle([[], [], []], [], SETTLED, 3)
    stored = Verdict(verdict.fabrics, settled=settled).to_dict()
    assert stored["format_version"] == 2
    assert Verdict.from_dict(stored).settled == settled
    older = {k: v for k, v in stored.items() if k != "settled"} | {"format_version": 1}
    assert Verdict.from_dict(older).settled is None and Verdict.from_dict(older).conclusive


# --- the simulated noisy host ------------------------------------------------------------

MEMBERS = [f"n{i}" for i in range(4)]
PAIRS = [Pair(NODE, MEMBERS[i], MEMBERS[j], (i, j))
         for i, j in itertools.combinations(range(len(MEMBERS)), 2)]
SAMPLES = 5


def simulated_run(rng: random.Random, slow: Callable[[Pair], float], noise: float,
                  burst: float, settling: Settling) -> tuple[list[str], bool]:
    """One `isolate` run on the simulated host, pooled and settled as `pairs.measure`
    does: what it named, and whether it is sure."""
    samples: dict[Pair, dict[str, list[float]]] = {p: {"latency": [], "p2p": [], "ar": []}
                                                   for p in PAIRS}
    clock = itertools.count(1)
    by_pass: list[list[PairFigures]] = []

    def one_pass() -> tuple[list[str], float]:
        figures = []
        for pair in PAIRS:
            factor = slow(pair) * rng.lognormvariate(0.0, noise)
            if rng.random() < burst:
                factor *= 2.0  # a neighbour woke up during this pair's turn
            taken = {name: [base * factor * rng.lognormvariate(0.0, 0.03)
                            for _ in range(SAMPLES)]
                     for name, base in (("latency", LATENCY_S), ("p2p", P2P_S),
                                        ("ar", ALLREDUCE_S))}
            for name, values in taken.items():
                samples[pair][name] += values
            figures.append(pair_figures(pair, taken["latency"], taken["p2p"], taken["ar"],
                                        NBYTES, 1.0))
        by_pass.append(figures)
        return judge(figures).names(), float(next(clock))

    named, stopped = repeat(one_pass, settling)
    pooled = judge([pair_figures(p, s["latency"], s["p2p"], s["ar"], NBYTES, 1.0)
                    for p, s in samples.items()], passes=by_pass)
    outcome = settle(named, pooled.names(), stopped, settling.agree, pooled.blind())
    return pooled.names(), outcome.conclusive


def no_slow_link(pair: Pair) -> float:
    return 1.0


def slow_link(pair: Pair) -> float:
    return 3.0 if (pair.a, pair.b) == ("n1", "n2") else 1.0


NOISE = [0.05, 0.3, 0.5]  # lognormal sigma of a pair's figure from pass to pass
RUNS = 100


@pytest.mark.slow
@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("burst", [0.0, 0.02])
def test_two_runs_never_name_two_things_without_one_saying_it_is_not_sure(noise, burst
                                                                          ) -> None:
    rng = random.Random(f"isolate-{noise}-{burst}")
    sure = set()
    single_pass = set()
    for _ in range(RUNS):
        named, conclusive = simulated_run(rng, no_slow_link, noise, burst,
                                          Settling(3, 10, 1e9))
        if conclusive:
            sure.add(tuple(named))
        once, _ = simulated_run(rng, no_slow_link, noise, burst, Settling(1, 1, 1e9))
        single_pass.add(tuple(once))
    # Nothing is slow: a sure run names nothing, whatever single passes named.
    assert sure <= {()}
    if noise >= 0.3:
        assert len(single_pass) > 2  # one pass alone would have named several things


@pytest.mark.slow
@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("burst", [0.0, 0.02])
def test_a_slow_link_is_never_missed_for_sure_and_named_when_the_noise_allows(noise, burst
                                                                              ) -> None:
    rng = random.Random(f"slow-{noise}-{burst}")
    outcomes = [simulated_run(rng, slow_link, noise, burst, Settling(3, 10, 1e9))
                for _ in range(RUNS)]
    sure = [tuple(named) for named, conclusive in outcomes if conclusive]
    # Never "nothing" for sure; the link, or now and then one of its two ends (with four
    # nodes, an end whose other pairs were slow in most passes is a slow node).
    assert set(sure) <= {("n1-n2",), ("n1",), ("n2",)}
    if noise <= 0.05:  # a quiet host: the link itself, for sure, nearly every time
        assert sure.count(("n1-n2",)) >= 0.95 * RUNS


@pytest.mark.slow
def test_a_pair_disturbed_in_most_passes_is_named_rarely_and_never_for_nothing() -> None:
    """A harsh host: one pair in ten disturbed each pass. Three passes in a row that
    disturb the same pair do name it (it was slow then), in about 1% of runs."""
    rng = random.Random("bursts")
    outcomes = [simulated_run(rng, no_slow_link, 0.05, 0.1, Settling(3, 10, 1e9))
                for _ in range(RUNS)]
    named = [n for n, conclusive in outcomes if conclusive and n]
    assert len(named) <= 0.02 * RUNS
    assert all(len(n) == 1 and "-" in n[0] for n in named)  # one link at a time
