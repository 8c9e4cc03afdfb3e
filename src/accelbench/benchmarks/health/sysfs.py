"""What the kernel says about the node's hardware, read from sysfs and procfs with no
vendor library: EDAC memory controllers, NUMA nodes, PCI devices (links, AER error
counters, ACS), the IOMMU and hugepages.

Every reader takes the roots it reads (`sysfs`, default "/sys"; `procfs`, default
"/proc"), so tests hand in faked trees. A file that is absent, unreadable or malformed
reads as None: a virtual machine has no EDAC and no link speeds, and that is said, not
guessed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelbench.env.pcie import Link, card_edge, read_link

PathLike = str | os.PathLike[str]

# PCI class codes (the top 16 bits of `class`) of the devices a node is qualified on.
GPU_CLASSES = {0x0300: "display", 0x0302: "3d", 0x0380: "display", 0x1200: "accelerator"}
NIC_CLASSES = {0x0200: "ethernet", 0x0207: "infiniband"}
BRIDGE_CLASS = 0x0604
VENDORS = {0x1002: "amd", 0x10DE: "nvidia", 0x15B3: "mellanox", 0x8086: "intel",
           0x14E4: "broadcom", 0x1DD8: "pensando", 0x1022: "amd"}
# PCIe extended capability ID of Access Control Services, and its control register's
# redirect bits: with P2P Request or Completion Redirect on, peer-to-peer traffic through
# a switch is sent up to the root complex (PCIe Base Specification, ACS capability).
ACS_CAP_ID = 0x000D
ACS_REQUEST_REDIRECT = 1 << 2
ACS_COMPLETION_REDIRECT = 1 << 3
_EXT_CAP_START = 0x100


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _int(path: Path, base: int = 10) -> int | None:
    text = _text(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def cpulist(text: str | None) -> tuple[int, ...]:
    """The CPUs of a kernel cpulist ("0-3,8,10-11"); () for none or a malformed one."""
    if not text:
        return ()
    out: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            out.extend(range(int(low), int(high or low) + 1))
    except ValueError:
        return ()
    return tuple(out)


def _counters(path: Path) -> dict[str, int] | None:
    """An AER counter file ("RxErr 0\\nBadTLP 2\\n...TOTAL_ERR_COR 2") as a dict."""
    text = _text(path)
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        name, _, value = line.strip().rpartition(" ")
        if name and value.isdigit():
            out[name.strip()] = int(value)
    return out


# ------------------------------------------------------------------------------ EDAC

@dataclass(frozen=True)
class MemoryController:
    name: str  # "mc0"
    kind: str | None  # mc_name: the EDAC driver's name for it
    corrected: int | None
    uncorrected: int | None
    corrected_noinfo: int | None  # errors the driver could not place on a DIMM
    uncorrected_noinfo: int | None
    dimms: tuple[Mapping[str, Any], ...] = ()  # label, corrected, uncorrected

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "corrected": self.corrected,
                "uncorrected": self.uncorrected, "corrected_noinfo": self.corrected_noinfo,
                "uncorrected_noinfo": self.uncorrected_noinfo,
                "dimms": [dict(d) for d in self.dimms]}


def edac(sysfs: PathLike = "/sys") -> tuple[MemoryController, ...]:
    """The EDAC memory controllers and their error counts; () where EDAC is not loaded."""
    base = Path(sysfs, "devices", "system", "edac", "mc")
    out = []
    for mc in _numbered(base, "mc"):
        dimms = tuple(
            {"name": d.name, "label": _text(d / "dimm_label"),
             "corrected": _int(d / "dimm_ce_count"), "uncorrected": _int(d / "dimm_ue_count")}
            for d in [*_numbered(mc, "dimm"), *_numbered(mc, "rank")])
        out.append(MemoryController(
            mc.name, _text(mc / "mc_name"), _int(mc / "ce_count"), _int(mc / "ue_count"),
            _int(mc / "ce_noinfo_count"), _int(mc / "ue_noinfo_count"), dimms))
    return tuple(out)


def _numbered(base: Path, prefix: str) -> Iterator[Path]:
    """base/<prefix>N folders in N's order."""
    try:
        found = [p for p in base.iterdir() if re.fullmatch(rf"{prefix}\d+", p.name)]
    except OSError:
        return iter(())
    return iter(sorted(found, key=lambda p: int(p.name[len(prefix):])))


# ------------------------------------------------------------------------------ NUMA

@dataclass(frozen=True)
class NumaNode:
    node: int
    cpus: tuple[int, ...]
    memory_bytes: int | None  # MemTotal
    free_bytes: int | None
    distances: tuple[int, ...]  # to every node, in node order (SLIT)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "cpus": _ranges(self.cpus), "memory_bytes": self.memory_bytes,
                "free_bytes": self.free_bytes, "distances": list(self.distances)}


def numa_nodes(sysfs: PathLike = "/sys") -> tuple[NumaNode, ...]:
    """The NUMA nodes online; () where the kernel shows none (built without NUMA)."""
    out = []
    for path in _numbered(Path(sysfs, "devices", "system", "node"), "node"):
        meminfo = _meminfo(path / "meminfo")
        distances = tuple(int(d) for d in (_text(path / "distance") or "").split() if d.isdigit())
        out.append(NumaNode(int(path.name[4:]), cpulist(_text(path / "cpulist")),
                            meminfo.get("MemTotal"), meminfo.get("MemFree"), distances))
    return tuple(out)


def _meminfo(path: Path) -> dict[str, int]:
    """A node's meminfo ("Node 0 MemTotal:  24683664 kB") in bytes."""
    out = {}
    for line in (_text(path) or "").splitlines():
        match = re.match(r"Node\s+\d+\s+(\w+):\s+(\d+)\s*(kB)?", line)
        if match:
            out[match[1]] = int(match[2]) * (1024 if match[3] else 1)
    return out


def _ranges(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> "0-2,5": how the kernel writes a cpulist."""
    parts: list[str] = []
    for cpu in cpus:
        if parts and parts[-1].split("-")[-1] == str(cpu - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


def numa_balancing(procfs: PathLike = "/proc") -> bool | None:
    """Whether the kernel's automatic NUMA balancing is on; None where it cannot say."""
    value = _int(Path(procfs, "sys", "kernel", "numa_balancing"))
    return None if value is None else value != 0


# ------------------------------------------------------------------------------- PCI

@dataclass(frozen=True)
class PciDevice:
    address: str  # "0000:c1:00.0"
    class_code: int  # the top 16 bits of the class: 0x0302 a 3D controller
    vendor_id: int
    device_id: int
    numa_node: int | None  # None where the firmware does not say (-1)
    path: tuple[str, ...]  # from the root complex down: ("pci0000:c0", "0000:c0:01.1", ...)
    link: Link | None  # None where the device has no PCIe link attributes (virtual)
    driver: str | None
    aer: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # file -> counters
    acs_control: int | None = None  # the ACS control register, where the device has one
    integrated: bool = False  # a GPU that is part of the processor (`_integrated`)

    @property
    def kind(self) -> str:
        if self.class_code in GPU_CLASSES and self.vendor_id in (0x1002, 0x10DE):
            return "gpu"
        if self.class_code in NIC_CLASSES:
            return "nic"
        if self.class_code == BRIDGE_CLASS:
            return "bridge"
        return "other"

    @property
    def vendor(self) -> str:
        return VENDORS.get(self.vendor_id, f"{self.vendor_id:#06x}")

    @property
    def parent(self) -> str | None:
        """The bridge (or root port) above it; None at the root complex."""
        return self.path[-2] if len(self.path) > 2 else None

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "kind": self.kind, "class": f"{self.class_code:#06x}",
                "vendor": self.vendor, "device": f"{self.device_id:#06x}",
                "numa_node": self.numa_node, "path": list(self.path), "driver": self.driver,
                "link": self.link.to_dict() if self.link else None,
                "aer": {k: dict(v) for k, v in self.aer.items()},
                "acs_control": self.acs_control, "integrated": self.integrated}


def pci_devices(sysfs: PathLike = "/sys") -> tuple[PciDevice, ...]:
    """Every PCI device the kernel lists, in address order."""
    base = Path(sysfs, "bus", "pci", "devices")
    try:
        entries = sorted(base.iterdir(), key=lambda p: p.name)
    except OSError:
        return ()
    out = []
    for entry in entries:
        device = _pci_device(entry, Path(sysfs))
        if device is not None:
            out.append(device)
    inside = _integrated(out)
    return tuple(replace(d, integrated=True) if d.address in inside else d for d in out)


def _integrated(devices: Sequence[PciDevice]) -> set[str]:
    """The GPUs that are part of the processor: those that share their PCI device (bus and
    device number) with a function of another vendor. An AMD APU's Radeon is function 0
    of a PCI device inside the processor whose other functions are the processor's own
    and carry AMD's CPU vendor ID 0x1022 (a Ryzen 7000's: 0f:00.0 the Radeon 1002:164e,
    0f:00.1 its HDMI audio 1002:1640, 0f:00.2 the PSP/CCP 1022:1649, 0f:00.3 and 0f:00.4
    USB 1022:15b6 and 15b7), where a graphics card's functions (GPU, HDMI audio, USB-C)
    all carry its maker's ID. The bus does not tell them apart (an APU's Radeon sits
    behind an internal bridge, as a card sits behind a root port), nor does amdgpu's APU
    flag: an Instinct MI300A is an APU to amdgpu, and a GPU every runtime lists."""
    vendors: dict[str, set[int]] = {}
    for d in devices:
        vendors.setdefault(d.address.rpartition(".")[0], set()).add(d.vendor_id)
    return {d.address for d in devices
            if d.kind == "gpu" and vendors[d.address.rpartition(".")[0]] - {d.vendor_id}}


def card_port(device: PciDevice, by_address: Mapping[str, PciDevice]) -> PciDevice:
    """The device whose link leaves `device`'s card: the upstream port of the PCIe switch
    on an AMD graphics card (env.pcie.card_edge), else the device itself."""
    chain = [device]
    for address in reversed(device.path[1:-1]):  # the bridges above it, nearest first
        bridge = by_address.get(address)
        if bridge is None:
            break
        chain.append(bridge)
    return chain[card_edge([d.vendor_id for d in chain])]


def _pci_device(entry: Path, sysfs: Path) -> PciDevice | None:
    class_code = _int(entry / "class", 16)
    vendor = _int(entry / "vendor", 16)
    if class_code is None or vendor is None:
        return None
    numa = _int(entry / "numa_node")
    driver = entry / "driver"
    return PciDevice(
        entry.name, class_code >> 8, vendor, _int(entry / "device", 16) or 0,
        numa if numa is not None and numa >= 0 else None, _pci_path(entry, sysfs),
        read_link(entry), Path(os.readlink(driver)).name if driver.is_symlink() else None,
        {name: counters for name in ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal")
         if (counters := _counters(entry / name)) is not None},
        _acs_control(entry / "config"))


def _pci_path(entry: Path, sysfs: Path) -> tuple[str, ...]:
    """The device's place in the PCI tree: the folders from the root complex down to it."""
    try:
        real = entry.resolve()
        parts = real.relative_to(Path(sysfs, "devices").resolve()).parts
    except (OSError, ValueError):
        return (entry.name,)
    for i, part in enumerate(parts):
        if part.startswith("pci"):
            return tuple(parts[i:])
    return (entry.name,)


def _acs_control(config: Path) -> int | None:
    """The ACS control register from the device's extended configuration space; None
    without one (or where only the first 256 bytes are readable: not root)."""
    try:
        data = config.read_bytes()
    except OSError:
        return None
    offset, seen = _EXT_CAP_START, set()
    while offset >= _EXT_CAP_START and offset + 8 <= len(data) and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(data[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            return int.from_bytes(data[offset + 6:offset + 8], "little")
        offset = (header >> 20) & 0xFFC
    return None


# ------------------------------------------------------------------- IOMMU, hugepages

@dataclass(frozen=True)
class Iommu:
    units: tuple[str, ...]  # /sys/class/iommu: dmar0, ivhd0, ...
    group_types: Mapping[str, int]  # default domain type -> groups: identity, DMA, DMA-FQ
    device_types: Mapping[str, str]  # PCI address -> its group's domain type
    cmdline: tuple[str, ...]  # the kernel's iommu options: iommu=pt, amd_iommu=on, ...

    @property
    def present(self) -> bool:
        return bool(self.units or self.group_types)

    def to_dict(self) -> dict[str, Any]:
        return {"units": list(self.units), "group_types": dict(self.group_types),
                "cmdline": list(self.cmdline)}


def iommu(sysfs: PathLike = "/sys", procfs: PathLike = "/proc") -> Iommu:
    try:
        units = tuple(sorted(p.name for p in Path(sysfs, "class", "iommu").iterdir()))
    except OSError:
        units = ()
    types: dict[str, int] = {}
    devices: dict[str, str] = {}
    for group in _numbered(Path(sysfs, "kernel", "iommu_groups"), ""):
        kind = _text(group / "type") or "unknown"
        types[kind] = types.get(kind, 0) + 1
        try:
            for member in (group / "devices").iterdir():
                devices[member.name] = kind
        except OSError:
            pass
    words = (_text(Path(procfs, "cmdline")) or "").split()
    options = tuple(w for w in words if re.match(r"(iommu|amd_iommu|intel_iommu)=", w))
    return Iommu(units, types, devices, options)


def hugepages(sysfs: PathLike = "/sys") -> dict[str, Any]:
    """Hugepages reserved and free per size, and transparent hugepages' mode."""
    sizes = {}
    base = Path(sysfs, "kernel", "mm", "hugepages")
    try:
        folders = sorted(base.iterdir(), key=lambda p: p.name)
    except OSError:
        folders = []
    for folder in folders:
        size = folder.name.removeprefix("hugepages-")
        sizes[size] = {"total": _int(folder / "nr_hugepages"),
                       "free": _int(folder / "free_hugepages")}
    mode = _text(Path(sysfs, "kernel", "mm", "transparent_hugepage", "enabled"))
    chosen = re.search(r"\[(\w+)\]", mode or "")
    return {"sizes": sizes, "transparent": chosen[1] if chosen else None}
