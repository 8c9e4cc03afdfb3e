"""The GPU/NIC wiring of a node as it is stored: health's topology check keeps it in its
case's details (details["topology"]) and every run's fingerprint under "topology"
(`benchmarks.health.topology` reads it and writes this record); `analysis.wiring`
compares nodes by it and health's view draws its matrix.

A stored wiring may be older than some of its keys (no "direct" or "pci_signature"
before direct GPU links were read) or damaged by hand: `TopologyRecord.from_dict` reads
whatever is there, each value that is missing or of another kind as absent (None, or
empty), and never raises. A fingerprint whose wiring could not be read keeps only
{"missing": why}: it reads as a record with no signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelbench.core.stored import integer, mapping, strings, text

TOPOLOGY = "topology"  # its key in a case's details and in a run's fingerprint
UNKNOWN = "?"  # a device's name, address or vendor that a damaged record lacks

__all__ = ["TOPOLOGY", "DeviceRecord", "DirectRecord", "LinkRecord", "TopologyRecord"]


@dataclass(frozen=True)
class DeviceRecord:
    """One row of the matrix: its name (GPU0, NIC0, ...), PCI address, vendor and NUMA
    node (None where the firmware does not say)."""

    name: str
    address: str
    vendor: str
    numa_node: int | None

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "address": self.address, "vendor": self.vendor,
                "numa_node": self.numa_node}

    @classmethod
    def from_dict(cls, raw: object) -> DeviceRecord | None:
        found = mapping(raw)
        if found is None:
            return None
        return cls(text(found.get("name")) or UNKNOWN, text(found.get("address")) or UNKNOWN,
                   text(found.get("vendor")) or UNKNOWN, integer(found.get("numa_node")))


@dataclass(frozen=True)
class LinkRecord:
    """A direct link between two GPUs (PCI addresses `a` < `b`): `kind` "nvlink", "xgmi"
    or "pcie", with its NVLinks (`links`) or amdsmi's hop count (`hops`)."""

    a: str
    b: str
    kind: str
    links: int | None = None
    hops: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {"a": self.a, "b": self.b, "kind": self.kind, "links": self.links,
                "hops": self.hops}

    @classmethod
    def from_dict(cls, raw: object) -> LinkRecord | None:
        """None where the pair lacks either end or its kind."""
        found = mapping(raw)
        if found is None:
            return None
        a, b, kind = (text(found.get(k)) for k in ("a", "b", "kind"))
        if a is None or b is None or kind is None:
            return None
        return cls(a, b, kind, integer(found.get("links")), integer(found.get("hops")))


@dataclass(frozen=True)
class DirectRecord:
    """The direct GPU links one library read (`source`; None where none was asked), or
    why none could be read (`missing`)."""

    source: str | None
    read: bool
    missing: str | None = None
    pairs: tuple[LinkRecord, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "read": self.read, "missing": self.missing,
                "pairs": [p.to_dict() for p in self.pairs]}

    @classmethod
    def from_dict(cls, raw: object) -> DirectRecord | None:
        """None where there is no mapping (a wiring stored before direct links were read);
        read only where the record says true."""
        found = mapping(raw)
        if found is None:
            return None
        pairs = found.get("pairs")
        links = [LinkRecord.from_dict(p) for p in pairs] if isinstance(pairs, list) else []
        return cls(text(found.get("source")), found.get("read") is True,
                   text(found.get("missing")), tuple(p for p in links if p is not None))


@dataclass(frozen=True)
class TopologyRecord:
    """A node's wiring: the matrix with the direct links' words where they exist, the PCI
    tree's alone (`pci_matrix`), and each as a signature without addresses, equal on
    nodes wired alike."""

    legend: tuple[str, ...]
    names: tuple[str, ...]  # GPU0.., NIC0..: the rows' names
    devices: tuple[DeviceRecord, ...]
    matrix: tuple[tuple[str, ...], ...]
    pci_matrix: tuple[tuple[str, ...], ...]
    direct: DirectRecord | None  # None: stored before direct links were read
    signature: str | None  # None (or empty): no wiring to compare
    pci_signature: str | None  # None: stored before direct links were read

    @property
    def direct_read(self) -> bool:
        return self.direct is not None and self.direct.read

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "legend": list(self.legend), "names": list(self.names),
            "devices": [d.to_dict() for d in self.devices],
            "matrix": [list(row) for row in self.matrix],
            "pci_matrix": [list(row) for row in self.pci_matrix]}
        if self.direct is not None:
            data["direct"] = self.direct.to_dict()
        data.update(signature=self.signature, pci_signature=self.pci_signature)
        return data

    @classmethod
    def from_dict(cls, raw: object) -> TopologyRecord | None:
        """The wiring `raw` holds (a fingerprint's "topology"); None where it is not a
        mapping."""
        found = mapping(raw)
        if found is None:
            return None
        devices = found.get("devices")
        rows = [DeviceRecord.from_dict(d) for d in devices] if isinstance(devices, list) else []
        return cls(
            legend=strings(found.get("legend")) or (),
            names=strings(found.get("names")) or (),
            devices=tuple(d for d in rows if d is not None),
            matrix=_matrix(found.get("matrix")),
            pci_matrix=_matrix(found.get("pci_matrix")),
            direct=DirectRecord.from_dict(found.get("direct")),
            signature=text(found.get("signature")),
            pci_signature=text(found.get("pci_signature")),
        )

    @classmethod
    def from_details(cls, details: Mapping[str, object]) -> TopologyRecord | None:
        """The wiring a topology check stored in its case's details; None without one."""
        return cls.from_dict(details.get(TOPOLOGY))


def _matrix(raw: object) -> tuple[tuple[str, ...], ...]:
    """The rows of a stored matrix, each cell as text; a row that is not a list is empty,
    so that the rows keep their places."""
    if not isinstance(raw, list):
        return ()
    return tuple(strings(row) or () for row in raw)
