"""The timing core: a clock seam and adaptive repetition.

`measure` warms a callable up for a time budget, sizes blocks of calls so that each
sample is long enough to time precisely, then keeps taking samples until the
confidence interval of the median is as narrow as asked, or a time or sample cap is
reached. It sees the hardware only through a `Clock`, so tests drive it with a
seeded fake clock and no device.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.core.stats import Summary, settling_point, summarize
from accelbench.core.units import format_rel

if TYPE_CHECKING:
    import torch


class Clock(Protocol):
    def now(self) -> float:
        """Wall time in seconds, for budgets."""

    def time(self, fn: Callable[[], Any], number: int) -> float:
        """Seconds taken by `number` back-to-back calls of fn, device work included."""


class PerfCounterClock:
    """Host clock, for CPU work: the work is done when the call returns."""

    def now(self) -> float:
        return time.perf_counter()

    def time(self, fn: Callable[[], Any], number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return time.perf_counter() - start


class DeviceEventClock:
    """Device clock for CUDA and ROCm (HIP): events on the current stream.

    The start event is recorded after everything already queued (such as a cache
    flush), so only the timed calls fall between the two events.
    """

    def __init__(self, device: torch.device) -> None:
        import torch

        self._event: type[torch.cuda.Event] = torch.cuda.Event
        self._device = device
        torch.cuda.synchronize(device)

    def now(self) -> float:
        return time.perf_counter()

    def time(self, fn: Callable[[], Any], number: int) -> float:
        start = self._event(enable_timing=True)
        end = self._event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        milliseconds: float = start.elapsed_time(end)
        return milliseconds / 1e3


class SynchronizingClock:
    """Host clock that synchronises a device after the calls (XPU, MPS)."""

    def __init__(self, synchronize: Callable[[], Any]) -> None:
        self._sync = synchronize

    def now(self) -> float:
        return time.perf_counter()

    def time(self, fn: Callable[[], Any], number: int) -> float:
        self._sync()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        self._sync()
        return time.perf_counter() - start


class Coordinator(Protocol):
    """Keeps the ranks of a distributed case in step while they are timed.

    Every rank must make the same decisions (how many warm-up calls, calls per sample,
    when to stop), or their collectives would no longer match; and a sample of work
    spread over ranks takes as long as its slowest rank.
    """

    def slowest(self, seconds: float) -> float:
        """The largest of this value over all ranks."""

    def agree(self, value: int) -> int:
        """Rank 0's value, on every rank."""

    def sampling(self) -> None:
        """Warm-up is over and the samples begin (processes that take turns meet here:
        runner.turns)."""


class Solo:
    """The coordinator of a single process: nothing to agree with."""

    def slowest(self, seconds: float) -> float:
        return seconds

    def agree(self, value: int) -> int:
        return value

    def sampling(self) -> None:
        pass


SOLO = Solo()


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how hard to measure one case."""

    warmup_time: float = 0.05  # seconds of warm-up calls before any sample
    min_warmup_calls: int = 2
    block_time: float = 0.01  # a sample times enough calls to last at least this
    target_rel_ci: float = 0.01  # stop once the median's CI half-width is within this
    confidence: float = 0.95
    min_samples: int = 5
    max_samples: int = 200
    max_time: float = 2.0  # seconds of sampling, warm-up excluded
    max_block_calls: int = 1_000_000
    flush_cache: bool = False  # flush caches before every sample (one call per sample)
    noisy_rel_iqr: float = 0.10  # say "noisy" when the IQR exceeds this share of the median
    # Fresh worker processes each case is measured in, interleaved with the other cases of
    # the run; the figure's interval is taken between them (core.between).
    processes: int = 1
    # Say "noisy" when the interval between processes is wider than ± this share.
    noisy_rel_interval: float = 0.05
    # Read what else the host is doing while a case runs, every this many seconds
    # (0: not at all), and flag the case "contended" when it was busy (env.host).
    host_interval: float = 0.2
    # Read the device's and the host's power, energy counters, clocks and throttle
    # reasons every this many seconds beside each case (0: not at all; env.telemetry).
    telemetry_interval: float = 0.05
    # The telemetry sources to read (env.telemetry.SOURCE_NAMES); empty: all that exist.
    telemetry_sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must be between 0 and 1")
        if self.target_rel_ci <= 0 or self.max_time <= 0 or self.block_time <= 0:
            raise ValueError("target_rel_ci, max_time and block_time must be positive")
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if not self.telemetry_interval >= 0:
            raise ValueError("telemetry_interval must be 0 (off) or a positive number")


MAX_EXTENSIONS = 3  # times the warm-up is extended when the samples have not settled

STOP_CONVERGED = "converged"
STOP_TIME = "time budget"
STOP_SAMPLES = "sample cap"


@dataclass(frozen=True)
class Timing:
    """Raw result of `measure`: per-call seconds, one value per sample."""

    samples: tuple[float, ...]
    number: int  # calls per sample
    warmup_calls: int  # calls before the samples, extended warm-up included
    stop_reason: str
    confidence: float = 0.95
    # False when the samples still stepped or drifted after every warm-up extension.
    settled: bool = True

    def summary(self) -> Summary:
        return summarize(self.samples, self.confidence)


_STOPS = (None, STOP_CONVERGED, STOP_TIME, STOP_SAMPLES)  # agreed on by index


def measure(
    fn: Callable[[], Any],
    clock: Clock,
    policy: TimingPolicy = TimingPolicy(),
    flush: Callable[[], Any] | None = None,
    coordinator: Coordinator = SOLO,
) -> Timing:
    """Time fn adaptively; see the module docstring.

    With several ranks, each sample is the slowest rank's and every decision is rank
    0's, so all ranks call fn the same number of times.
    """
    import scipy.special  # noqa: F401  (imported now so its first import is not timed)

    # Warm-up: at least a few calls and at least warmup_time, by the same clock.
    warm_start = clock.now()
    per_call: list[float] = []
    while True:
        per_call.append(clock.time(fn, 1))
        more = len(per_call) < 10_000 and (
            len(per_call) < policy.min_warmup_calls or clock.now() - warm_start < policy.warmup_time
        )
        if not coordinator.agree(int(more)):
            break
    # The fastest recent call estimates the cost of one call; the first calls
    # often include one-off work (allocation, autotuning) and are left out.
    estimate = max(min(per_call[len(per_call) // 2 :]), 1e-9)

    flushing = flush if policy.flush_cache else None
    if flushing is not None:
        number = 1
    else:
        number = min(policy.max_block_calls, max(1, math.ceil(policy.block_time / estimate)))
    number = coordinator.agree(number)

    samples: list[float] = []
    warmup_calls = len(per_call)
    extensions = 0
    coordinator.sampling()
    start = sampling_start = clock.now()
    while True:
        if flushing is not None:
            flushing()
        samples.append(coordinator.slowest(clock.time(fn, number)) / number)
        stop = _stop_reason(samples, policy, clock.now() - start)
        stop = _STOPS[coordinator.agree(_STOPS.index(stop))]
        if stop is None:
            continue
        # Warm-up until steady: samples that step or drift before they settle were
        # still warming up. Drop them, count them as warm-up, and sample on, at most
        # MAX_EXTENSIONS times and never past twice the sampling budget.
        settle = coordinator.agree(settling_point(samples) or 0)
        if not settle:
            return Timing(tuple(samples), number, warmup_calls, stop, policy.confidence)
        if (extensions >= MAX_EXTENSIONS
                or clock.now() - sampling_start >= 2 * policy.max_time):
            return Timing(tuple(samples), number, warmup_calls, stop, policy.confidence,
                          settled=False)
        extensions += 1
        warmup_calls += settle * number
        del samples[:settle]
        start = clock.now()


def _stop_reason(samples: list[float], policy: TimingPolicy, elapsed: float) -> str | None:
    if len(samples) >= policy.min_samples:
        summary = summarize(samples, policy.confidence)
        if summary.ci_exact and summary.rel_ci <= policy.target_rel_ci:
            return STOP_CONVERGED
    if elapsed >= policy.max_time and len(samples) >= min(policy.min_samples, 3):
        return STOP_TIME
    if len(samples) >= policy.max_samples:
        return STOP_SAMPLES
    return None


def noise_warnings(timing: Timing, policy: TimingPolicy) -> tuple[str, ...]:
    """Plain-language warnings when a result should not be trusted to its last digit."""
    summary = timing.summary()
    out = []
    if timing.stop_reason != STOP_CONVERGED:
        out.append(
            f"noisy: median CI {format_rel(summary.rel_ci)} did not reach "
            f"±{policy.target_rel_ci:.1%} "
            f"before the {timing.stop_reason} ({summary.n} samples)"
        )
    if summary.rel_iqr > policy.noisy_rel_iqr:
        out.append(f"noisy: IQR is {summary.rel_iqr:.0%} of the median")
    if not timing.settled:
        out.append(f"unsettled: the samples still stepped or drifted after "
                   f"{MAX_EXTENSIONS} longer warm-ups")
    return tuple(out)
