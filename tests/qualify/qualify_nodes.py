"""A node of GPUs for the qualify tests: PyTorch's view of it (count, PCI addresses,
memory) and the vendor library's recorded answers (tests/fixtures/health), as the
figures read them."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from accelbench.benchmarks.health import sysfs
from accelbench.benchmarks.health.gpu import read_gpus
from accelbench.benchmarks.qualify import figures
from accelbench.core.device import DeviceInfo
from accelbench.env.pcie import Link
from gpu_fakes import FakeAmdSmi, FakeNvml, importer_of, load_node


def gpu_node(monkeypatch, device: DeviceInfo, node: str, *, library: bool = True,
              links: dict[str, Link] | None = None) -> list[str]:
    """A node of GPUs as PyTorch would show it (count, PCI addresses, memory) and the
    vendor library's recorded answers for it; returns the GPUs' PCI addresses."""
    recorded = load_node(node)
    amd = device.platform == "rocm"
    if amd:
        addresses = [str(g["amdsmi_get_gpu_device_bdf"]) for g in recorded["gpus"]]
    else:
        addresses = [str(g["nvmlDeviceGetPciInfo"]["busId"])[4:].lower()
                     for g in recorded["gpus"]]

    def modules() -> dict[str, object]:  # a library is started afresh for each read
        if not library:
            return {}
        if amd:
            return {"amdsmi": FakeAmdSmi(load_node(node))}
        return {"pynvml": FakeNvml(load_node(node))}

    def properties(index: int) -> SimpleNamespace:
        domain, bus, rest = addresses[index].split(":")
        return SimpleNamespace(pci_domain_id=int(domain, 16), pci_bus_id=int(bus, 16),
                               pci_device_id=int(rest.split(".")[0], 16),
                               total_memory=device.memory_bytes, name=device.name)

    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(addresses))
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    monkeypatch.setattr(figures, "read_gpus",
                        lambda vendor: read_gpus(vendor, importer=importer_of(modules())))
    monkeypatch.setattr(figures, "busy_links", lambda ctx, seconds: contextlib.nullcontext())
    monkeypatch.setattr(sysfs, "pci_devices", lambda: tuple(
        sysfs.PciDevice(a, 0x0302, 0x1002 if amd else 0x10DE, 0x74A1, 0, ("pci0000:00", a),
                        (links or {}).get(a), "amdgpu" if amd else "nvidia")
        for a in addresses))
    return addresses
