"""The adaptive repetition logic, driven by a seeded fake clock (no device, no sleeping)."""

import pytest

from accelbench.core.timing import (
    STOP_CONVERGED,
    STOP_SAMPLES,
    STOP_TIME,
    Timing,
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


class ThreadRanks:
    """Ranks as threads: a real exchange of values through a barrier, as a group would."""

    def __init__(self, world_size: int) -> None:
        import threading

        self._barrier = threading.Barrier(world_size)
        self._values = [0.0] * world_size
        self.world_size = world_size

    def coordinator(self, rank: int):
        ranks = self

        class Coordinator:
            def _exchange(self, value):
                ranks._barrier.wait()
                ranks._values[rank] = value
                ranks._barrier.wait()
                seen = list(ranks._values)
                ranks._barrier.wait()
                return seen

            def slowest(self, seconds):
                return max(self._exchange(seconds))

            def agree(self, value):
                return self._exchange(value)[0]

            def sampling(self):
                pass

        return Coordinator()


def test_ranks_agree_on_every_decision_and_take_the_slowest_rank():
    import threading

    ranks = ThreadRanks(2)
    # Rank 1 is twice as slow and noisier: left alone it would stop at another time.
    clocks = [FakeClock(cost=1e-3, noise=0.001, seed=1), FakeClock(cost=2e-3, noise=0.05, seed=2)]
    results: list[Timing | None] = [None, None]
    policy = TimingPolicy(max_time=0.5)

    def run(rank):
        results[rank] = measure(lambda: None, clocks[rank], policy,
                                coordinator=ranks.coordinator(rank))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    a, b = results
    assert a is not None and b is not None
    assert a.samples == b.samples and a.number == b.number
    assert a.warmup_calls == b.warmup_calls and a.stop_reason == b.stop_reason
    assert clocks[0].calls == clocks[1].calls
    # Every sample is at least the slow rank's nominal time.
    assert min(a.samples) > 1.6e-3
