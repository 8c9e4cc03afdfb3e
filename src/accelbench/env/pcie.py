"""PCIe links as the kernel reports them, and the host link a GPU reaches host memory over.

A device's `current_link_speed` and `current_link_width` in sysfs say what its link runs
at now (a GPU at idle may have lowered it to save power), and `max_link_speed` and
`max_link_width` what the device can run it at.
What a link carries per direction follows from the PCIe specification: the transfer rate
times the lanes, less the line encoding (8b/10b up to PCIe 2.0, 128b/130b for 3.0 to 5.0;
PCIe 6.0's FLIT mode carries 242 payload bytes in each 256-byte flit), before packet
overhead, which leaves a real copy 80-90% of it. Links are full duplex: a kernel that
reads and writes host memory uses both directions at once.

The host link of a GPU is the narrowest link on its path from the root complex, since a
switch's upstream port can be narrower or slower than the GPU's own. An AMD graphics card
carries a PCIe switch of its own (`card_edge`): only its upstream port's link leaves the
card, and the links below it, inside the chip, are not on the path. It is PCIe's view:
where a GPU reaches host memory over another fabric (NVLink-C2C on a GH200, Infinity
Fabric on some MI250X nodes), sysfs still reports a PCIe link that such traffic does not
cross, and the rating says which link it is against.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The transfer rate of each PCIe generation, in GT/s.
PCIE_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# The share of the transfer rate that is payload, by generation's encoding.
_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
_GT_S = re.compile(r"([\d.]+)\s*GT/s")
# The PCI vendor ID of AMD's GPUs and of the switch ports on AMD graphics cards
# (PCI_VENDOR_ID_ATI in the kernel's include/linux/pci_ids.h); AMD's processors and
# chipsets have 0x1022.
AMD_GPU_VENDOR = 0x1002


@dataclass(frozen=True)
class Link:
    speed_gts: float | None  # the current transfer rate
    width: int | None
    max_speed_gts: float | None  # the device's own maximum
    max_width: int | None

    @property
    def generation(self) -> int | None:
        return PCIE_GENERATIONS.get(self.speed_gts) if self.speed_gts else None

    @property
    def max_generation(self) -> int | None:
        return PCIE_GENERATIONS.get(self.max_speed_gts) if self.max_speed_gts else None

    @property
    def per_direction(self) -> float | None:
        """Bytes per second the link carries each way at its current speed and width;
        None where either is unknown."""
        generation = self.generation
        if generation is None or not self.width:
            return None
        assert self.speed_gts is not None  # a generation was found from it
        return self.speed_gts * 1e9 * self.width * _ENCODING[generation] / 8

    @property
    def capability(self) -> Link:
        """The link at the device's own maximum speed and width."""
        return Link(self.max_speed_gts, self.max_width, self.max_speed_gts, self.max_width)

    def to_dict(self) -> dict[str, Any]:
        return {"speed_gts": self.speed_gts, "width": self.width,
                "max_speed_gts": self.max_speed_gts, "max_width": self.max_width,
                "generation": self.generation, "max_generation": self.max_generation}


def read_link(entry: Path) -> Link | None:
    """The link of the PCI device whose sysfs folder is `entry`; None without one."""
    speed, max_speed = _text(entry / "current_link_speed"), _text(entry / "max_link_speed")
    width, max_width = _int(entry / "current_link_width"), _int(entry / "max_link_width")
    if speed is None and width is None:
        return None
    return Link(_gts(speed), width or None, _gts(max_speed), max_width or None)


def card_edge(vendors: Sequence[int | None]) -> int:
    """Which device's link leaves a GPU's card: `vendors` are the PCI vendor IDs of the
    GPU (or another function of the card), then of each bridge above it, nearest first,
    the root port last; the answer is an index into them.

    An AMD graphics card (the Navi Radeons, whose ports lspci names "Navi 10 XL Upstream
    Port of PCI Express Switch", 1002:1478, and "... Downstream Port ...", 1002:1479)
    has a PCIe switch of its own between the slot and the GPU. The links below the
    switch's upstream port are inside the chip and read x16 at the chip's top speed
    whatever the slot (a Navi 24, x4 to the slot, reads x16 at the GPU); the upstream
    port's link is the one to the slot. amdgpu finds that link the same way, skipping
    every bridge with AMD's GPU vendor ID above the GPU (amdgpu_device_find_parent in
    drivers/gpu/drm/amd/amdgpu/amdgpu_device.c). The root port is the host's even where
    it carries that ID (AMD's ATI-era chipsets did), so the walk stops below it."""
    edge = 0
    if vendors and vendors[0] == AMD_GPU_VENDOR:
        for index in range(1, len(vendors) - 1):
            if vendors[index] != AMD_GPU_VENDOR:
                break
            edge = index
    return edge


@dataclass(frozen=True)
class HostLink:
    """The narrowest link between a GPU and the root complex, by what each device on the
    path can run at (its maximum speed and width), and the GPU's link as it was read."""

    device: str  # the GPU's address, "0000:c1:00.0"
    narrowest: str  # the device whose link that is: the GPU or a bridge above it
    link: Link  # that device's maximum speed and width
    per_direction: float  # B/s each way at that maximum
    # The link that leaves the GPU's card when read (it can train down at idle): the
    # GPU's own, or that of the upstream port of the switch on an AMD card (card_edge).
    current: Link | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "narrowest": self.narrowest,
                "generation": self.link.generation, "width": self.link.width,
                "per_direction_bytes": self.per_direction,
                "current": self.current.to_dict() if self.current else None}

    def describe(self) -> str:
        """ "PCIe 4.0 x16 (31.5 GB/s each way)", and where on the path it is."""
        from accelbench.core.units import format_value

        where = "" if self.narrowest == self.device else f", at {self.narrowest} above it"
        return (f"PCIe {self.link.generation}.0 x{self.link.width} "
                f"({format_value(self.per_direction, 'B/s')} each way{where})")


def pci_address(pci: tuple[int, int, int]) -> str:
    """ "0000:c1:00.0" from PyTorch's (pci_domain_id, pci_bus_id, pci_device_id), function 0:
    PyTorch reports no function number, and a GPU is function 0 of its device."""
    domain, bus, device = pci
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def host_link(pci: tuple[int, int, int], sysfs: str | Path = "/sys") -> HostLink | None:
    """The narrowest link on the GPU's path from the root complex, by what each device on
    it can carry each way at its maximum speed and width (so a link that trained below
    that, at idle or degraded, does not lower the yardstick), from where the link leaves
    the GPU's card (`card_edge`); None where sysfs shows no link with a known speed and
    width (a virtual machine, a device that is not there)."""
    address = pci_address(pci)
    entry = Path(sysfs, "bus", "pci", "devices", address)
    try:
        folder = entry.resolve(strict=True)
    except OSError:
        return None
    # The GPU's folder, then each bridge above it, up to the root complex ("pci0000:00").
    path: list[Path] = []
    while folder.name and not folder.name.startswith("pci") and folder.parent != folder:
        path.append(folder)
        folder = folder.parent
    path = path[card_edge([_int(f / "vendor", 16) for f in path]):]
    if not path:
        return None
    current = read_link(path[0])
    best: HostLink | None = None
    for folder in path:
        link = read_link(folder)
        most = link.capability if link is not None else None
        rate = most.per_direction if most is not None else None
        if most is not None and rate is not None and (best is None
                                                       or rate < best.per_direction):
            best = HostLink(address, folder.name, most, rate, current)
    return best


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _int(path: Path, base: int = 10) -> int | None:
    text = _text(path)
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None


def _gts(text: str | None) -> float | None:
    match = _GT_S.search(text or "")
    return float(match[1]) if match else None


def sysfs_address(bus_id: str) -> str:
    """A PCI address as sysfs spells it: NVML's "00000000:18:00.0" is "0000:18:00.0"."""
    parts = bus_id.split(":")
    if len(parts) == 3:
        with contextlib.suppress(ValueError):
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}".lower()
    return bus_id.lower()
