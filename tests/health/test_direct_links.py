"""Direct GPU links in the wiring matrix: NVLink from pynvml and XGMI from amdsmi, replayed
from the recorded 8-GPU nodes (tests/fixtures/health), merged over the PCI tree's words,
and the matrix when no GPU library can be read."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.benchmarks.health import sysfs, topology
from accelbench.benchmarks.health.findings import conclude
from accelbench.benchmarks.health.gpu_nvidia import nvlink_pairs
from accelbench.benchmarks.health.view import topology_table
from accelbench.core.case import Case
from accelbench.core.measurement import from_result
from gpu_fakes import FakeAmdSmi, FakeNvml, importer_of, load_node

NIC = "0000:1f:00.0"


def _devices(node: dict[str, Any], vendor: str) -> tuple[sysfs.PciDevice, ...]:
    """The recorded node's GPUs as sysfs lists them, each on its own root port, the first
    half on NUMA node 0 and the rest on node 1, and a NIC on GPU0's root port."""
    if vendor == "nvidia":
        addresses = ["0000:" + g["nvmlDeviceGetPciInfo"]["busId"].split(":", 1)[1].lower()
                     for g in node["gpus"]]
        vendor_id = 0x10DE
    else:
        addresses = [g["amdsmi_get_gpu_device_bdf"] for g in node["gpus"]]
        vendor_id = 0x1002
    half = len(addresses) // 2
    out = [sysfs.PciDevice(a, 0x0302, vendor_id, 0x1, int(i >= half),
                           (f"pci0000:{a[5:7]}", f"0000:{a[5:7]}:01.1", a), None, None)
           for i, a in enumerate(addresses)]
    first = addresses[0]
    out.append(sysfs.PciDevice(NIC, 0x0200, 0x15B3, 0x1021, 0,
                               (f"pci0000:{first[5:7]}", f"0000:{first[5:7]}:02.1", NIC),
                               None, None))
    return tuple(out)


def nvidia_wiring(node: dict[str, Any]) -> topology.Topology:
    direct = topology.direct_links("nvidia", importer=importer_of({"pynvml": FakeNvml(node)}))
    return topology.topology(_devices(node, "nvidia"), direct)


def amd_wiring(node: dict[str, Any]) -> topology.Topology:
    direct = topology.direct_links("amd", importer=importer_of({"amdsmi": FakeAmdSmi(node)}))
    return topology.topology(_devices(node, "amd"), direct)


def gpu_words(wiring: topology.Topology) -> dict[tuple[int, int], str]:
    """(row, column) -> word, for every pair of two different GPUs."""
    gpus = [i for i, d in enumerate(wiring.devices) if d.kind == "gpu"]
    return {(i, j): wiring.matrix[i][j] for i in gpus for j in gpus if i != j}


def test_every_pair_of_an_hgx_h100_node_reads_nv18() -> None:
    wiring = nvidia_wiring(load_node("h100-sxm-healthy"))
    assert wiring.names[:8] == tuple(f"GPU{i}" for i in range(8)) and wiring.names[8] == "NIC0"
    assert set(gpu_words(wiring).values()) == {"NV18"}
    assert wiring.direct is not None and wiring.direct.read
    assert wiring.direct.source == "nvml" and len(wiring.direct.pairs) == 28
    # the PCI words stay where no direct link exists, and are kept for GPU pairs too
    assert wiring.matrix[0][8] == "PHB" and wiring.matrix[7][8] == "SYS"
    assert wiring.pci[0][1] == "NODE" and wiring.pci[0][7] == "SYS"
    stored: dict[str, Any] = wiring.to_dict()
    assert stored["matrix"][0][1] == "NV18" and stored["pci_matrix"][0][1] == "NODE"
    assert stored["direct"]["read"] is True and stored["direct"]["missing"] is None
    assert "NV#" in stored["legend"] and "XGMI" in stored["legend"]
    assert "NV18" in stored["signature"] and "NV18" not in stored["pci_signature"]


def test_switch_links_count_without_nvml_naming_the_far_end_type() -> None:
    """Older drivers do not answer nvmlDeviceGetNvLinkRemoteDeviceType: a far end that
    is not a GPU of the node is then taken for a switch."""
    node = load_node("h100-sxm-healthy")
    for gpu in node["gpus"]:
        del gpu["nvmlDeviceGetNvLinkRemoteDeviceType"]
    assert set(gpu_words(nvidia_wiring(node)).values()) == {"NV18"}


def test_a_gpu_that_lost_an_nvlink_reads_nv17_with_every_peer() -> None:
    healthy = nvidia_wiring(load_node("h100-sxm-healthy"))
    node = load_node("h100-sxm-healthy")
    node["gpus"][3]["nvmlDeviceGetNvLinkState"][5] = 0
    broken = nvidia_wiring(node)
    words = gpu_words(broken)
    assert {w for (i, j), w in words.items() if 3 in (i, j)} == {"NV17"}
    assert {w for (i, j), w in words.items() if 3 not in (i, j)} == {"NV18"}
    assert broken.signature() != healthy.signature()
    assert broken.pci_signature() == healthy.pci_signature()


def test_nvlink_pairs_straight_and_through_switches() -> None:
    a, b, c = "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"
    s1, s2 = "0000:f1:00.0", "0000:f2:00.0"

    def ends(*remotes: tuple[str | None, bool | None]) -> list[dict[str, Any]]:
        return [{"remote": r, "switch": s} for r, s in remotes]

    pairs = nvlink_pairs([
        {"bus_id": a, "ends": ends((b, False), (b, False), (s1, True), (s2, True), (None, None))},
        {"bus_id": b, "ends": ends((a, False), (a, False), (s1, True), (s1, True))},
        {"bus_id": c, "ends": ends((s1, None), (s2, None), (s2, None), (a, False))},
        None,  # a GPU NVML could not open
    ])
    found = {(p["a"], p["b"]): (p["links"], p["direct"], p["switched"]) for p in pairs}
    # a-b: 2 straight, and s1 (a has 1, b has 2): 1; s2: b has none
    assert found[(a, b)] == (3, 2, 1)
    # a-c: c's link to a is not matched by one from a to c; s1: 1, s2: min(1, 2) = 1
    assert found[(a, c)] == (2, 0, 2)
    assert found[(b, c)] == (1, 0, 1)  # s1 only


def test_every_pair_of_an_mi300x_node_is_one_xgmi_hop() -> None:
    wiring = amd_wiring(load_node("mi300x-healthy"))
    assert set(gpu_words(wiring).values()) == {"XGMI"}
    assert wiring.direct is not None and wiring.direct.source == "amdsmi"
    assert {(p.kind, p.hops) for p in wiring.direct.pairs} == {("xgmi", 1)}
    assert len(wiring.direct.pairs) == 28
    assert wiring.pci[0][1] == "NODE"


def test_an_mi300x_pair_without_its_xgmi_link_keeps_its_pci_word() -> None:
    healthy = amd_wiring(load_node("mi300x-healthy"))
    broken = amd_wiring(load_node("mi300x-xgmi-link-down"))
    words = gpu_words(broken)
    assert words[(2, 7)] == words[(7, 2)] == "SYS"  # two XGMI hops: no direct link
    assert {w for pair, w in words.items() if pair not in ((2, 7), (7, 2))} == {"XGMI"}
    stored: dict[str, Any] = broken.to_dict()
    [pair] = [p for p in stored["direct"]["pairs"] if p["hops"] != 1]
    assert (pair["a"], pair["b"], pair["kind"], pair["hops"]) == (
        "0000:46:00.0", "0000:e5:00.0", "xgmi", 2)
    assert broken.signature() != healthy.signature()
    assert broken.pci_signature() == healthy.pci_signature()


def test_without_a_gpu_library_the_matrix_is_the_pci_one_and_says_why() -> None:
    node = load_node("h100-sxm-healthy")
    direct = topology.direct_links(importer=importer_of({}))
    assert not direct.read and not direct.pairs
    assert "amdsmi" in str(direct.missing) and "pynvml" in str(direct.missing)
    wiring = topology.topology(_devices(node, "nvidia"), direct)
    assert wiring.matrix == wiring.pci and "NV" not in wiring.signature()
    stored: dict[str, Any] = wiring.to_dict()
    assert stored["direct"]["read"] is False and stored["direct"]["missing"] == direct.missing
    assert stored["signature"] == stored["pci_signature"]


def test_a_library_that_does_not_start_reads_no_links() -> None:
    nvml = FakeNvml(load_node("h100-sxm-healthy"), init_fails="DriverNotLoaded")
    direct = topology.direct_links("nvidia", importer=importer_of({"pynvml": nvml}))
    assert not direct.read and "NVML did not start" in str(direct.missing)


def _table_notes(wiring: topology.Topology) -> tuple[list[list[str]], str]:
    case = Case.make("health", "h1", "health", {"check": "topology"}, "cuda:0")
    m = from_result(case, conclude([topology.visible_gpus(8, 8, {})],
                                   {"topology": wiring.to_dict()}, None), (), 1.8e9, 0.1)
    table = topology_table([m])
    assert table is not None
    return [list(r) for r in table.rows], " ".join(table.notes)


def test_the_health_view_shows_the_direct_link_words_and_their_source() -> None:
    rows, notes = _table_notes(nvidia_wiring(load_node("h100-sxm-healthy")))
    assert rows[0][:3] == ["GPU0", "X", "NV18"]
    assert "NV# joined by # NVLinks" in notes and "read from nvml" in notes
    node = load_node("h100-sxm-healthy")
    pci_only = topology.topology(_devices(node, "nvidia"),
                                 topology.direct_links(importer=importer_of({})))
    rows, notes = _table_notes(pci_only)
    assert rows[0][:3] == ["GPU0", "X", "NODE"]
    assert "NVLink/XGMI links not read (" in notes


@pytest.mark.parametrize("vendor", ["intel"])
def test_an_unknown_vendor_is_refused(vendor: str) -> None:
    with pytest.raises(ValueError, match="unknown GPU vendor"):
        topology.direct_links(vendor, importer=importer_of({}))


def test_the_topology_case_stores_why_no_direct_link_was_read(execute_health,
                                                               monkeypatch) -> None:
    """On this machine's sysfs, with no GPU library importable: the PCI matrix, and the
    reason in the stored details."""
    read = topology.direct_links
    monkeypatch.setattr(topology, "direct_links",
                        lambda vendor=None: read(vendor, importer=importer_of({})))
    m = execute_health("health", check="topology")
    direct = m.details["topology"]["direct"]
    assert direct["read"] is False and direct["pairs"] == []
    assert "amdsmi" in direct["missing"] and "pynvml" in direct["missing"]
    assert m.details["topology"]["matrix"] == m.details["topology"]["pci_matrix"]
