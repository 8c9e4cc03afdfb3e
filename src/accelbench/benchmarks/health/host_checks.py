"""The host's health checks: what sysfs says (benchmarks.health.sysfs), judged by stated
rules. Each check gives its findings, or None with the reason when there is nothing to
judge on this node (no EDAC driver, no PCIe link attributes on a virtual machine).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from accelbench.benchmarks.health import sysfs
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, judged
from accelbench.env.pcie import AMD_GPU_VENDOR

# A CPU node whose memory is this far below the largest CPU node's is missing DIMMs.
MEMORY_IMBALANCE = 0.10
ACS_REDIRECT = sysfs.ACS_REQUEST_REDIRECT | sysfs.ACS_COMPLETION_REDIRECT
AMD_IDLE_RULE = ("a link narrower than both ends support fails; on an AMD GPU whose link "
                 "also runs below the speed both ends support it warns: the GPU's power "
                 "management lowers the link's speed and width while it idles")


@dataclass(frozen=True)
class Checked:
    findings: tuple[Finding, ...]
    details: dict[str, object]
    unchecked: str | None = None  # why nothing could be judged


def edac(root: str = "/sys") -> Checked:
    controllers = sysfs.edac(root)
    details: dict[str, object] = {"controllers": [c.to_dict() for c in controllers]}
    if not controllers:
        return Checked((), details, "no EDAC memory controller in /sys/devices/system/edac/mc "
                       "(no EDAC driver loaded, or a virtual machine): host memory errors "
                       "are not reported to the kernel here")
    out = []
    for mc in controllers:
        reading = {"uncorrected": mc.uncorrected, "corrected": mc.corrected,
                   "uncorrected_noinfo": mc.uncorrected_noinfo}
        bad = [f"{d['label'] or d['name']}: {d['uncorrected']}" for d in mc.dimms
               if d["uncorrected"]]
        soft = [f"{d['label'] or d['name']}: {d['corrected']}" for d in mc.dimms
                if d["corrected"]]
        if mc.uncorrected:
            out.append(Finding(mc.name, FAIL, "any uncorrected host memory error fails",
                               f"{mc.uncorrected} uncorrected memory errors"
                               + (f" ({', '.join(bad)})" if bad else ""), reading,
                               "ACCEL_EDAC_UE"))
        elif mc.corrected:
            out.append(Finding(mc.name, WARN, "corrected host memory errors warn (a DIMM "
                               "that corrects errors is wearing out)",
                               f"{mc.corrected} corrected memory errors"
                               + (f" ({', '.join(soft)})" if soft else ""), reading,
                               "ACCEL_EDAC_CE"))
        else:
            out.append(Finding(mc.name, PASS, "no memory errors", "no memory errors", reading))
    return Checked(tuple(out), details)


def numa(root: str = "/sys", procfs: str = "/proc",
         devices: Sequence[sysfs.PciDevice] | None = None) -> Checked:
    nodes = sysfs.numa_nodes(root)
    devices = sysfs.pci_devices(root) if devices is None else devices
    placed = [d for d in devices if d.kind in ("gpu", "nic")]
    balancing = sysfs.numa_balancing(procfs)
    details: dict[str, object] = {
        "nodes": [n.to_dict() for n in nodes], "numa_balancing": balancing,
        "devices": {d.address: {"kind": d.kind, "vendor": d.vendor, "numa_node": d.numa_node}
                    for d in placed}}
    if not nodes:
        return Checked((), details, "the kernel lists no NUMA node (/sys/devices/system/node)")
    out = []
    with_cpus = [n for n in nodes if n.cpus and n.memory_bytes]
    largest = max((n.memory_bytes or 0 for n in with_cpus), default=0)
    for n in nodes:
        reading = {"cpus": len(n.cpus), "memory_bytes": n.memory_bytes}
        if n.cpus and largest and (n.memory_bytes or 0) < largest * (1 - MEMORY_IMBALANCE):
            out.append(Finding(
                f"node{n.node}", FAIL, f"a CPU node with over {MEMORY_IMBALANCE:.0%} less "
                "memory than the largest is missing memory",
                f"{(n.memory_bytes or 0) / 2**30:.1f} GiB, the largest node has "
                f"{largest / 2**30:.1f} GiB", reading, "ACCEL_NUMA"))
        elif n.cpus and not n.memory_bytes:
            out.append(Finding(f"node{n.node}", WARN, "a node with CPUs has memory",
                               "CPUs but no memory: every allocation is remote", reading,
                               "ACCEL_NUMA"))
        else:
            out.append(Finding(f"node{n.node}", PASS, "memory balanced across CPU nodes",
                               f"{len(n.cpus)} CPUs, {(n.memory_bytes or 0) / 2**30:.1f} GiB",
                               reading))
    if len(nodes) > 1:
        for d in placed:
            where = "unknown (firmware gives -1)" if d.numa_node is None else d.numa_node
            out.append(judged(d.address, "a GPU or NIC on a multi-node host has a NUMA node",
                              d.numa_node is None, f"{d.kind} {d.vendor}: NUMA node {where}",
                              {"numa_node": d.numa_node}, code="ACCEL_NUMA_AFFINITY",
                              warn_only=True))
    if any(d.kind == "gpu" for d in placed) and len(nodes) > 1:
        out.append(judged("kernel", "automatic NUMA balancing is off on a GPU node (AMD's "
                          "MI300X tuning guide: it can stall GPU work while pages move)",
                          bool(balancing), "numa_balancing is "
                          + {True: "on", False: "off", None: "unknown"}[balancing],
                          {"numa_balancing": balancing}, code="ACCEL_NUMA_BALANCING",
                          warn_only=True))
    return Checked(tuple(out), details)


def pcie(root: str = "/sys", devices: Sequence[sysfs.PciDevice] | None = None) -> Checked:
    devices = sysfs.pci_devices(root) if devices is None else devices
    by_address = {d.address: d for d in devices}
    judged_here = [d for d in devices if d.kind in ("gpu", "nic")]
    details: dict[str, object] = {"devices": [d.to_dict() for d in judged_here]}
    linked = [d for d in judged_here if d.link is not None]
    if not linked:
        why = ("no GPU or network device on PCI" if not judged_here else
               "no GPU or network device reports a PCIe link (a virtual machine's devices "
               "have none)")
        errors = tuple(f for d in judged_here for f in _aer(d))
        return Checked(errors, details, None if errors else why)
    out: list[Finding] = []
    ports: set[str] = set()
    for d in judged_here:
        port = sysfs.card_port(d, by_address)
        if port.link is not None:
            out.extend(_link_findings(d, port, by_address.get(port.parent or "")))
        out.extend(_aer(d))
        if port is not d and port.address not in ports:  # the card's own link's errors
            ports.add(port.address)
            out.extend(_aer(port))
    out.extend(_acs(devices, by_address))
    return Checked(tuple(out), details)


def _link_findings(d: sysfs.PciDevice, port: sysfs.PciDevice,
                   partner: sysfs.PciDevice | None) -> list[Finding]:
    """Width and speed of the link that leaves `d`'s card (`port`'s: `d` itself, or the
    upstream port of the switch on an AMD card) against the most both ends of it can run:
    `port`'s own maximum, and `partner`'s, the port above it, where the kernel says.

    An AMD GPU's power management (its SMU's PCIe DPM, whose link levels amdgpu lists in
    pp_dpm_pcie, each a generation and a lane count) lowers the link's speed, and often
    its width, while the GPU idles, and lspci reads the lowered link: a narrower link
    that also runs below its speed warns there, with the reason. At full speed it is not
    an idle level, and fails as on any other device."""
    assert port.link is not None
    link = port.link
    up = partner.link if partner is not None else None
    max_width = _least(link.max_width, up.max_width if up else None)
    max_speed = _least(link.max_speed_gts, up.max_speed_gts if up else None)
    reading: dict[str, object] = {
        **link.to_dict(), "port_max_width": up.max_width if up else None,
        "port_max_speed_gts": up.max_speed_gts if up else None}
    where = ""
    if port is not d:
        reading.update(card_port=port.address,
                       device_link=d.link.to_dict() if d.link is not None else None)
        where = f" at {port.address} (the card's upstream port)"
    subject = f"{d.address} ({d.kind} {d.vendor})"
    slow = bool(link.speed_gts and max_speed and link.speed_gts < max_speed)
    narrow = bool(link.width and max_width and link.width < max_width)
    if narrow and slow and d.kind == "gpu" and d.vendor_id == AMD_GPU_VENDOR:
        return [Finding(subject, WARN, AMD_IDLE_RULE,
                        f"PCIe x{link.width} {link.speed_gts:g} GT/s{where}, both ends "
                        f"support x{max_width} {max_speed:g} GT/s: expected while the GPU "
                        "idles (its power management lowers the link); read it again "
                        "under load", reading, "ACCEL_PCIE_WIDTH")]
    out = []
    if narrow:
        out.append(Finding(subject, FAIL, "a link narrower than both ends support fails",
                           f"PCIe x{link.width}{where}, both ends support x{max_width}",
                           reading, "ACCEL_PCIE_WIDTH"))
    if slow:
        idle = d.kind == "gpu"
        out.append(Finding(
            subject, WARN if idle else FAIL,
            "a link slower than both ends support fails; on a GPU it warns (GPUs lower the "
            "link speed when idle: read it again under load)" if idle else
            "a link slower than both ends support fails",
            f"PCIe {link.speed_gts:g} GT/s{where}, both ends support {max_speed:g} GT/s",
            reading, "ACCEL_PCIE_SPEED"))
    if not out:
        out.append(Finding(subject, PASS, "link at the width and speed both ends support",
                           f"PCIe x{link.width} {link.speed_gts or 0:g} GT/s{where}",
                           reading))
    return out


def _least(a: float | int | None, b: float | int | None) -> float | int | None:
    known = [v for v in (a, b) if v]
    return min(known) if known else None


def _aer(d: sysfs.PciDevice) -> list[Finding]:
    """The device's AER counters: uncorrectable errors fail, corrected ones (bad TLPs and
    DLLPs, replay rollovers and timeouts: the link retrying) warn."""
    if not d.aer:
        return []
    fatal = d.aer.get("aer_dev_fatal", {}).get("TOTAL_ERR_FATAL", 0)
    nonfatal = d.aer.get("aer_dev_nonfatal", {}).get("TOTAL_ERR_NONFATAL", 0)
    corrected = d.aer.get("aer_dev_correctable", {})
    total = corrected.get("TOTAL_ERR_COR", 0)
    subject = f"{d.address} ({d.kind} {d.vendor})"
    reading = {"fatal": fatal, "nonfatal": nonfatal, "corrected": total}
    if fatal or nonfatal:
        return [Finding(subject, FAIL, "any uncorrectable PCIe error (AER) fails",
                        f"{fatal} fatal and {nonfatal} non-fatal uncorrectable PCIe errors",
                        reading, "ACCEL_PCIE_AER")]
    if total:
        named = ", ".join(f"{k} {v}" for k, v in corrected.items()
                          if v and k != "TOTAL_ERR_COR")
        return [Finding(subject, WARN, "corrected PCIe errors (AER) warn: the link retries",
                        f"{total} corrected PCIe errors ({named})", reading,
                        "ACCEL_PCIE_AER_CE")]
    return [Finding(subject, PASS, "no PCIe errors (AER)", "no PCIe errors", reading)]


def _acs(devices: Sequence[sysfs.PciDevice],
         by_address: dict[str, sysfs.PciDevice]) -> list[Finding]:
    """Bridges between two GPUs that redirect peer-to-peer requests up to the root complex
    (ACS P2P redirect on): GPU-to-GPU copies through that switch lose its bandwidth.
    NCCL's and RCCL's troubleshooting guides ask for ACS off on bare-metal nodes."""
    gpus = [d for d in devices if d.kind == "gpu"]
    out = []
    below: dict[str, int] = {}
    for gpu in gpus:
        for part in gpu.path[1:-1]:
            below[part] = below.get(part, 0) + 1
    for address, count in sorted(below.items()):
        bridge = by_address.get(address)
        if count < 2 or bridge is None or bridge.acs_control is None:
            continue
        redirect = bridge.acs_control & ACS_REDIRECT
        out.append(judged(
            address, "a PCIe switch port above two or more GPUs does not redirect "
            "peer-to-peer traffic (ACS P2P redirect off)", bool(redirect),
            f"ACS control {bridge.acs_control:#06x} above {count} GPUs: peer-to-peer "
            + ("redirected to the root complex" if redirect else "stays in the switch"),
            {"acs_control": bridge.acs_control, "gpus_below": count,
             "redirect_bits": ACS_REDIRECT}, code="ACCEL_ACS", warn_only=True))
    return out


def visible_gpus(devices: Sequence[sysfs.PciDevice], runtime: int | None,
                 environ: Mapping[str, str] = os.environ) -> Finding:
    """Every discrete GPU on the PCI bus is one the runtime sees (topology.visible_gpus).
    A GPU that is part of the processor (sysfs.PciDevice.integrated: a Ryzen's Radeon
    beside a graphics card) is not counted: whether a runtime lists it depends on the
    runtime's build and settings, so neither count is a fault; it is named instead."""
    from accelbench.benchmarks.health import topology

    gpus = [d for d in devices if d.kind == "gpu"]
    inside = [d.address for d in gpus if d.integrated]
    found = topology.visible_gpus(len(gpus) - len(inside), runtime, environ)
    if not inside:
        return found
    return replace(found, rule=f"{found.rule}; a GPU that is part of the processor is not "
                   "counted (a runtime may or may not list it)",
                   message=f"{found.message}; integrated GPU {', '.join(inside)} not counted",
                   reading={**found.reading, "integrated": inside})


def iommu(root: str = "/sys", procfs: str = "/proc",
          devices: Sequence[sysfs.PciDevice] | None = None) -> Checked:
    state = sysfs.iommu(root, procfs)
    devices = sysfs.pci_devices(root) if devices is None else devices
    gpus = [d for d in devices if d.kind == "gpu"]
    details: dict[str, object] = {"iommu": state.to_dict()}
    if not state.present:
        return Checked((Finding("kernel", PASS, "an IOMMU, where present, passes GPU DMA "
                                "through", "no IOMMU: device DMA is not translated",
                                {"cmdline": list(state.cmdline)}),), details)
    out = []
    for gpu in gpus:
        kind = state.device_types.get(gpu.address)
        translated = kind is not None and kind.startswith("DMA")
        out.append(judged(
            gpu.address, "a GPU's IOMMU group is in passthrough (iommu=pt, as ROCm's "
            "multi-GPU system guide asks): translated DMA slows peer-to-peer and host copies",
            translated, f"IOMMU domain {kind or 'unknown'}", {"domain": kind},
            code="ACCEL_IOMMU", warn_only=True))
    if not gpus:
        out.append(Finding("kernel", PASS, "IOMMU mode recorded", "IOMMU present: "
                           + ", ".join(f"{n} {k}" for k, n in state.group_types.items()),
                           {"group_types": dict(state.group_types)}))
    return Checked(tuple(out), details)


def hugepages(root: str = "/sys") -> Checked:
    pages = sysfs.hugepages(root)
    sizes = pages["sizes"]
    reserved = ", ".join(f"{v['total']} x {k} ({v['free']} free)" for k, v in sizes.items()
                         if v["total"])
    return Checked((Finding("kernel", PASS, "hugepages recorded",
                            f"hugepages: {reserved or 'none reserved'}; transparent "
                            f"hugepages {pages['transparent'] or 'unknown'}", pages),),
                   {"hugepages": pages})
