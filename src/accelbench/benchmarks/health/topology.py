"""How the node's GPUs and NICs are wired to each other, from the PCI tree in sysfs: the
matrix `nvidia-smi topo -m` prints, for any vendor, with the same legend:

  X     the device itself
  PIX   through at most one PCIe switch (or bridge)
  PXB   through several PCIe bridges, not through the CPU's host bridge
  PHB   through one CPU's PCIe host bridge (one root complex)
  NODE  between root complexes of one NUMA node
  SYS   across NUMA nodes (the sockets' interconnect)

and, for a pair of GPUs a direct link joins, the word of that link:

  NV#   joined by # NVLinks (straight or through NVSwitches: gpu_nvidia.nvlink_pairs)
  XGMI  joined by an XGMI link, one hop (amdsmi_topo_get_link_type)

Direct GPU links are not in the PCI tree: `direct_links` reads them from amdsmi or NVML.
As in `nvidia-smi topo -m`, a direct link's word replaces the PCI word of its pair; the
PCI matrix is kept beside it. Where no library could be read, the matrix is the PCI one
and says why the direct links are missing: they are never inferred.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.benchmarks.health import gpu_amd, gpu_nvidia, sysfs
from accelbench.benchmarks.health.findings import FAIL, PASS, Finding
from accelbench.core.topology import DeviceRecord, DirectRecord, LinkRecord, TopologyRecord
from accelbench.env.telemetry.guard import Importer

LEGEND = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "NV#", "XGMI")
NOT_ASKED = "no GPU library was asked"
PairReader = Callable[[Importer], tuple[str, list[dict[str, Any]], str | None]]
_PAIR_READERS: Mapping[str, PairReader] = {"amd": gpu_amd.read_pairs,
                                           "nvidia": gpu_nvidia.read_pairs}
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
class GpuPair:
    """What a GPU library says joins two GPUs (PCI addresses `a` < `b`): `kind` "nvlink",
    "xgmi" or "pcie"; `links` the NVLinks between them; `hops` amdsmi's hop count."""

    a: str
    b: str
    kind: str
    links: int | None = None
    hops: int | None = None

    @property
    def word(self) -> str | None:
        """The matrix's word for a direct link; None where the pair has none."""
        if self.kind == "nvlink" and self.links:
            return f"NV{self.links}"
        if self.kind == "xgmi" and self.hops == 1:
            return "XGMI"
        return None

    def record(self) -> LinkRecord:
        return LinkRecord(self.a, self.b, self.kind, self.links, self.hops)

    def to_dict(self) -> dict[str, object]:
        return self.record().to_dict()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> GpuPair:
        links, hops = raw.get("links"), raw.get("hops")
        return cls(str(raw["a"]), str(raw["b"]), str(raw["kind"]),
                   links if isinstance(links, int) else None,
                   hops if isinstance(hops, int) else None)


@dataclass(frozen=True)
class DirectLinks:
    """The GPU-to-GPU links one library read; `missing` says why none could be read."""

    source: str
    pairs: tuple[GpuPair, ...] = ()
    missing: str | None = None

    @property
    def read(self) -> bool:
        return self.missing is None

    def word(self, a: str, b: str) -> str | None:
        for pair in self.pairs:
            if {pair.a, pair.b} == {a, b}:
                return pair.word
        return None

    def record(self) -> DirectRecord:
        return DirectRecord(self.source, self.read, self.missing,
                            tuple(p.record() for p in self.pairs))

    def to_dict(self) -> dict[str, object]:
        return self.record().to_dict()


def direct_links(vendor: str | None = None, *,
                 importer: Importer = importlib.import_module) -> DirectLinks:
    """The GPU-to-GPU links through the vendor's library: "amd" reads amdsmi, "nvidia"
    NVML, None tries amdsmi then NVML and keeps the first that finds GPUs."""
    if vendor is not None and vendor not in _PAIR_READERS:
        raise ValueError(f"unknown GPU vendor {vendor!r} (expected 'amd' or 'nvidia')")
    sources, reasons = [], []
    for name in (vendor,) if vendor else tuple(_PAIR_READERS):
        source, raw, missing = _PAIR_READERS[name](importer)
        if missing is None:
            return DirectLinks(source, tuple(GpuPair.from_raw(p) for p in raw))
        sources.append(source)
        reasons.append(missing)
    return DirectLinks(", ".join(sources), (), "; ".join(reasons))


@dataclass(frozen=True)
class Topology:
    """`matrix` has the direct links' words where they exist, `pci` the PCI tree's words
    only; `direct` is None where no library was asked (a topology of the PCI tree alone)."""

    devices: tuple[sysfs.PciDevice, ...]  # GPUs first, then NICs, in address order
    matrix: tuple[tuple[str, ...], ...]
    pci: tuple[tuple[str, ...], ...] = ()
    direct: DirectLinks | None = field(default=None)

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

    @property
    def direct_read(self) -> bool:
        return self.direct is not None and self.direct.read

    def signature(self) -> str:
        """The wiring without addresses, direct links included: equal on nodes wired
        alike, so a node that lost an NVLink or XGMI link differs from its peers."""
        return _signature(self.names, self.matrix)

    def pci_signature(self) -> str:
        """The PCI tree's wiring alone, to compare with nodes whose direct links were not
        read."""
        return _signature(self.names, self.pci or self.matrix)

    def record(self) -> TopologyRecord:
        """What is stored of it (core.topology)."""
        direct = self.direct.record() if self.direct is not None else DirectRecord(
            None, False, NOT_ASKED)
        return TopologyRecord(
            legend=LEGEND, names=self.names,
            devices=tuple(DeviceRecord(n, d.address, d.vendor, d.numa_node)
                          for n, d in zip(self.names, self.devices, strict=True)),
            matrix=self.matrix, pci_matrix=self.pci or self.matrix, direct=direct,
            signature=self.signature(), pci_signature=self.pci_signature())

    def to_dict(self) -> dict[str, object]:
        return self.record().to_dict()


def _signature(names: Sequence[str], matrix: Sequence[Sequence[str]]) -> str:
    rows = [" ".join(row) for row in matrix]
    return "; ".join(f"{n}: {r}" for n, r in zip(names, rows, strict=True))


def topology(devices: Sequence[sysfs.PciDevice], direct: DirectLinks | None = None
             ) -> Topology:
    """The matrix of the node's GPUs and NICs: the PCI tree's words, with the word of a
    direct link (`direct`) in place of a GPU pair's PCI word, as nvidia-smi does."""
    chosen = tuple(sorted((d for d in devices if d.kind in ("gpu", "nic")),
                          key=lambda d: (d.kind != "gpu", d.address)))
    pci = tuple(tuple(connection(a, b) for b in chosen) for a in chosen)
    if direct is None:
        return Topology(chosen, pci, pci, None)
    matrix = tuple(tuple(
        (direct.word(a.address, b.address) if a.kind == b.kind == "gpu"
         and a.address != b.address else None) or word
        for b, word in zip(chosen, row, strict=True)) for a, row in zip(chosen, pci, strict=True))
    return Topology(chosen, matrix, pci, direct)


def read(vendor: str | None) -> Topology:
    """This node's topology: the PCI tree from sysfs, with the direct links `vendor`'s
    library reads ("amd", "nvidia"; None: no library asked, the PCI tree alone)."""
    direct = direct_links(vendor) if vendor is not None else None
    return topology(sysfs.pci_devices(), direct)


def fingerprint_entry(platform: str) -> dict[str, object]:
    """The wiring a run's fingerprint keeps (env.fingerprint): the matrix of the node's
    GPUs and NICs with their NUMA nodes, direct links read on a GPU platform; where the
    tree cannot be read, why."""
    vendor = {"rocm": "amd", "cuda": "nvidia"}.get(platform)
    try:
        return read(vendor).to_dict()
    except Exception as exc:  # the fingerprint must never fail for its wiring
        return {"missing": f"{type(exc).__name__}: {str(exc)[:200]}"}


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
                       f"{runtime}", reading, "ACCEL_GPU_MISSING")
    return Finding("gpus", PASS, rule, f"{on_bus} GPUs on PCI, the runtime sees {runtime}"
                   + (f" ({', '.join(f'{k}={v}' for k, v in hidden.items())})"
                      if hidden else ""), reading)
