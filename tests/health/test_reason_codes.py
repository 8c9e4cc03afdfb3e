"""Every health finding that warns or fails carries the reason code of the rule that
decided it, a pass none; findings round-trip their code, and those stored before codes
existed read back with none."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sysfs_tree import GEN4, GPU0, GPU1, GPU2, SWITCH_DOWN, Node, acs_config, gpu_node
from test_gpu_health import gpu, read_node

from accelbench.benchmarks.health import copy_matrix, host_checks, kernel_log, stress, topology
from accelbench.benchmarks.health.copy_paths import CopyPath
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, conclude
from accelbench.benchmarks.health.gpu import EccCount, GpuLink, MemoryPages, findings
from accelbench.core.reasons import BY_CODE
from accelbench.env.kernel_log import Event
from gpu_fakes import AMD_NODES, NVIDIA_NODES

HEALTH = Path(__file__).parents[2] / "src" / "accelbench" / "benchmarks" / "health"


def _coded(found: list[Finding] | tuple[Finding, ...]) -> dict[str, set[str | None]]:
    """The codes of the findings by level; asserts every code is in the table."""
    out: dict[str, set[str | None]] = {}
    for f in found:
        assert f.code is None or f.code in BY_CODE, f
        assert (f.code is None) == (f.level == PASS), f
        out.setdefault(f.level, set()).add(f.code)
    return out


@pytest.mark.parametrize("name", AMD_NODES + NVIDIA_NODES)
def test_every_recorded_node_s_findings_are_coded(name: str) -> None:
    for found in findings(read_node(name)).values():
        _coded(found)


def test_the_recorded_faults_get_their_codes() -> None:
    ecc = findings(read_node("mi300x-uncorrectable-ecc"))["ecc"]
    assert "ACCEL_ECC_DBE" in _coded(ecc)[FAIL]
    links = findings(read_node("mi300x-xgmi-link-down"))["links"]
    assert _coded(links)[FAIL] == {"ACCEL_XGMI_LINK_DOWN"}
    pcie = _coded(findings(read_node("h100-sxm-pcie-downgraded"))["pcie"])
    assert pcie.get(FAIL, set()) | pcie.get(WARN, set()) <= {"ACCEL_PCIE_WIDTH",
                                                               "ACCEL_PCIE_SPEED",
                                                               "ACCEL_PCIE_REPLAY"}
    assert pcie.get(FAIL, set()) | pcie.get(WARN, set())


def test_the_gpu_rules_give_the_code_of_their_worst_problem() -> None:
    from accelbench.benchmarks.health import gpu as rules

    both = gpu(ecc=(EccCount("umc", "volatile", correctable=4, uncorrectable=1),))
    assert rules._ecc(both).code == "ACCEL_ECC_DBE"  # the fail's, not the warning's
    soft = gpu(ecc=(EccCount("umc", "volatile", correctable=4),))
    assert (rules._ecc(soft).level, rules._ecc(soft).code) == (WARN, "ACCEL_ECC_SBE")
    off = gpu(ecc=(), ecc_enabled=False, ecc_supported=True)
    assert rules._ecc(off).code == "ACCEL_ECC_DISABLED"
    assert rules._pages(gpu(pages=MemoryPages(remap_failed=True))).code == \
        "ACCEL_ROW_REMAP_FAILED"
    assert rules._pages(gpu(pages=MemoryPages(unrepairable=2))).code == "ACCEL_RETIRED_PAGES"
    assert rules._pages(gpu(pages=MemoryPages(pending=1))).code == "ACCEL_PAGES_PENDING"
    hot = rules._throttle(gpu(throttle=("SwThermalSlowdown", "HwPowerBrakeSlowdown")))
    assert hot.code == "ACCEL_THROTTLE_THERMAL"
    brake = rules._throttle(gpu(throttle=("HwPowerBrakeSlowdown",)))
    assert brake.code == "ACCEL_THROTTLE_POWER"
    assert rules._throttle(gpu(throttle=("Idle",))).code is None
    nvlinks = [gpu(index=i, links=(GpuLink("nvlink", 0, "up" if i else "down"),
                                   GpuLink("nvlink", 1, "up", errors={"replay": 2})))
               for i in range(2)]
    codes = _coded(rules._links(nvlinks))
    assert codes[FAIL] == {"ACCEL_NVLINK_DOWN"} and codes[WARN] == {"ACCEL_LINK_ERRORS"}
    versions = rules._versions([gpu(index=0, driver_version="1"),
                                gpu(index=1, driver_version="2")])
    assert [f.code for f in versions] == ["ACCEL_VERSION_MISMATCH"]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return gpu_node(tmp_path)


def test_the_host_rules_give_their_codes(node: Node) -> None:
    root, proc = str(node.sys), str(node.proc)
    mc = node.sys / "devices" / "system" / "edac" / "mc"
    (mc / "mc1" / "ue_count").write_text("2\n")
    (mc / "mc0" / "ce_count").write_text("5\n")
    assert _coded(host_checks.edac(root).findings) == {FAIL: {"ACCEL_EDAC_UE"},
                                                      WARN: {"ACCEL_EDAC_CE"}}
    node.set(GPU1, "current_link_width", "8")
    node.set(GPU1, "current_link_speed", GEN4)
    node.count_aer(GPU0, "correctable", "BadTLP", 3)
    node.count_aer(GPU2, "nonfatal", "TLP", 1)
    (node.device("0000:01:00.0") / "config").write_bytes(acs_config(0x001D))
    assert SWITCH_DOWN  # the switch above the GPUs
    pcie = _coded(host_checks.pcie(root).findings)
    assert pcie[FAIL] == {"ACCEL_PCIE_WIDTH", "ACCEL_PCIE_AER"}
    assert pcie[WARN] == {"ACCEL_PCIE_SPEED", "ACCEL_PCIE_AER_CE", "ACCEL_ACS"}
    (node.proc / "sys/kernel/numa_balancing").write_text("1\n")
    node.set(GPU2, "numa_node", "-1")
    (node.sys / "devices/system/node/node1/meminfo").write_text(
        "Node 1 MemTotal:       792535551 kB\nNode 1 MemFree:  700000000 kB\n")
    numa = _coded(host_checks.numa(root, proc).findings)
    assert numa[FAIL] == {"ACCEL_NUMA"}
    assert numa[WARN] == {"ACCEL_NUMA_AFFINITY", "ACCEL_NUMA_BALANCING"}
    (node.sys / "kernel/iommu_groups/1/type").write_text("DMA-FQ\n")
    assert _coded(host_checks.iommu(root, proc).findings)[WARN] == {"ACCEL_IOMMU"}
    assert _coded(host_checks.hugepages(root).findings) == {PASS: {None}}
    assert topology.visible_gpus(8, 7, {}).code == "ACCEL_GPU_MISSING"
    assert topology.visible_gpus(8, 8, {}).code is None


def test_kernel_faults_stress_and_copies_give_their_codes() -> None:
    xid = Event("0000:3b:00", "xid", 79, "NVRM: Xid 79", 12.0)
    assert [f.code for f in kernel_log.findings([xid])] == ["ACCEL_GPU_FAULT"]
    before = [gpu(index=0, ecc=(EccCount("total", None, 0, 0),))]
    after = [gpu(index=0, ecc=(EccCount("total", None, 3, 1),))]
    assert [f.code for f in stress._ecc_findings(before, after)] == ["ACCEL_ECC_DBE"]
    paths = [CopyPath("host", "node0", "node0", 1 << 20, (1e-3,)),
             CopyPath("host", "node1", "node1", 1 << 20, (1e-2,))]
    slow = {f.subject: f.code for f in copy_matrix.host_findings(paths)}
    assert slow == {"node0": None, "node1": "ACCEL_COPY_SLOW"}


def test_every_finding_in_the_health_rules_that_can_warn_or_fail_names_a_code() -> None:
    """Read the sources: a Finding whose level is not PASS written out gives a code
    (its sixth argument, or code=), and every `judged(...)` a code= (it is required)."""
    missing = []
    for path in sorted(HEALTH.glob("*.py")):
        for call in ast.walk(ast.parse(path.read_text())):
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                continue
            if call.func.id == "Finding" and len(call.args) >= 2:
                level = call.args[1]
                passing = isinstance(level, ast.Name) and level.id == "PASS"
                coded = len(call.args) >= 6 or any(k.arg == "code" for k in call.keywords)
                if not passing and not coded:
                    missing.append(f"{path.name}:{call.lineno}")
            elif call.func.id == "judged" and not any(k.arg == "code" for k in call.keywords):
                missing.append(f"{path.name}:{call.lineno}")
    assert not missing, missing


def test_a_finding_round_trips_its_code_and_an_old_one_reads_none() -> None:
    found = Finding("gpu0", FAIL, "rule", "bad", {"n": 1}, "ACCEL_ECC_DBE")
    assert Finding.from_dict(found.to_dict()) == found
    assert found.to_dict()["code"] == "ACCEL_ECC_DBE"
    old = {"subject": "gpu0", "level": "fail", "rule": "rule", "message": "bad",
           "reading": {}}
    assert Finding.from_dict(old).code is None
    assert Finding("gpu0", PASS, "rule", "fine", {}, "ACCEL_ECC_DBE").code is None


def test_the_run_report_shows_the_codes_of_what_failed_or_warned(node: Node) -> None:
    from accelbench.benchmarks.health.view import checks_table, findings_table
    from accelbench.core.case import Case
    from accelbench.core.measurement import CaseFailed, Measurement

    node.set(GPU1, "current_link_width", "8")
    checked = host_checks.pcie(str(node.sys))
    case = Case.make("health", "h1", "health", {"check": "pcie"}, "cpu", check=True)
    with pytest.raises(CaseFailed) as failed:
        conclude(checked.findings, checked.details, None)
    m = Measurement(case, "failed", str(failed.value), time_name="",
                    details=dict(failed.value.details))
    table = findings_table([m])
    assert table is not None and table.header[3] == "Code"
    assert [row[3] for row in table.rows] == ["ACCEL_PCIE_WIDTH"]
    assert checks_table([m]).rows[0][-1].startswith("ACCEL_PCIE_WIDTH: ")
