"""The `copy-matrix` benchmark: does every path between the node's memories carry what it
should? (TransferBench's question, with `isolate`'s rule for naming what is slow.)

On the CPU: each NUMA node's CPUs copying within each node's memory (`copy_paths.host`),
the memory placed by first touch and its placement checked with the kernel. On GPUs:
every ordered pair of devices one way (through the copy engines, through a copy kernel
writing into the peer's memory, and with peer access turned off), every pair both ways
at once, each NUMA node's page-locked memory to and from each device, and every device
copying to every other at once, each pair on streams of its own. Every path is checked
on known data before it is timed.

Findings: a copy that delivers wrong bytes fails the case before anything is timed. A
slow device (every path through it slow) or a slow link between two devices is named by
`isolate`'s rule (median and MAD over the pairs, at least 1.25x slower) and fails, by
the copy engines' figures and by the copy kernel's; so is a device whose host link is
that much slower than the other devices'. Two GPUs that cannot reach each other's memory
(no peer access: P2P off in the firmware, the IOMMU, or ACS on a PCIe switch) warn, as
does a pair whose copies gain less than PEER_GAIN from peer access (the bytes are staged
through host memory either way). Memory that could not be placed where asked (either
host end of a copy: its source or its destination), and a NUMA node whose CPUs copy
their own memory that much slower than the best node's, warn. Host-to-device paths are
rated against the device's PCIe link (generation x width, from sysfs) where the kernel
reports it. The figures (`min_transfer_rate` and `median_transfer_rate`) are of the
node's own paths, the copy with peer access off left out: bytes copied per second, each
byte counted once, as nvbandwidth and TransferBench count them (the `memory` benchmark's
device-copy `bandwidth` counts the bytes read and the bytes written, as STREAM does:
twice the transfer rate of the same copy).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.collectives.sweep import SizeParam
from accelbench.benchmarks.health.copy_paths import CopyPath
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, conclude
from accelbench.benchmarks.isolate.verdict import MIN_SLOWNESS, Metric, name_slow
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Figure
from accelbench.core.registry import Benchmark

CPU_BYTES, GPU_BYTES = 64 << 20, 256 << 20
COPY = Metric("copy_bw", "copy transfer rate", "B/s", True)
KERNEL = Metric("kernel_copy_bw", "copy-kernel transfer rate", "B/s", True)
PEER_GAIN = 1.1  # peer access on must copy at least this much faster than off
# The figures: bytes copied per second, each counted once (a transfer rate, not STREAM's
# read + write bandwidth); stored before as min_bandwidth and median_bandwidth.
MIN_RATE, MEDIAN_RATE = "min_transfer_rate", "median_transfer_rate"


@dataclass(frozen=True)
class CopyMatrixParams:
    """The parameters of a copy-matrix case (`BENCHMARK.params`)."""

    bytes: int


def measure(ctx: CaseContext, params: CopyMatrixParams) -> CaseResult:
    import torch

    from accelbench.benchmarks.health import sysfs

    nodes = [n for n in sysfs.numa_nodes() if n.cpus] or None
    if ctx.device.type == "cpu":
        paths = _host_matrix(torch, ctx, nodes, params.bytes or CPU_BYTES)
        findings = host_findings(paths)
    else:
        paths, links, peers = _device_matrix(torch, ctx, nodes, params.bytes or GPU_BYTES)
        findings = device_findings(paths, links, peers)
    # The figures are of the node's own paths: the copy with peer access turned off is
    # the yardstick of the one with it on, not a path the node's copies take.
    values = [p.bandwidth for p in paths if p.kind not in ("all", "d2d-nopeer")]
    figures = (Figure(MIN_RATE, min(values), "B/s"),
               Figure(MEDIAN_RATE, statistics.median(values), "B/s"))
    return conclude(findings, {"paths": [p.to_dict() for p in paths]}, None, figures)


def _host_matrix(torch: Any, ctx: CaseContext, nodes: Sequence[Any] | None,
                 nbytes: int) -> list[CopyPath]:
    from accelbench.benchmarks.health.copy_paths import host_path

    if nodes is None:  # no NUMA information: the CPUs this process may use, as one node
        cpus = sorted(os.sched_getaffinity(0))
        return [host_path(torch, ctx, cpus, 0, cpus, 0, nbytes)]
    return [host_path(torch, ctx, a.cpus, a.node, b.cpus, b.node, nbytes)
            for a in nodes for b in nodes]


def _device_matrix(torch: Any, ctx: CaseContext, nodes: Sequence[Any] | None, nbytes: int
                   ) -> tuple[list[CopyPath], dict[str, float], dict[tuple[str, str], bool]]:
    from accelbench.benchmarks.health import copy_paths, peer_access

    count = torch.cuda.device_count()
    devices = list(range(count))
    ordered = [(a, b) for a in devices for b in devices if a != b]
    peers = {(a, b): bool(torch.cuda.can_device_access_peer(a, b)) for a, b in ordered}
    out = [copy_paths.device_path(torch, ctx, a, b, nbytes) for a, b in ordered]
    out += [copy_paths.kernel_path(torch, ctx, a, b, nbytes) for a, b in ordered
            if peers[(a, b)]]
    runtime = peer_access.open_runtime(ctx.device.platform) if any(peers.values()) else None
    if runtime is not None:
        out += [copy_paths.peer_off_path(torch, ctx, runtime, a, b, nbytes)
                for a, b in ordered if peers[(a, b)] and peers[(b, a)]]
    out += [copy_paths.both_ways(torch, ctx, a, b, nbytes)
            for a in devices for b in devices if a < b]
    host_nodes = [(n.node, n.cpus) for n in nodes] if nodes else [
        (0, sorted(os.sched_getaffinity(0)))]
    for node, cpus in host_nodes:
        for d in devices:
            out.append(copy_paths.host_device_path(torch, ctx, node, cpus, d, True, nbytes))
            out.append(copy_paths.host_device_path(torch, ctx, node, cpus, d, False, nbytes))
    if count > 2:
        out.append(copy_paths.all_to_all(torch, ctx, devices, nbytes))
    return out, _pcie_rates(torch, devices), {
        (f"gpu{a}", f"gpu{b}"): on for (a, b), on in peers.items()}


def _pcie_rates(torch: Any, devices: Sequence[int]) -> dict[str, float]:
    """Each GPU's PCIe payload rate per direction in B/s, from the link in sysfs that
    leaves its card (on an AMD card, its switch's upstream port: sysfs.card_port), at the
    speed and width it runs at now (env.pcie)."""
    from accelbench.benchmarks.health import sysfs
    from accelbench.env.pcie import pci_address
    from accelbench.env.telemetry.sources import DeviceAddress

    by_address = {d.address: d for d in sysfs.pci_devices()}
    out = {}
    for index in devices:
        pci = DeviceAddress.of(torch.cuda.get_device_properties(index)).pci
        found = by_address.get(pci_address(pci)) if pci is not None else None
        if found is not None:
            found = sysfs.card_port(found, by_address)
        rate = found.link.per_direction if found is not None and found.link else None
        if rate:
            out[f"gpu{index}"] = rate
    return out


# The host ends of each kind of path whose placement is checked: a path whose host
# buffer lies elsewhere measures another node's memory under this node's name.
_HOST_ENDS = {"host": "source and destination", "h2d": "source", "d2h": "destination"}


def _placement(paths: Sequence[CopyPath]) -> list[Finding]:
    out = []
    for p in paths:
        if p.kind not in _HOST_ENDS or p.placed is None:
            continue
        asked = p.source if p.kind == "h2d" else p.target
        if p.placed != asked:
            out.append(Finding(f"{p.source}->{p.target}", WARN, "memory lands on the NUMA "
                               "node asked (first touch by that node's CPUs)",
                               f"{p.kind} path: {_HOST_ENDS[p.kind]} memory asked on {asked}, "
                               f"found on {p.placed}",
                               {"asked": asked, "placed": p.placed}, "ACCEL_NUMA_PLACEMENT"))
    return out


def host_findings(paths: Sequence[CopyPath]) -> list[Finding]:
    """Each node's own-memory bandwidth against the best node's."""
    local = {p.source: p.bandwidth for p in paths if p.source == p.target}
    best = max(local.values(), default=0.0)
    out = []
    for node, bw in local.items():
        slow = best / bw if bw > 0 else float("inf")
        out.append(Finding(
            node, WARN if slow >= MIN_SLOWNESS else PASS,
            f"a node copies its own memory at most {MIN_SLOWNESS:g}x slower than the best "
            "node (slower: a missing or slower DIMM, or a busy node)",
            f"{bw / 1e9:.1f} GB/s in its own memory"
            + (f", {slow:.2f}x slower than the best node" if slow > 1.005 else ""),
            {"bandwidth": bw, "best": best}, "ACCEL_COPY_SLOW"))
    remote = [p for p in paths if p.source != p.target]
    for p in remote:
        out.append(Finding(f"{p.source}->{p.target}", PASS, "remote copies recorded",
                           f"{p.bandwidth / 1e9:.1f} GB/s in {p.target}'s memory",
                           {"bandwidth": p.bandwidth}))
    return out + _placement(paths)


def _named_slow(paths: Sequence[CopyPath], kind: str, metric: Metric) -> list[Finding]:
    """The devices and links `isolate`'s rule names slow among the `kind` copies."""
    one_way = {(p.source, p.target): p.bandwidth for p in paths if p.kind == kind}
    members = sorted({m for pair in one_way for m in pair})
    pairs: dict[tuple[str, str], float] = {}
    for (a, b), bw in one_way.items():
        key = (a, b) if a < b else (b, a)
        pairs[key] = min(bw, pairs.get(key, bw))  # a link is as slow as its slower way
    if not pairs:
        return []
    suffix = "" if kind == "d2d" else " (copy kernel)"
    return [Finding(n.name + suffix, FAIL, f"no device or link is named slow ({metric.title}, "
                    f"isolate's rule: at least {MIN_SLOWNESS:g}x slower than the median and "
                    "an outlier)", f"{n.what} {n.name}: {n.value / 1e9:.1f} GB/s, "
                    f"{n.slowness:.2f}x slower than the median {n.center / 1e9:.1f} GB/s",
                    n.to_dict(), "ACCEL_COPY_SLOW")
            for n in name_slow(members, pairs, metric, "device")]


def _peer_findings(paths: Sequence[CopyPath], peers: dict[tuple[str, str], bool]
                   ) -> list[Finding]:
    """Pairs without peer access, and what peer access gains each pair that has it."""
    out = []
    for a, b in sorted({(min(x, y), max(x, y)) for x, y in peers}):
        if not (peers.get((a, b)) and peers.get((b, a))):
            out.append(Finding(f"{a}-{b} peer", WARN, "every two GPUs of the node can reach "
                               "each other's memory (peer access)", f"{a} and {b} cannot both "
                               "reach each other's memory: copies between them are staged "
                               "through host memory (P2P off in the firmware or the IOMMU, "
                               "or ACS on a PCIe switch)",
                               {"a_to_b": peers.get((a, b)), "b_to_a": peers.get((b, a))},
                               "ACCEL_PEER_ACCESS"))
    on = {(p.source, p.target): p.bandwidth for p in paths if p.kind == "d2d"}
    for p in paths:
        if p.kind != "d2d-nopeer" or (p.source, p.target) not in on:
            continue
        with_peer, without = on[(p.source, p.target)], p.bandwidth
        gain = with_peer / without if without > 0 else float("inf")
        out.append(Finding(
            f"{p.source}->{p.target} peer", WARN if gain < PEER_GAIN else PASS,
            f"peer access makes a copy between GPUs at least {PEER_GAIN:g}x faster than "
            "the driver's staging through host memory",
            f"{with_peer / 1e9:.1f} GB/s with peer access, {without / 1e9:.1f} GB/s "
            f"without ({gain:.2f}x)", {"with_peer": with_peer, "without": without,
                                       "gain": gain}, "ACCEL_PEER_ACCESS"))
    return out


def device_findings(paths: Sequence[CopyPath], pcie: dict[str, float],
                    peers: dict[tuple[str, str], bool] | None = None) -> list[Finding]:
    """The slow devices and links among the GPU pairs (through the copy engines and
    through a copy kernel), the pairs peer access does not join or does not speed up,
    the slow host links, each path's share of its PCIe link."""
    members = sorted({m for p in paths if p.kind == "d2d" for m in (p.source, p.target)})
    out = _named_slow(paths, "d2d", COPY) + _named_slow(paths, "d2d-kernel", KERNEL)
    out += _peer_findings(paths, peers or {})
    for kind in ("h2d", "d2h"):
        per_device: dict[str, list[float]] = {}
        for p in paths:
            if p.kind == kind:
                gpu = p.target if kind == "h2d" else p.source
                per_device.setdefault(gpu, []).append(p.bandwidth)
        best = {g: max(v) for g, v in per_device.items()}
        center = statistics.median(best.values()) if best else 0.0
        for gpu, bw in sorted(best.items()):
            slow = center / bw if bw > 0 else float("inf")
            link = pcie.get(gpu)
            share = f", {bw / link:.0%} of its PCIe link" if link else ""
            out.append(Finding(
                f"{gpu} {kind}", FAIL if len(best) >= 3 and slow >= MIN_SLOWNESS else PASS,
                f"a device's host link is at most {MIN_SLOWNESS:g}x slower than the median "
                "device's (judged with three devices or more)",
                f"{bw / 1e9:.1f} GB/s from its nearest NUMA node{share}",
                {"bandwidth": bw, "median": center, "pcie_rate": link}, "ACCEL_COPY_SLOW"))
    if not members:
        out.append(Finding("gpus", PASS, "device pairs copied", "one device: no pair to copy "
                           "between", {}))
    return out + _placement(paths)


BENCHMARK = Benchmark(
    name="copy-matrix",
    family="health",
    summary="Copy transfer rate (B/s, each byte copied counted once) over every path of "
    "the node, checked on known data: NUMA node "
    "to node on the CPU; GPU to GPU one way (copy engines, a copy kernel, peer access off) "
    "and both ways, host memory of each NUMA node to and from each GPU, all GPUs at once; "
    "names a slow device or link",
    entry="accelbench.benchmarks.health.copy_matrix:measure",
    sources=("accelbench.benchmarks.health.copy_paths", "accelbench.benchmarks.health.numa_place",
             "accelbench.benchmarks.health.peer_access",
             "accelbench.benchmarks.isolate.verdict", "accelbench.benchmarks.health.findings"),
    params=(SizeParam("bytes", "int", 0, help=f"bytes per copy; K/M/G suffixes (0: "
                      f"{CPU_BYTES >> 20} MiB on the CPU, {GPU_BYTES >> 20} MiB on GPUs)",
                      minimum=0),),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    views=("accelbench.benchmarks.health.view:sections",),
    typed=CopyMatrixParams,
)
