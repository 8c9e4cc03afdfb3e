"""Warm-up lasts until the samples are steady: a step or a drift in the samples extends
it, and a case that never settles says so. Driven by a seeded fake clock."""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.core.stats import settling_point
from accelbench.core.timing import MAX_EXTENSIONS, TimingPolicy, measure, noise_warnings
from fakes import FakeClock

POLICY = TimingPolicy(warmup_time=0.0, min_warmup_calls=2, block_time=1e-9, min_samples=5,
                      max_samples=400, max_time=2.0, target_rel_ci=0.005)


def test_two_regimes_inside_one_case_keep_only_the_settled_one() -> None:
    # 13 ms per call while the process settles, then 10.8 ms: the warm-up by time ended
    # too early, as seen on a real GEMM case.
    clock = FakeClock(lambda i: 13e-3 if i < 25 else 10.8e-3, noise=0.02, seed=3)
    timing = measure(lambda: None, clock, POLICY)
    assert timing.settled
    assert float(np.median(timing.samples)) == pytest.approx(10.8e-3, rel=0.02)
    assert timing.warmup_calls >= 25  # the slow regime was counted as warm-up
    assert not any(w.startswith("unsettled") for w in noise_warnings(timing, POLICY))


@pytest.mark.slow
def test_a_case_that_keeps_drifting_says_it_never_settled() -> None:
    clock = FakeClock(lambda i: 1e-3 * (1.0 + 0.01 * i), noise=0.005, seed=1)
    timing = measure(lambda: None, clock, POLICY)
    assert not timing.settled
    warnings = noise_warnings(timing, POLICY)
    assert any(w.startswith(f"unsettled: the samples still stepped or drifted after "
                            f"{MAX_EXTENSIONS}") for w in warnings)


@pytest.mark.parametrize("seed", range(12))
def test_steady_noise_is_not_taken_for_a_change(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for shape in (rng.normal(1.0, 0.05, 120), 1.0 + rng.exponential(0.05, 120),
                  rng.lognormal(0.0, 0.1, 60)):
        assert settling_point(shape) is None


def test_a_step_is_found_where_it_is() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(1.3, 0.01, 30), rng.normal(1.0, 0.01, 90)])
    assert settling_point(x) == pytest.approx(30, abs=2)
    assert settling_point(x[30:]) is None


@pytest.mark.slow
def test_extensions_stay_within_twice_the_sampling_budget() -> None:
    policy = TimingPolicy(warmup_time=0.0, min_warmup_calls=2, block_time=1e-9,
                          min_samples=5, max_samples=100_000, max_time=1.0,
                          target_rel_ci=1e-9)
    clock = FakeClock(lambda i: 1e-3 * (1.0 + 0.001 * i), noise=0.005, seed=2)
    timing = measure(lambda: None, clock, policy)
    assert not timing.settled
    # Warm-up took a few calls; sampling, extensions included, at most twice its budget
    # plus the sample that crossed it.
    assert clock.now() <= 2 * policy.max_time + 0.1


def test_zero_times_neither_crash_nor_count_as_a_change() -> None:
    assert settling_point([0.0] * 20) is None
    # Times that drop to zero are a change, found without dividing by the zero.
    assert settling_point([1e-6] * 10 + [0.0] * 10) in (None, 10)
