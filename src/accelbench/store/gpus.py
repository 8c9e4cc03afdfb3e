"""Which physical GPU each device of a run was: the rows of the `run_gpus` table.

A run's fingerprint lists each visible GPU ("gpus": env.gpu_identity) by PyTorch index,
with the key its history is kept under (the board serial, else the UUID). The store keeps
them as rows keyed (run, device index), written with the run from its fingerprint (so a
merged or imported run brings its rows), so that the runs of one GPU can be found
whichever node it was in. The fingerprint is read as untrusted: an entry that is not of
the shape written, a key that is not short plain text or an index out of range is left
out, and each text is clipped.

Reading (`Store.gpus`, `Store.run_gpus`) counts a GPU that a run recorded by its UUID
alone (its serial unreadable there: no vendor library) as the GPU other runs recorded
with that UUID and a serial, under the serial's key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Longest text kept of a field; the most GPUs one run's fingerprint may list.
MAX_TEXT = 128
MAX_GPUS = 1024
COLUMNS = ("run_id", "device_index", "gpu_key", "uuid", "serial", "bus_id", "host", "product")


@dataclass(frozen=True)
class RunGpu:
    """One device of a run: the GPU it was (its key, UUID, serial), where, and what."""

    run_id: str
    device_index: int  # PyTorch's index in the run
    key: str
    uuid: str | None
    serial: str | None
    bus_id: str | None
    host: str
    product: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "device_index": self.device_index, "key": self.key,
                "uuid": self.uuid, "serial": self.serial, "bus_id": self.bus_id,
                "host": self.host, "product": self.product}


@dataclass(frozen=True)
class Stay:
    """A span of time a GPU was seen in one node: its first and last run there."""

    host: str
    first_seen: float
    last_seen: float
    runs: int

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "first_seen": self.first_seen,
                "last_seen": self.last_seen, "runs": self.runs}


@dataclass(frozen=True)
class StoredGpu:
    """A GPU key seen in the store: the nodes it was in (in the order it was first seen
    there), its UUID, serial and product as last seen."""

    key: str
    uuid: str | None
    serial: str | None
    product: str | None
    stays: tuple[Stay, ...]

    @property
    def first_seen(self) -> float:
        return min(s.first_seen for s in self.stays)

    @property
    def last_seen(self) -> float:
        return max(s.last_seen for s in self.stays)

    @property
    def host(self) -> str:
        """The node it was last seen in."""
        return max(self.stays, key=lambda s: s.last_seen).host

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "uuid": self.uuid, "serial": self.serial,
                "product": self.product, "host": self.host, "first_seen": self.first_seen,
                "last_seen": self.last_seen, "stays": [s.to_dict() for s in self.stays]}


def rows_of(run_id: str, host: str, fingerprint: Mapping[str, Any]
            ) -> list[tuple[str, int, str, str | None, str | None, str | None, str,
                            str | None]]:
    """The `run_gpus` rows (COLUMNS) of a run from its fingerprint; none where it lists
    no GPU or nothing readable."""
    listed = fingerprint.get("gpus") if isinstance(fingerprint, Mapping) else None
    if not isinstance(listed, list):
        return []
    rows: dict[int, tuple[str, int, str, str | None, str | None, str | None, str,
                          str | None]] = {}
    for entry in listed[:MAX_GPUS]:
        if not isinstance(entry, Mapping):
            continue
        index = entry.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_GPUS:
            continue
        uuid, serial = text(entry.get("uuid")), text(entry.get("serial"))
        key = text(entry.get("key")) or serial or uuid
        if key is None or index in rows:
            continue
        rows[index] = (run_id, index, key, uuid, serial, text(entry.get("bus_id")), host,
                       text(entry.get("product")))
    return [rows[i] for i in sorted(rows)]


def text(value: object) -> str | None:
    """A stored field as short printable text; None for anything else."""
    if not isinstance(value, str):
        return None
    clean = "".join(c if c.isprintable() else " " for c in value)
    clean = " ".join(clean.split())[:MAX_TEXT]
    return clean or None


def bare_uuid(value: object) -> str:
    """A UUID as NVML and PyTorch may each write it ("GPU-8c3f..." or "8c3f..."), alike."""
    return str(value).strip().lower().removeprefix("gpu-")
