"""Measuring the figures a node is qualified on (catalog): `measure(ctx, figure,
seconds=...)` returns a `Reading` of every subject of the node in the figure's unit, or
raises CaseSkipped where the figure does not apply here.

The figures read from the system (memory-size, pcie-gen, pcie-width, links-up) are here;
the timed ones are in figures_compute (GEMM, memory, launch, train), figures_copy (host
links, peers, all-reduce) and figures_power. Each reuses what the rest of accelbench
measures with: the micro benchmarks' checked GEMM and copy, the health family's vendor
readings, NUMA placement and copy paths, the telemetry sampler, the model zoo's trainer.

Every GPU PyTorch sees is measured, not only the case's device: a node is qualified as
a whole. On the CPU the subject is "cpu".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from accelbench.benchmarks.qualify.catalog import BY_NAME
from accelbench.benchmarks.qualify.figures_base import (
    GIB,
    Reading,
    gpu_indices,
    gpu_subject,
    is_gpu,
    pci_addresses,
)
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseSkipped

__all__ = ["Reading", "measure"]

Measurer = Callable[[CaseContext, str, float, "float | None"], Reading]
VENDORS = {"rocm": "amd", "cuda": "nvidia"}


def measure(ctx: CaseContext, figure: str, *, seconds: float,
            size_mib: float | None = None) -> Reading:
    """Figure `figure` of every subject of the node. `seconds` is the figure's time
    budget (the load's length for power); `size_mib` the buffer or message size where
    the figure has one (defaults per device kind)."""
    if figure not in BY_NAME:
        raise ValueError(f"unknown figure {figure!r} (figures: {', '.join(BY_NAME)})")
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    if size_mib is not None and not size_mib > 0:
        raise ValueError(f"size_mib must be positive, got {size_mib!r}")
    if ctx.device.type not in ("cpu", "cuda"):
        raise CaseSkipped(f"qualification figures are measured on CPUs and CUDA/ROCm GPUs, "
                          f"not on {ctx.device.type!r} devices")
    return _measurer(figure)(ctx, figure, seconds, size_mib)


def _measurer(figure: str) -> Measurer:
    from accelbench.benchmarks.qualify import figures_compute, figures_copy, figures_power

    if figure.startswith("gemm-"):
        return figures_compute.gemm
    table: dict[str, Measurer] = {
        "memory-size": memory_size, "pcie-gen": pcie, "pcie-width": pcie,
        "links-up": links_up,
        "memory-read": figures_compute.memory, "memory-write": figures_compute.memory,
        "memory-copy": figures_compute.memory, "launch": figures_compute.launch,
        "train": figures_compute.train,
        "h2d": figures_copy.host_link, "d2h": figures_copy.host_link,
        "dma-bidir": figures_copy.host_link, "peer": figures_copy.peer,
        "allreduce": figures_copy.allreduce, "power": figures_power.power,
    }
    return table[figure]


# ------------------------------------------------------------------------ memory-size


def memory_size(ctx: CaseContext, figure: str, seconds: float,
                size_mib: float | None) -> Reading:
    """Each GPU's total memory as PyTorch reports it; the host's MemTotal on the CPU."""
    if not is_gpu(ctx):
        total = host_memory_bytes()
        return Reading(figure, {"cpu": total / GIB}, {"cpu": ()},
                       details={"source": "/proc/meminfo MemTotal", "bytes": {"cpu": total}})
    import torch

    sizes = {gpu_subject(i): int(torch.cuda.get_device_properties(i).total_memory)
             for i in gpu_indices(ctx)}
    return Reading(figure, {s: b / GIB for s, b in sizes.items()},
                   {s: () for s in sizes},
                   details={"source": "torch.cuda.get_device_properties().total_memory",
                            "bytes": sizes})


def host_memory_bytes(meminfo: str = "/proc/meminfo") -> int:
    """The host's MemTotal in bytes (the page count times the page size where
    /proc/meminfo cannot be read)."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


# ------------------------------------------------------------------ PCIe and links


def read_gpus(vendor: str) -> Any:
    """Every GPU's reading through the vendor library (health.gpu); a seam for tests."""
    from accelbench.benchmarks.health.gpu import read_gpus as read

    return read(vendor)


def _readings(ctx: CaseContext) -> tuple[Any, dict[int, Any]]:
    """(the library's read, each torch GPU's reading by its PCI address; by index where
    PyTorch gives no address and the library sees as many GPUs)."""
    count = len(gpu_indices(ctx))
    read = read_gpus(VENDORS.get(ctx.device.platform, "nvidia"))
    addresses = pci_addresses(count)
    by_bus = {g.bus_id: g for g in read.gpus if g.bus_id}
    out: dict[int, Any] = {}
    for index in range(count):
        found = by_bus.get(addresses[index]) if addresses[index] else None
        if found is None and addresses[index] is None and len(read.gpus) == count:
            found = read.gpus[index]
        if found is not None:
            out[index] = found
    return read, out


@contextlib.contextmanager
def busy_links(ctx: CaseContext, seconds: float) -> Iterator[None]:
    """Host-to-device copies to every GPU while the block runs: a GPU lowers its PCIe
    generation when idle (NVML documents it), so the link is read under load."""
    import threading

    import torch

    devices = gpu_indices(ctx)
    host = torch.ones(64 << 20, dtype=torch.uint8).pin_memory()
    targets = [torch.empty_like(host, device=f"cuda:{i}") for i in devices]
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            for target in targets:
                target.copy_(host, non_blocking=True)
            for i in devices:
                torch.cuda.synchronize(i)

    thread = threading.Thread(target=run, name="accelbench-qualify-pcie", daemon=True)
    thread.start()
    try:
        stop.wait(min(0.2, seconds))  # let the links train up
        yield
    finally:
        stop.set()
        thread.join()


def pcie(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """Each GPU's current PCIe generation or width, read under a host-to-device copy load
    from amdsmi/NVML, or from sysfs where the library did not say."""
    what = "generation" if figure == "pcie-gen" else "width"
    if not is_gpu(ctx):
        raise CaseSkipped(f"{figure} is a GPU's PCIe link {what}; the CPU has no such link")
    from accelbench.benchmarks.health import sysfs

    with busy_links(ctx, seconds):
        read, found = _readings(ctx)
        links = {d.address: d.link for d in sysfs.pci_devices()}
    addresses = pci_addresses(len(gpu_indices(ctx)))
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    most: dict[str, int | None] = {}
    for index in gpu_indices(ctx):
        subject = gpu_subject(index)
        gpu = found.get(index)
        link = gpu.pcie if gpu is not None else None
        value = (link.gen if what == "generation" else link.width) if link else None
        if value is not None and link is not None:
            sources[subject] = read.source
            most[subject] = link.gen_max if what == "generation" else link.width_max
        else:
            sys_link = links.get(addresses[index] or "")
            value = (sys_link.generation if what == "generation" else sys_link.width
                     ) if sys_link else None
            if value is not None and sys_link is not None:
                sources[subject] = "sysfs"
                most[subject] = (sys_link.max_generation if what == "generation"
                                 else sys_link.max_width)
        if value is not None:
            values[subject] = float(value)
    if not values:
        raise CaseSkipped(f"no PCIe link {what} could be read: "
                          f"{read.missing or 'the GPU library gave none'}; sysfs shows no "
                          "link for the GPUs (a virtual machine?)")
    return Reading(figure, values, {s: () for s in values},
                   details={"source": sources, "max": most, "read_under_load": True,
                            "unread": [gpu_subject(i) for i in gpu_indices(ctx)
                                       if gpu_subject(i) not in values]})


def links_up(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """Each GPU's active XGMI (amdsmi) or NVLink (NVML) links, and their kind."""
    if not is_gpu(ctx):
        raise CaseSkipped("links-up counts a GPU's XGMI or NVLink links; the CPU has none")
    read, found = _readings(ctx)
    values: dict[str, float] = {}
    kinds: dict[str, str] = {}
    states: dict[str, dict[str, str | None]] = {}
    unreported: list[str] = []
    for index, gpu in sorted(found.items()):
        if gpu.links is None:
            continue
        subject = gpu_subject(index)
        wired = [link for link in gpu.links if link.state != "disabled"]
        if wired and all(link.state is None for link in wired):
            # amdsmi's N/A: a secondary compute partition of an MI300X (DPX, QPX, CPX)
            # sees none of its device's link states; its primary partition counts them
            unreported.append(subject)
            continue
        values[subject] = float(sum(link.state == "up" for link in wired))
        if wired:
            kinds[subject] = wired[0].kind
        states[subject] = {link.name: link.state for link in gpu.links}
    if not values:
        raise CaseSkipped("no GPU-to-GPU link could be read: "
                          f"{read.missing or read.source + ' gave no link states'}")
    details = {"source": read.source, "states": states,
               "counted": "links whose state is up, of those not disabled"}
    if unreported:
        details["not_counted"] = {s: "no link state reported (N/A: a secondary compute "
                                     "partition)" for s in unreported}
    return Reading(figure, values, {s: () for s in values}, kinds, details=details)
