"""The health checks on AMD desktop nodes (radeon_tree): a Radeon's link is judged where it
leaves the card, a link an idle Radeon has lowered warns instead of failing, and the
processor's own Radeon is not a GPU the runtime must see."""

from __future__ import annotations

from pathlib import Path

import pytest
from radeon_tree import (
    AUDIO,
    GEN1,
    GEN5,
    GPU,
    IGPU,
    LONE_GPU,
    ROOT_PORT,
    UPSTREAM,
    X16_GEN4,
    desktop,
)
from sysfs_tree import GEN4
from test_gpu_health import gpu

from accelbench.benchmarks.health import declaration, host_checks, sysfs, topology
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, worst
from accelbench.benchmarks.health.gpu import GpuRead, PcieLink, findings

GEN3 = "8.0 GT/s PCIe"
POLARIS = ("0x1002", "0x67df", "0xaaf0")  # RX 580 and its HDMI audio: no switch on the card


def _links(root: Path, address: str) -> list[Finding]:
    """The findings on the width and speed of a device's link (not its AER counters)."""
    return [f for f in host_checks.pcie(str(root)).findings
            if f.subject.startswith(address) and "error" not in f.message]


# ------------------------------------------------------------------- idle downtraining


@pytest.mark.parametrize(("layout", "subject", "port"), [
    # A Navi 31 idling at x4 2.5 GT/s: the card's upstream port carries the real link,
    # the GPU's own (inside the chip) reads x16 16 GT/s.
    ({"upstream": (GEN1, 4, GEN4, 16), "slot": (GEN1, 4, GEN5, 16)}, GPU, UPSTREAM),
    # A Polaris card has no switch: its GPU's own link idles at x8 2.5 GT/s.
    ({"card_switch": False, "card": POLARIS, "gpu": (GEN1, 8, GEN3, 16),
      "slot": (GEN1, 8, GEN5, 16)}, LONE_GPU, LONE_GPU),
])
def test_a_link_an_idle_radeon_lowered_warns_with_the_reason(tmp_path, layout, subject, port):
    node = desktop(tmp_path, **layout)
    found = _links(node.sys, subject)
    assert [f.level for f in found] == [WARN], [f.message for f in found]
    (idle,) = found
    assert idle.code == "ACCEL_PCIE_WIDTH"
    assert port in idle.message or port == subject
    assert "idle" in idle.message and "under load" in idle.message
    assert idle.reading["width"] < idle.reading["max_width"]
    assert worst(host_checks.pcie(str(node.sys)).findings) == WARN


def test_a_radeon_link_narrower_at_full_speed_is_no_idle_state_and_fails(tmp_path):
    node = desktop(tmp_path, card_switch=False, card=POLARIS, gpu=(GEN3, 8, GEN3, 16),
                   slot=(GEN3, 8, GEN5, 16))
    (narrow,) = _links(node.sys, LONE_GPU)
    assert (narrow.level, narrow.message) == (FAIL, "PCIe x8, both ends support x16")


# ------------------------------------------------------------- the card's upstream port


def test_a_navi_card_s_degraded_link_is_found_at_its_upstream_port(tmp_path):
    node = desktop(tmp_path, upstream=(GEN4, 8, GEN4, 16), slot=(GEN4, 8, GEN5, 16))
    (narrow,) = _links(node.sys, GPU)
    assert narrow.level == FAIL and narrow.code == "ACCEL_PCIE_WIDTH"
    assert narrow.message == (f"PCIe x8 at {UPSTREAM} (the card's upstream port), both ends "
                              "support x16")
    assert narrow.reading["card_port"] == UPSTREAM
    assert (narrow.reading["width"], narrow.reading["port_max_width"]) == (8, 16)


@pytest.mark.parametrize("layout", [
    # The links inside the chip read what they like: here the GPU's x1 2.5 GT/s.
    {"gpu": (GEN1, 1, GEN4, 16), "slot": (GEN4, 16, GEN5, 16)},
    # A Gen5 card in a Gen4 x8 slot: the chip's links read x16 32 GT/s, the upstream port
    # x8 16 GT/s, all the slot can carry (recorded: nokyan/resources#512).
    {"upstream": (GEN4, 8, GEN5, 16), "downstream": (GEN5, 16, GEN5, 16),
     "gpu": (GEN5, 16, GEN5, 16), "slot": (GEN4, 8, GEN4, 8)},
])
def test_a_healthy_navi_card_passes_whatever_its_inner_links_read(tmp_path, layout):
    node = desktop(tmp_path, **layout)
    checked = host_checks.pcie(str(node.sys))
    assert worst(checked.findings) == PASS, [f.message for f in checked.findings]
    (link,) = _links(node.sys, GPU)
    assert link.reading["card_port"] == UPSTREAM
    assert link.reading["width"] == layout.get("upstream", X16_GEN4)[1]


def test_the_card_s_port_is_the_topmost_amd_bridge_below_the_root_port(tmp_path):
    devices = sysfs.pci_devices(desktop(tmp_path).sys)
    by_address = {d.address: d for d in devices}
    assert sysfs.card_port(by_address[GPU], by_address).address == UPSTREAM
    assert sysfs.card_port(by_address[AUDIO], by_address).address == UPSTREAM
    assert sysfs.card_port(by_address[ROOT_PORT], by_address).address == ROOT_PORT


# ------------------------------------------------------------------ the processor's GPU


def test_the_processor_s_radeon_is_integrated_and_the_card_is_not(tmp_path):
    devices = {d.address: d for d in sysfs.pci_devices(desktop(tmp_path, igpu=True).sys)}
    assert devices[IGPU].kind == "gpu" and devices[IGPU].integrated
    assert devices[GPU].kind == "gpu" and not devices[GPU].integrated
    assert devices[IGPU].to_dict()["integrated"] is True


@pytest.fixture
def topology_check(tmp_path, monkeypatch):
    """Runs the topology check on a Ryzen desktop with a Radeon card, the runtime seeing
    the given number of GPUs and no visibility variable set."""
    node = desktop(tmp_path, igpu=True)
    read = sysfs.pci_devices
    monkeypatch.setattr(sysfs, "pci_devices", lambda root="/sys": read(node.sys))
    monkeypatch.setattr(topology, "direct_links",
                        lambda vendor=None: topology.DirectLinks("amdsmi", (), "not read"))
    for name in topology.VISIBILITY:
        monkeypatch.delenv(name, raising=False)

    def run(runtime: int) -> Finding:
        monkeypatch.setattr(declaration, "_runtime_gpus", lambda: runtime)
        found, _, unchecked = declaration._host("topology", None)
        assert unchecked is None
        (gpus,) = found
        return gpus

    return run


def test_a_runtime_that_leaves_out_the_processor_s_radeon_passes(topology_check):
    gpus = topology_check(1)
    assert gpus.level == PASS, gpus.message
    assert gpus.message.startswith("1 GPUs on PCI, the runtime sees 1")
    assert f"integrated GPU {IGPU} not counted" in gpus.message
    assert gpus.reading["integrated"] == [IGPU]
    assert topology_check(2).level == PASS  # a runtime that lists it too


def test_a_card_the_runtime_does_not_see_still_fails_beside_the_processor_s_radeon(
        topology_check):
    gpus = topology_check(0)
    assert gpus.level == FAIL and gpus.code == "ACCEL_GPU_MISSING"


# ------------------------------------------------------------------- amdsmi's reading


def test_amdsmi_s_link_an_idle_amd_gpu_lowered_warns_and_fails_under_load() -> None:
    # amdsmi_get_pcie_info's pcie_metric is the link now: x4 at Gen1 on an idle RDNA3 card.
    idle_link = PcieLink(gen=1, gen_max=4, width=4, width_max=16)
    idle = findings(GpuRead("amdsmi", (gpu(vendor="amd", pcie=idle_link,
                                           utilization_pct=0.0),)))["pcie"][0]
    assert idle.level == WARN and idle.code == "ACCEL_PCIE_WIDTH"
    assert idle.message.startswith("x4 of x16 lanes at Gen1 of Gen4 (0 % busy)")
    busy = findings(GpuRead("amdsmi", (gpu(vendor="amd", pcie=idle_link,
                                           utilization_pct=99.0),)))["pcie"][0]
    assert busy.level == FAIL and "x4 of x16 lanes" in busy.message
    narrow = PcieLink(gen=4, gen_max=4, width=8, width_max=16)
    full_speed = findings(GpuRead("amdsmi", (gpu(vendor="amd", pcie=narrow,
                                                 utilization_pct=0.0),)))["pcie"][0]
    assert full_speed.level == FAIL  # at its top generation: no idle power state
    nvidia = findings(GpuRead("nvml", (gpu(pcie=idle_link, utilization_pct=0.0),)))["pcie"][0]
    assert nvidia.level == FAIL  # the rule for other GPUs is unchanged


def test_the_copy_matrix_rates_a_navi_card_by_the_link_that_leaves_it(tmp_path, monkeypatch):
    """A Gen5 card in a Gen4 x8 slot: the chip's inner links read x16 32 GT/s, the card
    moves what its upstream port's x8 16 GT/s link carries."""
    from types import SimpleNamespace

    from accelbench.benchmarks.health import copy_matrix
    from accelbench.env.pcie import Link as PcieRate

    node = desktop(tmp_path, upstream=(GEN4, 8, GEN5, 16), downstream=(GEN5, 16, GEN5, 16),
                   gpu=(GEN5, 16, GEN5, 16), slot=(GEN4, 8, GEN4, 8))
    listed = sysfs.pci_devices(str(node.sys))
    monkeypatch.setattr(sysfs, "pci_devices", lambda *a, **k: listed)
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=3, pci_device_id=0)
    torch = SimpleNamespace(cuda=SimpleNamespace(get_device_properties=lambda i: props))
    rates = copy_matrix._pcie_rates(torch, [0])
    assert rates == {"gpu0": PcieRate(16.0, 8, 16.0, 8).per_direction}
