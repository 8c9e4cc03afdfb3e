"""The host's health checks on fake sysfs trees (a healthy two-socket GPU node broken one
way at a time), and on this machine's own sysfs."""

from __future__ import annotations

from pathlib import Path

import pytest
from sysfs_tree import GEN4, GPU0, GPU1, GPU2, NIC0, SWITCH_DOWN, Node, acs_config, gpu_node

from accelbench.benchmarks.health import host_checks, sysfs, topology
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, conclude, worst
from accelbench.core.measurement import CaseFailed, CaseSkipped


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return gpu_node(tmp_path)


def _levels(findings: tuple[Finding, ...]) -> dict[str, str]:
    return {f.subject: f.level for f in findings}


def test_the_healthy_node_passes_every_host_check(node: Node) -> None:
    for checked in (host_checks.edac(str(node.sys)),
                    host_checks.numa(str(node.sys), str(node.proc)),
                    host_checks.pcie(str(node.sys)),
                    host_checks.iommu(str(node.sys), str(node.proc)),
                    host_checks.hugepages(str(node.sys))):
        assert checked.findings and checked.unchecked is None
        assert worst(checked.findings) == PASS, [f.message for f in checked.findings]


def test_the_pci_tree_is_read_as_the_kernel_lays_it_out(node: Node) -> None:
    devices = {d.address: d for d in sysfs.pci_devices(node.sys)}
    gpu = devices[GPU0]
    assert gpu.kind == "gpu" and gpu.vendor == "nvidia" and gpu.numa_node == 0
    assert gpu.path == ("pci0000:00", "0000:00:01.1", "0000:01:00.0", SWITCH_DOWN[0], GPU0)
    assert gpu.parent == SWITCH_DOWN[0]
    assert gpu.link is not None and gpu.link.generation == 5 and gpu.link.width == 16
    assert devices[NIC0].kind == "nic" and devices[NIC0].vendor == "mellanox"
    assert devices["0000:00:14.0"].link is None  # a device without a PCIe link
    assert devices[SWITCH_DOWN[0]].acs_control == 0x0011
    assert devices[GPU0].acs_control is None  # only the first 256 bytes: no ACS


def test_uncorrected_host_memory_errors_fail_naming_the_dimm(node: Node) -> None:
    mc = node.sys / "devices" / "system" / "edac" / "mc" / "mc1"
    (mc / "ue_count").write_text("2\n")
    (mc / "dimm1" / "dimm_ue_count").write_text("2\n")
    (node.sys / "devices/system/edac/mc/mc0/ce_count").write_text("5\n")
    found = _levels(host_checks.edac(str(node.sys)).findings)
    assert found == {"mc0": WARN, "mc1": FAIL}
    with pytest.raises(CaseFailed, match=r"mc1: 2 uncorrected memory errors \(P1_DIMM_B1: 2\)"):
        conclude(host_checks.edac(str(node.sys)).findings, {}, None)


def test_a_host_without_edac_is_skipped_with_the_reason(tmp_path: Path) -> None:
    checked = host_checks.edac(str(tmp_path))
    assert not checked.findings and checked.unchecked is not None
    with pytest.raises(CaseSkipped, match="no EDAC memory controller"):
        conclude(checked.findings, checked.details, checked.unchecked)


def test_a_link_narrower_than_both_ends_support_fails(node: Node) -> None:
    node.set(GPU1, "current_link_width", "8")
    node.set(GPU1, "current_link_speed", GEN4)
    findings = host_checks.pcie(str(node.sys)).findings
    bad = [f for f in findings if f.subject.startswith(GPU1) and "error" not in f.message]
    assert {f.level for f in bad} == {FAIL, WARN}  # width fails; a GPU's speed may be idle
    narrow = next(f for f in bad if f.level == FAIL)
    assert narrow.message == "PCIe x8, both ends support x16"
    assert narrow.reading["width"] == 8 and narrow.reading["max_width"] == 16
    with pytest.raises(CaseFailed, match=f"{GPU1}.*PCIe x8, both ends support x16"):
        conclude(findings, {}, None)


def test_a_slow_nic_link_fails_and_a_slot_that_caps_the_card_is_no_finding(node: Node) -> None:
    node.set(NIC0, "current_link_speed", GEN4)
    nic = [f for f in host_checks.pcie(str(node.sys)).findings if f.subject.startswith(NIC0)]
    assert [f.level for f in nic if "GT/s" in f.message] == [FAIL]
    # A Gen5 card in a Gen4 slot runs at what both ends support: Gen4 is its maximum.
    node.set(SWITCH_DOWN[2], "max_link_speed", GEN4)
    nic = [f for f in host_checks.pcie(str(node.sys)).findings if f.subject.startswith(NIC0)]
    assert worst(nic) == PASS


def test_pcie_errors_counted_by_aer_fail_or_warn(node: Node) -> None:
    node.count_aer(GPU0, "correctable", "BadTLP", 3)
    node.count_aer(GPU2, "nonfatal", "TLP", 1)
    found = {f.subject.split()[0]: f for f in host_checks.pcie(str(node.sys)).findings
             if "error" in f.message}
    assert found[GPU0].level == WARN and "BadTLP 3" in found[GPU0].message
    assert found[GPU2].level == FAIL and found[GPU2].reading["nonfatal"] == 1


def test_acs_redirect_on_a_switch_above_two_gpus_warns(node: Node) -> None:
    for port in SWITCH_DOWN:  # redirect on the downstream ports: one GPU each, no finding
        (node.device(port) / "config").write_bytes(acs_config(0x001D))
    (node.device("0000:01:00.0") / "config").write_bytes(acs_config(0x001D))
    found = [f for f in host_checks.pcie(str(node.sys)).findings if f.subject == "0000:01:00.0"]
    assert [f.level for f in found] == [WARN]
    assert "redirected to the root complex" in found[0].message
    assert found[0].reading["gpus_below"] == 2


def test_a_socket_missing_memory_fails(node: Node) -> None:
    (node.sys / "devices/system/node/node1/meminfo").write_text(
        "Node 1 MemTotal:       792535551 kB\nNode 1 MemFree:  700000000 kB\n")
    found = _levels(host_checks.numa(str(node.sys), str(node.proc)).findings)
    assert found["node1"] == FAIL and found["node0"] == PASS


def test_numa_balancing_and_unknown_affinity_warn_on_a_gpu_node(node: Node) -> None:
    (node.proc / "sys/kernel/numa_balancing").write_text("1\n")
    node.set(GPU2, "numa_node", "-1")
    found = _levels(host_checks.numa(str(node.sys), str(node.proc)).findings)
    assert found["kernel"] == WARN and found[GPU2] == WARN and found[GPU0] == PASS


def test_a_gpu_behind_a_translating_iommu_warns(node: Node) -> None:
    (node.sys / "kernel/iommu_groups/1/type").write_text("DMA-FQ\n")
    found = _levels(host_checks.iommu(str(node.sys), str(node.proc)).findings)
    assert found == {GPU0: PASS, GPU1: WARN, GPU2: PASS}
    assert sysfs.iommu(node.sys, node.proc).cmdline == ("iommu=pt", "amd_iommu=on")


def test_hugepages_are_recorded(node: Node) -> None:
    (finding,) = host_checks.hugepages(str(node.sys)).findings
    assert finding.level == PASS
    assert "16 x 1048576kB (16 free)" in finding.message and "madvise" in finding.message


def test_the_wiring_matrix_uses_nvidia_smi_topo_words(node: Node) -> None:
    wiring = topology.topology(sysfs.pci_devices(node.sys))
    assert wiring.names == ("GPU0", "GPU1", "GPU2", "NIC0")
    assert [d.address for d in wiring.devices] == [GPU0, GPU1, GPU2, NIC0]
    assert wiring.matrix == (("X", "PIX", "SYS", "PIX"),
                             ("PIX", "X", "SYS", "PIX"),
                             ("SYS", "SYS", "X", "SYS"),
                             ("PIX", "PIX", "SYS", "X"))
    assert wiring.signature() == wiring.signature()  # no address in it
    assert GPU0 not in wiring.signature()


def test_a_gpu_the_runtime_does_not_see_fails_unless_hidden_on_purpose() -> None:
    assert topology.visible_gpus(8, 7, {}).level == FAIL
    hidden = topology.visible_gpus(8, 7, {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6"})
    assert hidden.level == PASS and "CUDA_VISIBLE_DEVICES" in hidden.message
    assert topology.visible_gpus(8, 64, {}).level == PASS  # partitions: more than on PCI


def test_warnings_pass_the_check_and_are_said(node: Node) -> None:
    (node.sys / "devices/system/edac/mc/mc0/ce_count").write_text("5\n")
    result = conclude(host_checks.edac(str(node.sys)).findings, {}, None)
    assert result.details["verdict"] == WARN
    assert result.warnings == ("mc0: 5 corrected memory errors",)
    assert {f.name: f.value for f in result.figures} == {"failed": 0, "warned": 1, "passed": 1}


def test_this_machine_is_read_without_error() -> None:
    for checked in (host_checks.edac(), host_checks.numa(), host_checks.pcie(),
                    host_checks.iommu(), host_checks.hugepages()):
        assert checked.findings or checked.unchecked
    assert sysfs.numa_nodes(), "every Linux host lists at least node0"


def test_the_gpu_checks_are_the_gpu_readers_areas() -> None:
    from accelbench.benchmarks.health import declaration, gpu

    assert declaration.GPU_AREAS == gpu.CHECKS
