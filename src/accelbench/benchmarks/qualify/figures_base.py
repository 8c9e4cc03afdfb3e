"""What every figure's measurement shares: the `Reading` it returns, the node's devices
as subjects ("gpu0".., "cpu"), and the case's time budget split between the subjects.

A figure's `seconds` is the budget of the whole figure: a per-device figure on a node of
eight GPUs gives each an eighth of it, a peer figure each ordered pair its share. Within
a subject's share the timing core (core.timing) warms up for a tenth and samples for at
most four tenths (twice that where the samples have not settled), so a figure stays
within about its budget plus the set-up of its buffers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.core.context import CaseContext
from accelbench.core.timing import PerfCounterClock, TimingPolicy

MIB = 1 << 20
GIB = 1 << 30
MIN_SHARE_S = 0.02  # no subject is given less than this, however many share the budget


@dataclass(frozen=True)
class Reading:
    """One figure measured on every subject of the node, in the catalog's unit."""

    figure: str  # a catalog name
    values: Mapping[str, float]  # per subject: "gpu0", "cpu", "gpu0-gpu1", "node"
    # What each value came from, in the figure's unit: one per timing sample (a block of
    # calls), one per power reading; () for a figure read from the system.
    samples: Mapping[str, tuple[float, ...]]
    links: Mapping[str, str] = field(default_factory=dict)  # subject -> xgmi/nvlink/pcie
    details: Mapping[str, Any] = field(default_factory=dict)  # JSON-able
    cores: int = 1  # CPU threads used

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "values": dict(self.values),
                "samples": {k: list(v) for k, v in self.samples.items()},
                "links": dict(self.links), "details": dict(self.details),
                "cores": self.cores}


def is_gpu(ctx: CaseContext) -> bool:
    return ctx.device.type == "cuda"


def gpu_indices(ctx: CaseContext) -> list[int]:
    """Every GPU PyTorch sees on the node (the case's device is one of them)."""
    import torch

    return list(range(torch.cuda.device_count())) if is_gpu(ctx) else []


def gpu_subject(index: int) -> str:
    return f"gpu{index}"


def pair_subject(a: int, b: int) -> str:
    return f"gpu{a}-gpu{b}"


def cpu_threads() -> int:
    """The threads PyTorch's CPU operators use in this process (the case's threads)."""
    import torch

    return int(torch.get_num_threads())


def share_of(seconds: float, subjects: int) -> float:
    """Each subject's seconds of a figure's budget."""
    return max(MIN_SHARE_S, seconds / max(1, subjects))


def budget_policy(policy: TimingPolicy, share: float) -> TimingPolicy:
    """The case's timing policy fitted to `share` seconds of one subject."""
    max_time = 0.4 * share
    min_samples = min(policy.min_samples, 5)
    return replace(policy, warmup_time=min(policy.warmup_time, 0.1 * share),
                   max_time=max_time, block_time=min(policy.block_time, max_time / 10),
                   min_samples=min_samples, max_samples=max(policy.max_samples, min_samples),
                   flush_cache=False, processes=1)


def cpu_context(ctx: CaseContext, share: float) -> CaseContext:
    return replace(ctx, clock=PerfCounterClock(), policy=budget_policy(ctx.policy, share),
                   flush=None)


def device_context(ctx: CaseContext, index: int, share: float, *,
                   host_clock: bool = False) -> CaseContext:
    """The case's context moved to GPU `index`: its own DeviceInfo, its event clock (or the
    host clock, for work that synchronises itself), the policy fitted to `share`."""
    import torch

    from accelbench.env.fingerprint import select_device
    from accelbench.runner.devices import make_clock

    device = select_device(torch, f"cuda:{index}", {}, os.environ)
    with on_device(index):
        clock = PerfCounterClock() if host_clock else make_clock(device)
    return replace(ctx, device=device, clock=clock, policy=budget_policy(ctx.policy, share),
                   flush=None)


@contextlib.contextmanager
def on_device(index: int) -> Iterator[None]:
    """GPU `index` current for the block, the previous one current again after it."""
    import torch

    with torch.cuda.device(index):
        yield


def pci_addresses(count: int) -> dict[int, str | None]:
    """Each GPU's PCI address as sysfs spells it ("0000:c1:00.0"), from PyTorch; None
    where PyTorch does not say."""
    import torch

    from accelbench.env.pcie import pci_address
    from accelbench.env.telemetry.sources import DeviceAddress

    out: dict[int, str | None] = {}
    for index in range(count):
        pci = DeviceAddress.of(torch.cuda.get_device_properties(index)).pci
        out[index] = pci_address(pci) if pci is not None else None
    return out


def nearest_numa(address: str | None) -> tuple[int | None, tuple[int, ...]]:
    """(the NUMA node a PCI device hangs off, that node's CPUs); (None, this process's
    CPUs) where the firmware or the kernel does not say."""
    from accelbench.benchmarks.health import sysfs

    everywhere = tuple(sorted(os.sched_getaffinity(0)))
    if address is None:
        return None, everywhere
    found = {d.address: d for d in sysfs.pci_devices()}.get(address)
    node = found.numa_node if found is not None else None
    cpus = {n.node: n.cpus for n in sysfs.numa_nodes()}.get(node) if node is not None else None
    allowed = tuple(c for c in cpus or () if c in everywhere)
    return (node, allowed) if node is not None and allowed else (None, everywhere)
