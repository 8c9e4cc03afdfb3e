"""What a benchmark's measure function receives: the device, the clock and the policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from accelbench.core.device import DeviceInfo
from accelbench.core.timing import SOLO, Clock, Coordinator, Timing, TimingPolicy, measure


@dataclass(frozen=True)
class DistInfo:
    """This process's place in a torch.distributed job (the default process group)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str  # "nccl" (RCCL on ROCm builds), "gloo", "mpi"

    @property
    def nodes(self) -> int:
        return max(1, self.world_size // max(1, self.local_world_size))

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "world_size": self.world_size, "local_rank": self.local_rank,
                "local_world_size": self.local_world_size, "nodes": self.nodes,
                "backend": self.backend}


@dataclass
class CaseContext:
    device: DeviceInfo
    clock: Clock
    policy: TimingPolicy
    flush: Callable[[], Any] | None = None  # clears device caches; used when policy asks
    dist: DistInfo | None = None  # set when the case runs on every rank of a job
    coordinator: Coordinator = SOLO  # keeps the ranks' timing decisions in step
    # Told the start and end (perf_counter) of each timed part, warm-up included: the
    # telemetry beside the case reads power and clocks over it. A field, so that the
    # copies a benchmark makes with dataclasses.replace keep it.
    on_timed: Callable[[float, float], None] | None = None

    def time(self, fn: Callable[[], Any]) -> Timing:
        start = perf_counter()
        try:
            return measure(fn, self.clock, self.policy, self.flush, self.coordinator)
        finally:
            if self.on_timed is not None:
                self.on_timed(start, perf_counter())

    def peak_flops(self, dtype: str) -> float | None:
        """Published dense peak of this device for dtype, in FLOP/s (None if unknown)."""
        from accelbench.core.dtypes import DTYPES
        from accelbench.core.peaks import lookup

        peaks = lookup(self.device)
        return peaks.dense_flops(DTYPES[dtype].peak_key) if peaks else None

    def peak_bandwidth(self) -> float | None:
        """Published memory bandwidth of this device in B/s (None if unknown)."""
        from accelbench.core.peaks import lookup

        peaks = lookup(self.device)
        return peaks.memory_bandwidth if peaks else None
