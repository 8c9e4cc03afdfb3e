"""The wiring a topology check stores (and a run's fingerprint keeps), as a typed record
(core.topology): what health writes round-trips byte for byte, and a stored wiring that
is old or damaged reads as the fleet's wiring check and the report have always read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from accelbench.analysis.latest import node_states
from accelbench.analysis.wiring import Wiring, wiring_of
from accelbench.benchmarks.health import sysfs, topology
from accelbench.benchmarks.health.view import topology_table
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.topology import (
    DeviceRecord,
    DirectRecord,
    LinkRecord,
    TopologyRecord,
)
from accelbench.store import RunRecord, StoredRun

GPU0, GPU1, NIC = "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"
CASE = Case.make("health", "h1", "health", {"check": "topology"}, "cuda:0")


def _devices() -> tuple[sysfs.PciDevice, ...]:
    """Two GPUs and a NIC below one PCIe switch of socket 0."""
    root = ("pci0000:00", "0000:00:01.0", "0000:01:00.0")
    return (sysfs.PciDevice(GPU0, 0x0302, 0x10DE, 0x2330, 0, (*root, GPU0), None, None),
            sysfs.PciDevice(GPU1, 0x0302, 0x10DE, 0x2330, None, (*root, GPU1), None, None),
            sysfs.PciDevice(NIC, 0x0200, 0x15B3, 0x1021, 0, (*root, NIC), None, None))


def _linked() -> topology.Topology:
    pair = topology.GpuPair(GPU0, GPU1, "nvlink", 18)
    return topology.topology(_devices(), topology.DirectLinks("nvml", (pair,)))


# What `Topology.to_dict` stored for `_linked()` before the record was typed.
STORED = {
    "legend": ["X", "PIX", "PXB", "PHB", "NODE", "SYS", "NV#", "XGMI"],
    "names": ["GPU0", "GPU1", "NIC0"],
    "devices": [
        {"name": "GPU0", "address": GPU0, "vendor": "nvidia", "numa_node": 0},
        {"name": "GPU1", "address": GPU1, "vendor": "nvidia", "numa_node": None},
        {"name": "NIC0", "address": NIC, "vendor": "mellanox", "numa_node": 0}],
    "matrix": [["X", "NV18", "PIX"], ["NV18", "X", "PIX"], ["PIX", "PIX", "X"]],
    "pci_matrix": [["X", "PIX", "PIX"], ["PIX", "X", "PIX"], ["PIX", "PIX", "X"]],
    "direct": {"source": "nvml", "read": True, "missing": None,
               "pairs": [{"a": GPU0, "b": GPU1, "kind": "nvlink", "links": 18, "hops": None}]},
    "signature": "GPU0: X NV18 PIX; GPU1: NV18 X PIX; NIC0: PIX PIX X",
    "pci_signature": "GPU0: X PIX PIX; GPU1: PIX X PIX; NIC0: PIX PIX X",
}


def test_the_stored_wiring_is_as_before_and_reads_back() -> None:
    wiring = _linked()
    stored = wiring.to_dict()
    assert json.dumps(stored) == json.dumps(STORED)  # keys, order and values
    record = TopologyRecord.from_details({"topology": json.loads(json.dumps(stored))})
    assert record == wiring.record()
    assert record is not None and json.dumps(record.to_dict()) == json.dumps(stored)
    assert record.direct_read and record.direct == DirectRecord(
        "nvml", True, None, (LinkRecord(GPU0, GPU1, "nvlink", 18),))


def test_a_wiring_read_without_a_gpu_library_says_so() -> None:
    stored = topology.topology(_devices()).to_dict()
    assert stored["direct"] == {"source": None, "read": False,
                                "missing": "no GPU library was asked", "pairs": []}
    assert stored["signature"] == stored["pci_signature"]
    record = TopologyRecord.from_dict(json.loads(json.dumps(stored)))
    assert record is not None and not record.direct_read
    assert json.dumps(record.to_dict()) == json.dumps(stored)


def _read_before(wiring: Any) -> tuple[str, str, bool] | None:
    """How `analysis.wiring` read a stored wiring before the record was typed."""
    found = wiring.get("signature") if isinstance(wiring, Mapping) else None
    if not isinstance(found, str) or not found:
        return None
    pci = wiring.get("pci_signature")
    direct = wiring.get("direct")
    read = isinstance(direct, Mapping) and direct.get("read") is True
    return found, pci if isinstance(pci, str) and pci else found, read


DAMAGED: list[Any] = [
    None, [], "GPU0: X", {}, {"missing": "OSError: no /sys"}, {"signature": ""},
    {"signature": 5}, {"signature": ["GPU0: X"]}, {"signature": "GPU0: X"},
    {"signature": "GPU0: X", "pci_signature": ""},
    {"signature": "GPU0: X", "pci_signature": 7, "direct": {"read": "yes"}},
    {"signature": "GPU0: X", "pci_signature": "GPU0: X", "direct": {"read": 1}},
    {"signature": "GPU0: X", "direct": ["read"]},
    {"signature": "GPU0: X", "pci_signature": "p", "direct": {"read": True}},
    {**STORED, "names": "GPU0", "matrix": "X", "devices": [None, {"name": 3}]},
]


def _state(details: dict[str, Any], fingerprint: dict[str, Any]) -> Any:
    record = RunRecord("r1", 1.8e9, 1.8e9 + 60, "complete", "health", ("health",), "cuda:0",
                       "stack", "n1", "0.1.0", "fp-n1", 1, 0, 0)
    [state] = node_states([StoredRun(record, fingerprint, (
        Measurement(CASE, "ok", time_name="", details=details),))])
    return state


@pytest.mark.parametrize("stored", DAMAGED)
def test_a_damaged_wiring_reads_as_the_wiring_check_read_it(stored) -> None:
    before = _read_before(stored)
    found = wiring_of(_state({"topology": stored}, {}))
    assert found == (None if before is None else Wiring(*before, CASE.label, CASE.key))
    # The same wiring kept by a run's fingerprint, the case storing none.
    found = wiring_of(_state({}, {"topology": stored}))
    assert found == (None if before is None else Wiring(*before, "the run's fingerprint", "",
                                                        "r1"))


def test_a_damaged_wiring_is_drawn_with_what_it_holds() -> None:
    def table(stored: object) -> Any:
        return topology_table([Measurement(CASE, "ok", time_name="",
                                           details={"topology": stored})])

    assert table(None) is None and table({"names": ["GPU0"]}) is None
    assert table({**STORED, "names": "GPU0, GPU1"}) is None  # not a list of names
    drawn = table(STORED)
    assert drawn.header == ("", "GPU0", "GPU1", "NIC0")
    assert drawn.rows[0] == ("GPU0", "X", "NV18", "PIX")
    assert "GPU1: NUMA node ? (0000:04:00.0)" in drawn.notes[0]
    assert drawn.notes[1] == "NVLink/XGMI links read from nvml."
    # Before direct links were read; and, where the record lacks what the table needs (a
    # KeyError before), what it holds.
    old = {k: v for k, v in STORED.items() if k not in ("direct", "pci_signature")}
    assert table(old).notes[1] == "PCI tree only: NVLink/XGMI links were not read."
    bare = table({"names": ["GPU0", "GPU1"], "matrix": [["X", "NV18"], "X NV18"],
                  "devices": [{"name": "GPU0"}, 4],
                  "direct": {"read": False, "missing": "No module named 'pynvml'"}})
    assert bare.rows == [("GPU0", "X", "NV18"), ("GPU1",)]
    assert bare.notes[0].endswith("XGMI one XGMI hop. GPU0: NUMA node ? (?)")
    assert bare.notes[1] == ("PCI tree only: NVLink/XGMI links not read (No module named "
                             "'pynvml').")


def test_a_record_reads_each_value_of_another_kind_as_absent() -> None:
    record = TopologyRecord.from_dict({
        "legend": "X", "names": [0, "GPU1"], "devices": [{"numa_node": "0"}],
        "matrix": [[1, None]], "direct": {"source": 3, "read": "true", "pairs": [{"a": GPU0}]},
        "signature": None, "pci_signature": 4})
    assert record == TopologyRecord(
        legend=(), names=("0", "GPU1"), devices=(DeviceRecord("?", "?", "?", None),),
        matrix=(("1", "None"),), pci_matrix=(), direct=DirectRecord(None, False),
        signature=None, pci_signature=None)
    assert TopologyRecord.from_details({}) is None
