"""The timing core's device clock on a real GPU: CUDA/HIP events agree with wall time."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gpu

SLEEP_S = 0.02  # each timed call keeps the GPU busy about this long


def sleep_cycles(torch, seconds: float) -> int:
    """GPU clock cycles that torch.cuda._sleep spins for about `seconds`, measured on the
    host (its counter is clock64 on CUDA, a shader counter on ROCm, at a rate not known
    here), after enough spinning that the GPU's clocks have left their idle state."""
    probe = 10_000_000

    def spin(times: int) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(times):
            torch.cuda._sleep(probe)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    began = time.perf_counter()
    while time.perf_counter() - began < 0.2:
        spin(1)
    return max(1, int(probe * 3 * seconds / spin(3)))


def wall_and_device(torch, clock, fn, number: int) -> tuple[float, float]:
    """(host seconds around a synchronised call of clock.time, the seconds it reported)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    on_device = clock.time(fn, number)
    torch.cuda.synchronize()
    return time.perf_counter() - start, on_device


def test_the_event_clock_agrees_with_wall_time_on_a_gpu_sleep(gpu):
    import torch

    from accelbench.core.timing import DeviceEventClock
    from accelbench.runner.devices import make_clock

    clock = make_clock(gpu.device)  # what every GPU case is timed with
    assert isinstance(clock, DeviceEventClock)
    assert torch.cuda.current_device() == (gpu.device.index or 0)
    cycles = sleep_cycles(torch, SLEEP_S)

    def sleep() -> None:
        torch.cuda._sleep(cycles)

    measured = {}
    for number in (1, 5):
        wall, on_device = wall_and_device(torch, clock, sleep, number)
        # The events lie inside the host's window, and the sleep fills nearly all of it.
        assert 0.5 * wall <= on_device <= 1.02 * wall + 1e-3, (number, wall, on_device)
        measured[number] = on_device
    # Five sleeps take about five times one.
    assert 3.0 <= measured[5] / measured[1] <= 7.0, measured


def test_measure_on_the_event_clock_reports_the_time_per_call(gpu):
    import torch

    from accelbench.core.timing import TimingPolicy, measure
    from accelbench.runner.devices import make_clock

    clock = make_clock(gpu.device)
    cycles = sleep_cycles(torch, SLEEP_S)

    def sleep() -> None:
        torch.cuda._sleep(cycles)

    before, _ = wall_and_device(torch, clock, sleep, 4)
    timing = measure(sleep, clock, TimingPolicy(max_time=0.3, warmup_time=0.0, min_samples=3,
                                                target_rel_ci=0.05))
    after, _ = wall_and_device(torch, clock, sleep, 4)
    assert len(timing.samples) >= 3 and timing.number >= 1
    median = timing.summary().median
    low, high = sorted((before / 4, after / 4))
    assert 0.5 * low <= median <= 2.0 * high, (median, before / 4, after / 4)
