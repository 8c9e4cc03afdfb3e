"""How the node's GPUs and NICs are wired to each other, from the PCI tree in sysfs: the
matrix `nvidia-smi topo -m` prints, for any vendor, with the same legend:

  X     the device itself
  PIX   through at most one PCIe switch (or bridge)
  PXB   through several PCIe bridges, not through the CPU's host bridge
  PHB   through one CPU's PCIe host bridge (one root complex)
  NODE  between root complexes of one NUMA node
  SYS   across NUMA nodes (the sockets' interconnect)

Direct GPU links (XGMI, NVLink) are not in the PCI tree: the GPU check reads them from
amdsmi or NVML.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.health import sysfs
from accelbench.benchmarks.health.findings import FAIL, PASS, Finding

LEGEND = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
# The variables that hide GPUs from the runtime on purpose.
VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def connection(a: sysfs.PciDevice, b: sysfs.PciDevice) -> str:
    """The legend's word for the path between two devices."""
    if a.address == b.address:
        return "X"
    if a.path[0] != b.path[0]:
        return "NODE" if a.numa_node == b.numa_node else "SYS"
    common = 0
    for x, y in zip(a.path[:-1], b.path[:-1], strict=False):
        if x != y:
            break
        common += 1
    if common <= 1:  # only the root complex in common
        return "PHB"
    below_a, below_b = len(a.path) - 1 - common, len(b.path) - 1 - common
    return "PIX" if below_a <= 1 and below_b <= 1 else "PXB"


@dataclass(frozen=True)
class Topology:
    devices: tuple[sysfs.PciDevice, ...]  # GPUs first, then NICs, in address order
    matrix: tuple[tuple[str, ...], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """GPU0.., NIC0..: the rows' names, as nvidia-smi numbers them."""
        counts: dict[str, int] = {}
        out = []
        for d in self.devices:
            n = counts.get(d.kind, 0)
            counts[d.kind] = n + 1
            out.append(f"{d.kind.upper()}{n}")
        return tuple(out)

    def signature(self) -> str:
        """The wiring without addresses: equal on nodes wired alike."""
        rows = [" ".join(row) for row in self.matrix]
        return "; ".join(f"{n}: {r}" for n, r in zip(self.names, rows, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {"legend": list(LEGEND), "names": list(self.names),
                "devices": [{"name": n, "address": d.address, "vendor": d.vendor,
                             "numa_node": d.numa_node}
                            for n, d in zip(self.names, self.devices, strict=True)],
                "matrix": [list(row) for row in self.matrix], "signature": self.signature()}


def topology(devices: Sequence[sysfs.PciDevice]) -> Topology:
    chosen = tuple(sorted((d for d in devices if d.kind in ("gpu", "nic")),
                          key=lambda d: (d.kind != "gpu", d.address)))
    matrix = tuple(tuple(connection(a, b) for b in chosen) for a in chosen)
    return Topology(chosen, matrix)


def visible_gpus(on_bus: int, runtime: int | None,
                 environ: Mapping[str, str] = os.environ) -> Finding:
    """Every GPU on the PCI bus is one the runtime sees, unless a visibility variable hides
    some on purpose; a GPU that fell off the driver is the commonest dead node."""
    hidden = {k: environ[k] for k in VISIBILITY if k in environ}
    reading = {"on_pci": on_bus, "runtime": runtime, "visibility": hidden}
    rule = ("every GPU on the PCI bus is seen by the runtime (unless a *_VISIBLE_DEVICES "
            "variable hides it)")
    if runtime is None or on_bus == 0:
        return Finding("gpus", PASS, rule, f"{on_bus} GPUs on PCI"
                       + ("" if runtime is None else f", {runtime} seen by the runtime"),
                       reading)
    if runtime < on_bus and not hidden:
        return Finding("gpus", FAIL, rule, f"{on_bus} GPUs on PCI, the runtime sees "
                       f"{runtime}", reading)
    return Finding("gpus", PASS, rule, f"{on_bus} GPUs on PCI, the runtime sees {runtime}"
                   + (f" ({', '.join(f'{k}={v}' for k, v in hidden.items())})"
                      if hidden else ""), reading)
