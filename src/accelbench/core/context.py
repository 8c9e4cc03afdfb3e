"""What a benchmark's measure function receives: the device, the clock and the policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.core.timing import Clock, Timing, TimingPolicy, measure
from accelbench.env.device import DeviceInfo


@dataclass
class CaseContext:
    device: DeviceInfo
    clock: Clock
    policy: TimingPolicy
    flush: Callable[[], Any] | None = None  # clears device caches; used when policy asks

    def time(self, fn: Callable[[], Any]) -> Timing:
        return measure(fn, self.clock, self.policy, self.flush)

    def peak_flops(self, dtype: str) -> float | None:
        """Published dense peak of this device for dtype, in FLOP/s (None if unknown)."""
        from accelbench.core.dtypes import DTYPES
        from accelbench.env.peaks import lookup

        peaks = lookup(self.device)
        return peaks.dense_flops(DTYPES[dtype].peak_key) if peaks else None

    def peak_bandwidth(self) -> float | None:
        """Published memory bandwidth of this device in B/s (None if unknown)."""
        from accelbench.env.peaks import lookup

        peaks = lookup(self.device)
        return peaks.memory_bandwidth if peaks else None
