"""The adaptive repetition logic, driven by a seeded fake clock (no device, no sleeping)."""

import pytest

from accelbench.core.timing import (
    STOP_CONVERGED,
    STOP_SAMPLES,
    STOP_TIME,
    TimingPolicy,
    measure,
    noise_warnings,
)
from fakes import FakeClock


def test_quiet_work_converges_to_the_true_time():
    clock = FakeClock(cost=2e-3, noise=0.002, seed=1)
    policy = TimingPolicy(target_rel_ci=0.01, max_time=10.0)
    timing = measure(lambda: None, clock, policy)
    summary = timing.summary()
    assert timing.stop_reason == STOP_CONVERGED
    assert summary.rel_ci <= 0.01
    assert summary.median == pytest.approx(2e-3, rel=0.01)
    assert noise_warnings(timing, policy) == ()


def test_blocks_are_sized_to_the_block_time():
    clock = FakeClock(cost=1e-6)
    timing = measure(lambda: None, clock, TimingPolicy(block_time=0.01))
    assert timing.number == 10_000
    assert all(n == 10_000 for n in clock.blocks[timing.warmup_calls :])
    assert timing.samples[0] == pytest.approx(1e-6)


def test_slow_first_calls_are_warm_up_and_do_not_reach_the_samples():
    clock = FakeClock(cost=lambda i: 0.5 if i < 3 else 1e-3, seed=2)
    policy = TimingPolicy(warmup_time=0.01, min_warmup_calls=5)
    timing = measure(lambda: None, clock, policy)
    assert timing.warmup_calls >= 5
    assert max(timing.samples) == pytest.approx(1e-3)


def test_noisy_work_stops_at_the_time_budget_and_says_so():
    clock = FakeClock(cost=1e-2, noise=0.3, seed=3)
    policy = TimingPolicy(target_rel_ci=0.001, max_time=1.0)
    timing = measure(lambda: None, clock, policy)
    assert timing.stop_reason == STOP_TIME
    # The budget is honoured to within one sample.
    assert sum(s * timing.number for s in timing.samples) < 1.0 + 0.1
    warnings = noise_warnings(timing, policy)
    assert any("did not reach" in w for w in warnings)
    assert any("IQR" in w for w in warnings)


def test_sample_cap_bounds_the_work():
    clock = FakeClock(cost=1e-3, noise=0.2, seed=4)
    policy = TimingPolicy(target_rel_ci=1e-6, max_samples=12, max_time=1e9)
    timing = measure(lambda: None, clock, policy)
    assert timing.stop_reason == STOP_SAMPLES
    assert len(timing.samples) == 12


def test_every_sample_is_kept_raw():
    clock = FakeClock(cost=1e-3, noise=0.05, seed=5)
    timing = measure(lambda: None, clock, TimingPolicy(max_time=0.5))
    sampled = clock.blocks[timing.warmup_calls :]
    assert len(timing.samples) == len(sampled)


def test_cache_flush_runs_before_every_sample_with_one_call_each():
    clock = FakeClock(cost=1e-3, noise=0.01, seed=6)
    flushes = []
    policy = TimingPolicy(flush_cache=True, max_time=0.5)
    timing = measure(lambda: None, clock, policy, flush=lambda: flushes.append(1))
    assert timing.number == 1
    assert len(flushes) == len(timing.samples)


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError):
        TimingPolicy(confidence=1.5)
    with pytest.raises(ValueError):
        TimingPolicy(max_time=0)
    with pytest.raises(ValueError):
        TimingPolicy(min_samples=10, max_samples=5)


def test_fn_really_runs_the_counted_number_of_times():
    calls = []
    clock = FakeClock(cost=1e-3)
    timing = measure(lambda: calls.append(1), clock, TimingPolicy(max_time=0.1))
    assert len(calls) == clock.calls == timing.warmup_calls + timing.number * len(timing.samples)
