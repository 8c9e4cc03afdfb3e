"""The figures of the paths between memories: each GPU's host link (h2d, d2h, both at
once) from pinned memory on its nearest NUMA node, each ordered pair of GPUs alone
(peer, with the kind of link that joins them), and the all-reduce bus bandwidth of all
the node's GPUs at once.

The copies are the health family's copy paths (health.copy_paths), checked on known
bytes before they are timed; a byte is counted once (a transfer rate, as nvbandwidth
counts it). Every value is the median of its samples.
"""

from __future__ import annotations

import statistics
from typing import Any

from accelbench.benchmarks.qualify.figures_base import (
    MIB,
    Reading,
    device_context,
    gpu_indices,
    gpu_subject,
    nearest_numa,
    on_device,
    pair_subject,
    pci_addresses,
    share_of,
)
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseSkipped

HOST_MIB = 128  # a host-link copy: far beyond the size that reaches the link's rate
PEER_MIB = 256  # a copy between two GPUs
ALLREDUCE_MIB = 1024  # the all-reduce's message
MEDIAN = "median of the samples (each: bytes per call over a block's seconds per call)"


def _need_gpus(ctx: CaseContext, figure: str, least: int) -> list[int]:
    devices = gpu_indices(ctx)
    if not devices:
        raise CaseSkipped(f"{figure} is measured between GPU memories; the CPU has no "
                          "device memory of its own")
    if len(devices) < least:
        raise CaseSkipped(f"{figure} needs at least {least} GPUs; this node has "
                          f"{len(devices)}")
    return devices


def _per_sample(nbytes: float, seconds: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(nbytes / s / 1e9 if s > 0 else float("inf") for s in seconds)


# ------------------------------------------------------------------- host links


def host_link(ctx: CaseContext, figure: str, seconds: float,
              size_mib: float | None) -> Reading:
    """h2d, d2h or both at once (dma-bidir, on two streams, summed) between each GPU and
    page-locked memory placed by the CPUs of the GPU's nearest NUMA node."""
    import torch

    from accelbench.benchmarks.health import copy_paths

    devices = _need_gpus(ctx, figure, 1)
    share = share_of(seconds, len(devices))
    nbytes = max(1, round((size_mib or HOST_MIB) * MIB))
    addresses = pci_addresses(len(devices))
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    numa: dict[str, int | None] = {}
    placed: dict[str, str | None] = {}
    for index in devices:
        node, cpus = nearest_numa(addresses[index])
        sub = device_context(ctx, index, share, host_clock=True)
        with on_device(index):
            if figure == "dma-bidir":
                seconds_per_call, moved, where = both_ways(torch, sub, cpus, index, nbytes)
            else:
                path = copy_paths.host_device_path(torch, sub, node or 0, cpus, index,
                                                   figure == "h2d", nbytes)
                seconds_per_call, moved, where = path.seconds, path.nbytes, path.placed
        subject = gpu_subject(index)
        samples[subject] = _per_sample(moved, seconds_per_call)
        values[subject] = statistics.median(samples[subject])
        numa[subject], placed[subject] = node, where
    return Reading(figure, values, samples, details={
        "bytes": nbytes, "numa_node": numa, "placed": placed, "pinned": True,
        "counted": "bytes moved, each once" + (", both directions summed"
                                              if figure == "dma-bidir" else ""),
        "derived": MEDIAN, "seconds": seconds, "seconds_per_subject": share})


def both_ways(torch: Any, ctx: CaseContext, cpus: tuple[int, ...], index: int,
              nbytes: int) -> tuple[tuple[float, ...], int, str | None]:
    """Host to GPU `index` and back at once, each on a stream of its own; (seconds per
    call, bytes per call counting both directions, where both host buffers were found).
    Both are page-locked memory placed by the CPUs `cpus` (health.numa_place)."""
    from accelbench.benchmarks.health import numa_place
    from accelbench.benchmarks.health.copy_paths import at_once, check_arrived, pattern, synced

    expected = pattern(torch, nbytes, "cpu")
    with numa_place.page_locked(torch, numa_place.placed(torch, cpus, nbytes)) as source, \
            numa_place.page_locked(torch, numa_place.placed(torch, cpus, nbytes)) as back:
        source.copy_(expected)
        where = numa_place.found_on(source, back)
        device = f"cuda:{index}"
        inbound = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        outbound = pattern(torch, nbytes, device)
        call = synced(torch, (index,), at_once(torch, [(inbound, source), (back, outbound)]))
        call()
        check_arrived(torch, f"host to gpu{index} (both ways)", inbound, expected.to(device))
        check_arrived(torch, f"gpu{index} to host (both ways)", back, expected)
        return ctx.time(call).samples, 2 * nbytes, where


# ------------------------------------------------------------------------ peers


def link_kinds(devices: list[int], platform: str) -> tuple[dict[tuple[int, int], str],
                                                           str | None]:
    """The kind of link joining each pair of GPUs ("xgmi", "nvlink"; "pcie" where the
    vendor library names no direct link), by PCI address; ({}, why) where the library
    could not be read: a kind is never guessed."""
    from accelbench.benchmarks.health.topology import direct_links

    links = direct_links({"rocm": "amd", "cuda": "nvidia"}.get(platform))
    if not links.read:
        return {}, links.missing
    addresses = pci_addresses(len(devices))
    return {(a, b): pair_kind(links.pairs, addresses[a], addresses[b])
            for a in devices for b in devices if a != b}, None


def pair_kind(pairs: Any, a: str | None, b: str | None) -> str:
    """The kind of the first direct link between addresses a and b; "pcie" for none."""
    for pair in pairs:
        if {pair.a, pair.b} == {a, b} and pair.kind in ("xgmi", "nvlink"):
            return str(pair.kind)
    return "pcie"


def peer(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """Each ordered pair of GPUs copying alone (copy engines, `copy_` between devices)."""
    import torch

    from accelbench.benchmarks.health import copy_paths

    devices = _need_gpus(ctx, figure, 2)
    pairs = [(a, b) for a in devices for b in devices if a != b]
    share = share_of(seconds, len(pairs))
    nbytes = max(1, round((size_mib or PEER_MIB) * MIB))
    kinds, missing = link_kinds(devices, ctx.device.platform)
    access = {f"{pair_subject(a, b)}": bool(torch.cuda.can_device_access_peer(a, b))
              for a, b in pairs}
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    for a, b in pairs:
        sub = device_context(ctx, a, share, host_clock=True)
        with on_device(a):
            path = copy_paths.device_path(torch, sub, a, b, nbytes)
        subject = pair_subject(a, b)
        samples[subject] = _per_sample(path.nbytes, path.seconds)
        values[subject] = statistics.median(samples[subject])
    links = {pair_subject(a, b): kind for (a, b), kind in kinds.items()}
    details: dict[str, Any] = {"bytes": nbytes, "peer_access": access, "derived": MEDIAN,
                               "counted": "bytes copied, each once",
                               "seconds": seconds, "seconds_per_subject": share}
    if missing:
        details["links_missing"] = missing
    return Reading(figure, values, samples, links, details)


# -------------------------------------------------------------------- all-reduce


def bus_bandwidth(nbytes: float, seconds: float, ranks: int) -> float:
    """nccl-tests' all-reduce bus bandwidth in B/s: algbw * 2(n-1)/n."""
    return nbytes / seconds * 2 * (ranks - 1) / ranks


def allreduce(ctx: CaseContext, figure: str, seconds: float,
              size_mib: float | None) -> Reading:
    """A sum all-reduce over every GPU of the node in this one process
    (torch.cuda.nccl.all_reduce: NCCL, RCCL on ROCm), bus bandwidth as nccl-tests."""
    import torch
    import torch.cuda.nccl as nccl

    from accelbench.benchmarks.health.copy_paths import synced

    devices = _need_gpus(ctx, figure, 2)
    count = max(1, round((size_mib or ALLREDUCE_MIB) * MIB) // 4)
    tensors = [torch.full((count,), float(i + 1), dtype=torch.float32, device=f"cuda:{i}")
               for i in devices]
    if not nccl.is_available(tensors):
        raise CaseSkipped("this PyTorch cannot run NCCL (RCCL) on these tensors")
    n = len(devices)
    call = synced(torch, devices, lambda: nccl.all_reduce(tensors))
    call()
    due = n * (n + 1) / 2
    for i, t in zip(devices, tensors, strict=True):
        got = t[[0, count // 2, count - 1]].cpu().tolist()
        if any(v != due for v in got):
            raise CaseFailed(f"wrong result: the all-reduce left {got} on gpu{i}, not {due}")
    for t in tensors:  # zeros from now on: sums that cannot overflow
        t.zero_()
    sub = device_context(ctx, devices[0], seconds, host_clock=True)
    timing = sub.time(call)
    nbytes = count * 4
    per = tuple(bus_bandwidth(nbytes, s, n) / 1e9 for s in timing.samples)
    return Reading(figure, {"node": statistics.median(per)}, {"node": per}, details={
        "bytes": nbytes, "ranks": n, "dtype": "float32", "op": "sum",
        "api": "torch.cuda.nccl.all_reduce, one process over every GPU",
        "counted": "bus bandwidth: bytes / seconds * 2(n-1)/n (nccl-tests)",
        "derived": MEDIAN, "seconds": seconds})
