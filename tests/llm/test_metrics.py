"""Serving figures from request records: exact values from hand-made records (vLLM's
definitions), the SLO's text, failures, and intervals that cover: percentiles by order
statistics (checked against core.stats.median_ci and by seeded simulation, independent
and correlated), means and rates."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from accelbench.benchmarks.llm.metrics import (
    SLO,
    clopper_pearson,
    effective_count,
    figures,
    mean_interval,
    percentile_interval,
)
from accelbench.benchmarks.llm.records import RequestRecord
from accelbench.core.measurement import Figure
from accelbench.core.stats import median_ci


def _record(index: int, sent: float, ttft: float, gaps: list[float], *, out: int | None = None,
            prompt: int | None = 10, warmup: bool = False, error: str | None = None,
            tail: float = 0.0) -> RequestRecord:
    first = sent + ttft
    chunks = [first]
    for g in gaps:
        chunks.append(chunks[-1] + g)
    return RequestRecord(index, warmup, sent, sent, tuple(chunks), chunks[-1] + tail,
                         prompt, len(chunks) if out is None else out, error=error)


def _by_name(figs: list[Figure]) -> dict[str, Figure]:
    return {f.name: f for f in figs}


def test_figures_follow_vllm_definitions_exactly() -> None:
    records = [
        _record(0, 0.0, 0.1, [0.02, 0.04], tail=0.0),  # 3 tokens, e2e 0.16
        _record(1, 1.0, 0.3, [0.05], out=2),  # e2e 0.35
        _record(2, 0.5, 0.2, [], out=1),  # one token: no TPOT, no ITL
        _record(9, -5.0, 9.0, [9.0], warmup=True),  # warm-up: not in any figure
    ]
    f = _by_name(figures(records, slo=SLO(ttft=0.25, tpot=0.1), devices=2, energy_j=12.0))
    assert f["ttft_mean"].value == pytest.approx((0.1 + 0.3 + 0.2) / 3)
    assert f["ttft_p50"].value == pytest.approx(0.2)
    # TPOT per request: (e2e - ttft) / (out - 1).
    assert f["tpot_mean"].value == pytest.approx((0.06 / 2 + 0.05 / 1) / 2)
    # ITL: every gap of every request, pooled.
    assert f["itl_mean"].value == pytest.approx((0.02 + 0.04 + 0.05) / 3)
    assert f["itl_p50"].value == pytest.approx(0.04)
    assert f["e2e_p50"].value == pytest.approx(0.2)
    window = 1.35  # first send 0.0 to last end 1.35
    assert f["requests"].value == pytest.approx(3 / window)
    assert f["output_tokens"].value == pytest.approx(6 / window)
    assert f["total_tokens"].value == pytest.approx(36 / window)
    assert f["output_tokens_per_device"].value == pytest.approx(3 / window)
    assert f["tokens_per_user"].value == pytest.approx((2 / 0.06 + 1 / 0.05) / 2)
    # Good: request 0 (ttft 0.1, tpot 0.03) and request 2 (ttft 0.2, one token: tpot 0);
    # request 1 misses its ttft bound.
    assert f["goodput"].value == pytest.approx(2 / window)
    assert f["goodput_tokens"].value == pytest.approx(4 / window)
    assert f["slo_met"].value == pytest.approx(200 / 3)
    assert f["failed"].value == 0
    assert f["energy_per_token"].value == pytest.approx(2.0)
    assert next(iter(f)) == "output_tokens"  # the headline
    # Three requests: no interval anywhere.
    assert all(x.low is None and x.high is None for x in f.values())
    assert not f["ttft_p99"].higher_is_better and f["requests"].higher_is_better


def test_failures_count_and_latency_is_over_completed_requests() -> None:
    records = [_record(0, 0.0, 0.1, [0.01]),
               RequestRecord(1, False, 0.1, 0.1, (), 0.2, error="HTTP 503: busy"),
               RequestRecord(2, False, 0.2, 0.2, (0.3,), None),  # never ended
               RequestRecord(3, False, 0.3, 0.3, (), 0.4)]  # ended with no text
    f = _by_name(figures(records, slo=SLO(ttft=1.0)))
    assert f["failed"].value == 3
    assert f["ttft_mean"].value == pytest.approx(0.1)
    assert f["slo_met"].value == pytest.approx(25.0)  # of the measured, failed included


def test_every_request_failed_names_the_most_common_error() -> None:
    records = [RequestRecord(i, False, 0.0, 0.0, (), None, error=e)
               for i, e in enumerate(["refused", "stall", "stall"])]
    with pytest.raises(ValueError, match=r"^every request failed: stall$"):
        figures(records, slo=SLO())
    with pytest.raises(ValueError, match="no measured request"):
        figures([_record(0, 0.0, 0.1, [], warmup=True)], slo=SLO())


def test_without_counts_or_bounds_the_figures_that_need_them_are_left_out() -> None:
    records = [RequestRecord(0, False, 0.0, 0.0, (0.1, 0.2), 0.2, None, None,
                             counted_by="none")]
    names = [f.name for f in figures(records, slo=SLO(), energy_j=5.0)]
    assert names[0] == "requests"
    for absent in ("output_tokens", "total_tokens", "tpot_mean", "tokens_per_user",
                   "goodput", "slo_met", "energy_per_token"):
        assert absent not in names
    assert "itl_p50" in names


def test_a_slo_bound_on_tpot_is_not_met_without_a_token_count() -> None:
    assert not SLO(tpot=1.0).met(0.1, None, 0.2)
    assert SLO(ttft=1.0).met(0.1, None, 0.2)


@pytest.mark.parametrize(("text", "slo"), [
    ("ttft:500ms,tpot:50ms", SLO(ttft=0.5, tpot=0.05)),
    ("e2e:2s", SLO(e2e=2.0)),
    (" TTFT: 250us ", SLO(ttft=250e-6)),
    ("", SLO()), ("none", SLO()),
])
def test_slo_parse_and_its_text_read_back(text: str, slo: SLO) -> None:
    assert SLO.parse(text) == slo
    assert SLO.parse(str(slo)) == slo
    assert SLO.from_dict(slo.to_dict()) == slo


@pytest.mark.parametrize("text", ["ttft:500", "ttft=500ms", "latency:1s", "ttft:1s,ttft:2s",
                                  "ttft:0ms", "ttft:-1s", "ttft:fast"])
def test_slo_parse_refuses_with_one_line(text: str) -> None:
    with pytest.raises(ValueError) as e:
        SLO.parse(text)
    assert "\n" not in str(e.value) and "SLO" in str(e.value)


# -- intervals ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [10, 31, 100, 1000])
def test_the_median_confidence_interval_is_core_stats_median_ci(n: int) -> None:
    x = np.random.default_rng(n).lognormal(size=n)
    assert percentile_interval(x, 0.5, ordered=False, repeat=False) == median_ci(x)[:2]


def test_too_few_values_for_an_extreme_percentile_give_no_interval() -> None:
    def p99(n: int, **how: bool) -> tuple[float | None, float | None]:
        return percentile_interval(np.arange(n, dtype=float), 0.99, ordered=False, **how)

    assert p99(50) == (None, None)
    # A repeat run's p99 needs twice the values a confidence interval does.
    assert p99(400) == (None, None)
    assert p99(400, repeat=False)[0] is not None
    low, high = p99(2000)
    assert low is not None and high is not None and low < 1980 <= high
    # Values that climb in the order they came are worth few: no interval.
    assert percentile_interval(np.arange(2000, dtype=float), 0.99) == (None, None)


Draw = Callable[[np.random.Generator], np.ndarray]


def _coverage(trials: int, draw: Draw, q: float, *, ordered: bool = True,
              truth: float | None = None) -> float:
    """How often the interval of a seeded run holds the percentile of the next run (or
    `truth`, for a confidence interval)."""
    hits = 0
    for t in range(trials):
        rng = np.random.default_rng(t)
        x, again = draw(rng), draw(rng)
        low, high = percentile_interval(x, q, ordered=ordered, repeat=truth is None)
        target = float(np.percentile(again, 100 * q)) if truth is None else truth
        hits += low is not None and high is not None and low <= target <= high
    return hits / trials


def _lognormal(rng: np.random.Generator) -> np.ndarray:
    return rng.lognormal(size=120)


@pytest.mark.parametrize("q", [0.5, 0.9])
def test_percentile_intervals_hold_a_repeat_runs_percentile(q: float) -> None:
    assert _coverage(500, _lognormal, q, ordered=False) >= 0.93
    # Independent values read in order keep (nearly) their count.
    assert _coverage(500, _lognormal, q) >= 0.93
    # As a confidence interval, they hold the true percentile.
    truth = float(np.exp(1.2815515655446004)) if q == 0.9 else 1.0
    assert _coverage(500, _lognormal, q, truth=truth) >= 0.93


def test_percentile_intervals_hold_when_values_are_alike_within_requests() -> None:
    """Pooled gaps of requests whose own speed varies (every gap of a request alike):
    ranks of independent values would hold a repeat run's median far less than 95% of
    the time; their autocorrelation in the order they came keeps it."""
    requests, gaps = 60, 20

    def draw(rng: np.random.Generator) -> np.ndarray:
        speed = rng.lognormal(size=requests)
        return np.repeat(speed, gaps) * rng.lognormal(sigma=0.05, size=requests * gaps)

    assert _coverage(300, draw, 0.5, ordered=False) < 0.6
    assert _coverage(300, draw, 0.5) >= 0.9


def test_the_effective_count_is_the_count_for_independent_values_at_most() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=500)
    assert 400 <= effective_count(x, 0.5) <= 500
    assert effective_count(x, 0.5, ordered=False) == 500
    alike = np.repeat(rng.normal(size=10), 50)  # ten runs of one value each
    assert effective_count(alike + rng.normal(scale=1e-3, size=500), 0.5) < 40


def test_mean_intervals_hold_a_repeat_runs_mean() -> None:
    independent = alike = 0
    trials = 400
    for t in range(trials):
        rng = np.random.default_rng(t)
        x, again = rng.exponential(size=200), rng.exponential(size=200)
        low, high = mean_interval(x)
        assert low is not None and high is not None
        independent += low <= float(np.mean(again)) <= high

        y, again = (np.repeat(rng.normal(size=10), 20) + rng.normal(scale=0.1, size=200)
                    for _ in range(2))
        low, high = mean_interval(y)
        assert low is not None and high is not None
        alike += low <= float(np.mean(again)) <= high
    assert independent / trials >= 0.93
    assert alike / trials >= 0.9


def _queue(rng: np.random.Generator, n: int, load: float) -> np.ndarray:
    """The times in system of n requests of a single FIFO server at this utilisation
    (Poisson arrivals, exponential service of mean 1), in the order they came."""
    gaps, service = rng.exponential(1 / load, size=n), rng.exponential(size=n)
    out, wait = np.empty(n), 0.0
    for i in range(n):
        wait = max(wait - gaps[i], 0.0) if i else 0.0
        out[i] = wait + service[i]
        wait = out[i]
    return out


def test_mean_intervals_hold_a_repeat_runs_mean_through_a_queue() -> None:
    """A queue makes neighbouring requests alike: at half the server's capacity, over
    1000 requests, the autocorrelation time keeps the interval honest; values taken as
    independent would not."""
    hits = naive = 0
    trials = 200
    for t in range(trials):
        rng = np.random.default_rng(t)
        x, again = _queue(rng, 1000, 0.5), _queue(rng, 1000, 0.5)
        target = float(np.mean(again))
        low, high = mean_interval(x)
        assert low is not None and high is not None
        hits += low <= target <= high
        low, high = mean_interval(x, ordered=False)
        assert low is not None and high is not None
        naive += low <= target <= high
    assert hits / trials >= 0.9
    assert naive / trials < 0.8


def _poisson_load(rng: np.random.Generator, rate: float = 20.0, n: int = 200
                  ) -> list[RequestRecord]:
    sends = np.cumsum(rng.exponential(1 / rate, size=n))
    return [_record(i, float(s), float(rng.exponential(0.05)), [0.001] * 3)
            for i, s in enumerate(sends)]


def test_rate_intervals_hold_a_repeat_runs_rate() -> None:
    hits = 0
    trials = 150
    for t in range(trials):
        rng = np.random.default_rng(t)
        records = _poisson_load(rng)
        f = _by_name(figures(records, slo=SLO()))["requests"]
        last = max(r.end or 0.0 for r in records)
        # Its requests over its window, from the first send to the last end.
        assert f.value == pytest.approx(200 / (last - records[0].sent))
        again = _by_name(figures(_poisson_load(rng), slo=SLO()))["requests"]
        assert f.low is not None and f.high is not None
        hits += f.low <= again.value <= f.high
    assert hits / trials >= 0.93


def test_clopper_pearson_matches_scipy_binomtest() -> None:
    from scipy.stats import binomtest

    for k, n in ((0, 10), (7, 10), (10, 10), (93, 120)):
        ci = binomtest(k, n).proportion_ci(0.95, method="exact")
        low, high = clopper_pearson(k, n)
        assert low == pytest.approx(ci.low) and high == pytest.approx(ci.high)
        wide_low, wide_high = clopper_pearson(k, n, repeat=True)
        assert low is not None and high is not None
        assert wide_low is not None and wide_high is not None
        assert wide_low <= low and high <= wide_high


def test_the_intervals_distributions_are_scipy_stats_ones() -> None:
    """Taken from scipy.special (scipy.stats costs each process its import): the same
    quantiles as scipy.stats' t, binomial and beta distributions."""
    from scipy import stats

    x = np.random.default_rng(3).normal(5.0, 1.0, 40)
    low, high = mean_interval(x, 0.95, ordered=False, repeat=False)
    t_low, t_high = stats.t.interval(0.95, 39, loc=float(np.mean(x)), scale=stats.sem(x))
    assert low == pytest.approx(t_low, rel=1e-12) and high == pytest.approx(t_high, rel=1e-12)
    # A repeat run's share: half as many trials, fractional counts.
    low, high = clopper_pearson(7, 21, repeat=True)
    assert low == pytest.approx(stats.beta.ppf(0.025, 3.5, 8.0), rel=1e-9)
    assert high == pytest.approx(stats.beta.ppf(0.975, 4.5, 7.0), rel=1e-9)
    # The order statistics of a percentile: the binomial CDF's ranks, scipy's.
    m, q, alpha = 200, 0.9, 0.05
    cdf = stats.binom.cdf(np.arange(m + 1), m, q)
    r = int(np.searchsorted(cdf, alpha / 2.0, side="right"))
    s = int(np.searchsorted(cdf, 1.0 - alpha / 2.0, side="left")) + 1
    values = np.arange(1.0, m + 1.0)
    assert percentile_interval(values, q, ordered=False, repeat=False) == (r, s)


def test_figures_of_many_requests_state_intervals_that_hold_their_value() -> None:
    rng = np.random.default_rng(7)
    records = [_record(i, i * 0.01, float(rng.exponential(0.1)),
                       list(rng.exponential(0.02, size=15))) for i in range(1000)]
    for f in figures(records, slo=SLO(ttft=0.2)):
        if f.name == "failed":
            continue
        assert f.low is not None and f.high is not None, f.name
        assert f.low <= f.value + 1e-12 and f.value <= f.high + 1e-12, f.name
        assert not math.isnan(f.low)
