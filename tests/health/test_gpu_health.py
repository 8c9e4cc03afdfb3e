"""GPU health: amdsmi and pynvml replayed from recorded nodes (tests/fixtures/health), and
the rules judged on those readings and on hand-made ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding
from accelbench.benchmarks.health.gpu import (
    CHECKS,
    EccCount,
    GpuHealth,
    GpuLink,
    GpuRead,
    MemoryPages,
    PcieLink,
    findings,
    read_gpus,
)
from gpu_fakes import (
    AMD_NODES,
    NVIDIA_NODES,
    FakeAmdSmi,
    FakeNvml,
    importer_of,
    load_node,
)


def read_amd(node: dict[str, Any]) -> tuple[GpuRead, FakeAmdSmi]:
    lib = FakeAmdSmi(node)
    return read_gpus("amd", importer=importer_of({"amdsmi": lib})), lib


def read_nvidia(node: dict[str, Any]) -> tuple[GpuRead, FakeNvml]:
    nvml = FakeNvml(node)
    return read_gpus("nvidia", importer=importer_of({"pynvml": nvml})), nvml


def read_node(name: str) -> GpuRead:
    node = load_node(name)
    return read_amd(node)[0] if name in AMD_NODES else read_nvidia(node)[0]


def by_subject(found: list[Finding]) -> dict[str, Finding]:
    subjects = [f.subject for f in found]
    assert len(subjects) == len(set(subjects)), subjects
    return {f.subject: f for f in found}


def not_passing(read: GpuRead) -> dict[str, list[Finding]]:
    return {check: [f for f in found if f.level != PASS]
            for check, found in findings(read).items()}


def gpu(**fields: Any) -> GpuHealth:
    return GpuHealth(index=fields.pop("index", 0), vendor=fields.pop("vendor", "nvidia"),
                     **fields)


# ------------------------------------------------------------------------------ healthy


@pytest.mark.parametrize("name", ["mi300x-healthy", "h100-sxm-healthy"])
def test_a_healthy_node_passes_every_check(name: str) -> None:
    read = read_node(name)
    assert read.missing is None and len(read.gpus) == 8
    found = findings(read)
    assert tuple(found) == CHECKS
    assert all(found[check] for check in CHECKS)
    assert not_passing(read) == {check: [] for check in CHECKS}


def test_the_amd_reading_holds_every_field_amdsmi_gives() -> None:
    read, lib = read_amd(load_node("mi300x-healthy"))
    assert read.source == "amdsmi" and lib.shut
    g = read.gpus[5]
    assert (g.index, g.vendor, g.name, g.bus_id) == (5, "amd", "AMD Instinct MI300X",
                                                     "0000:a6:00.0")
    assert g.serial == "0x4D2E1F0A0B0C8096" and g.driver_version == "6.10.5"
    assert g.firmware is not None
    assert g.firmware["PM"] == "00.85.110.00" and g.firmware["VBIOS"].startswith("022.040")
    assert g.ecc_enabled is True and g.ecc_supported is True
    assert g.ecc is not None
    assert {c.block for c in g.ecc} == {"UMC", "SDMA", "GFX", "MMHUB", "PCIE_BIF",
                                        "XGMI_WAFL", "VCN", "JPEG", "total"}
    assert g.pages == MemoryPages(retired=0, pending=0, unrepairable=0)
    assert g.pcie == PcieLink(gen=5, gen_max=5, width=16, width_max=16, speed_gts=32.0,
                              speed_max_gts=32.0, replay=0, replay_rollover=0, nak_sent=0,
                              nak_received=0, l0_to_recovery=3)
    assert g.links is not None
    assert [link.state for link in g.links] == ["up"] * 7 + ["disabled"]
    assert g.links[0] == GpuLink("xgmi", 0, "up", "0000:c6:00.0", {}, 32.0)
    assert g.link_error_status == "no_errors"
    assert g.throttle == () and g.utilization_pct == 100.0
    assert read.gpus[1].throttle == ("ppt_pwr",)  # power cap: recorded, not judged


def test_the_nvidia_reading_holds_every_field_nvml_gives() -> None:
    read, nvml = read_nvidia(load_node("h100-sxm-healthy"))
    assert read.source == "nvml" and nvml.shut
    g = read.gpus[1]
    assert (g.index, g.vendor, g.name, g.bus_id) == (1, "nvidia", "NVIDIA H100 80GB HBM3",
                                                     "0000:2a:00.0")
    assert g.serial == "1654923001002" and g.driver_version == "550.90.07"
    assert g.firmware == {"VBIOS": "96.00.99.00.01", "InfoROM": "G520.0200.00.05"}
    assert g.ecc_enabled is True and g.ecc_supported is True
    assert g.ecc is not None
    assert {c.label for c in g.ecc} == {f"{b}/{s}" for b in ("total", "DRAM", "SRAM")
                                        for s in ("volatile", "aggregate")}
    assert g.pages == MemoryPages(rows_corrected=0, rows_uncorrected=0, remap_pending=False,
                                  remap_failed=False)
    assert g.pcie == PcieLink(gen=5, gen_max=5, gen_gpu_max=5, width=16, width_max=16,
                              speed_gts=32.0, speed_max_gts=32.0, replay=0)
    assert g.links is not None and len(g.links) == 18
    assert g.links[17] == GpuLink("nvlink", 17, "up", "0000:08:00.0",
                                  {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0})
    assert g.throttle == () and g.utilization_pct == 100.0


def test_recorded_but_unjudged_readings_are_said_in_the_passing_findings() -> None:
    found = findings(read_node("h100-sxm-healthy"))
    throttle = by_subject(found["throttle"])["gpu0"]
    assert throttle.level == PASS and "SwPowerCap active, not judged" in throttle.message
    ecc = by_subject(found["ecc"])["gpu4"]  # two lifetime corrected DRAM errors
    assert ecc.level == PASS and ecc.message == (
        "no ECC errors in the current count (3 counts read); "
        "lifetime corrected errors in DRAM (2)")
    assert ecc.reading["counts"]["DRAM/aggregate"]["correctable"] == 2
    vbios = by_subject(found["versions"])["firmware VBIOS"]
    assert vbios.level == PASS and vbios.message == "firmware VBIOS 96.00.99.00.01 on all 8 GPUs"
    assert vbios.reading["gpu7"] == "96.00.99.00.01"


# ------------------------------------------------------------------------------ unhealthy


def test_an_uncorrectable_ecc_error_fails_its_gpu_naming_the_block() -> None:
    read = read_node("mi300x-uncorrectable-ecc")
    bad = not_passing(read)
    assert [f.subject for f in bad["ecc"]] == ["gpu3"]
    ecc = bad["ecc"][0]
    assert ecc.level == FAIL
    assert "uncorrectable ECC errors in UMC (1)" in ecc.message
    assert "corrected ECC errors in UMC (4)" in ecc.message
    assert ecc.reading["counts"]["UMC"] == {"correctable": 4, "uncorrectable": 1,
                                            "deferred": 0}
    assert {check for check, found in bad.items() if found} == {"ecc"}
    pages = by_subject(findings(read)["pages"])["gpu3"]
    assert pages.level == PASS and pages.reading["retired"] == 1


def test_a_downgraded_pcie_link_under_load_fails_naming_width_and_generation() -> None:
    bad = not_passing(read_node("h100-sxm-pcie-downgraded"))
    assert {check for check, found in bad.items() if found} == {"pcie"}
    (pcie,) = bad["pcie"]
    assert (pcie.subject, pcie.level) == ("gpu5", FAIL)
    assert "x8 of x16 lanes" in pcie.message
    assert "Gen4 of Gen5 under load (100 % busy)" in pcie.message
    assert "37 PCIe replays" in pcie.message
    assert {k: pcie.reading[k] for k in ("width", "width_max", "gen", "gen_max", "replay",
                                         "utilization_pct")} == {
        "width": 8, "width_max": 16, "gen": 4, "gen_max": 5, "replay": 37,
        "utilization_pct": 100.0}


def test_a_down_xgmi_link_fails_both_ends_as_a_missing_link() -> None:
    bad = not_passing(read_node("mi300x-xgmi-link-down"))
    assert {check for check, found in bad.items() if found} == {"links"}
    links = by_subject(bad["links"])
    assert set(links) == {"gpu2", "gpu2 xgmi4", "gpu2 xgmi", "gpu7", "gpu7 xgmi2", "gpu7 xgmi"}
    down = links["gpu2 xgmi4"]
    assert down.level == FAIL and down.message.startswith("missing XGMI link: xgmi4 is down")
    assert down.reading["state"] == "down" and "gpu0" in down.reading["up_on"]
    assert links["gpu7 xgmi2"].level == FAIL
    count = links["gpu7"]
    assert count.level == FAIL and count.message == (
        "6 of 7 XGMI links up, where another GPU of the node has 7")
    assert (count.reading["active"], count.reading["node_most"]) == (6, 7)
    assert count.reading["links"]["xgmi2"] == "down"
    status = links["gpu2 xgmi"]
    assert status.level == WARN and status.reading == {"link_error_status": "error"}


# ------------------------------------------------------------------------------ missing


def test_a_binding_that_is_not_installed_is_named_in_missing() -> None:
    read = read_gpus("amd", importer=importer_of({}))
    assert read.gpus == () and read.source == "amdsmi"
    assert read.missing is not None and read.missing.startswith("amdsmi is not installed")
    both = read_gpus(importer=importer_of({}))
    assert both.gpus == () and both.source == "amdsmi, nvml"
    assert both.missing is not None
    assert "amdsmi is not installed" in both.missing and "pynvml is not installed" in both.missing
    assert findings(both) == {check: [] for check in CHECKS}


def test_a_library_that_does_not_start_or_finds_no_gpu_says_so() -> None:
    amd = FakeAmdSmi(load_node("mi300x-healthy"), init_fails="AMDSMI_STATUS_DRIVER_NOT_LOADED")
    read = read_gpus("amd", importer=importer_of({"amdsmi": amd}))
    assert read.missing is not None
    assert read.missing.startswith("amdsmi did not start") and "DRIVER_NOT_LOADED" in read.missing
    nvml = FakeNvml(load_node("h100-sxm-healthy"), init_fails="DriverNotLoaded")
    read = read_gpus("nvidia", importer=importer_of({"pynvml": nvml}))
    assert read.missing == "NVML did not start: DriverNotLoaded"
    empty = FakeNvml({"nvmlSystemGetDriverVersion": "550.90.07", "gpus": []})
    read = read_gpus("nvidia", importer=importer_of({"pynvml": empty}))
    assert read.missing == "NVML found no GPUs" and empty.shut


def test_without_a_vendor_amd_is_tried_first_and_nvidia_next() -> None:
    amd, nvml = FakeAmdSmi(load_node("mi300x-healthy")), FakeNvml(load_node("h100-sxm-healthy"))
    assert read_gpus(importer=importer_of({"amdsmi": amd, "pynvml": nvml})).source == "amdsmi"
    assert not nvml.started
    no_amd = FakeAmdSmi({"gpus": []})
    read = read_gpus(importer=importer_of({"amdsmi": no_amd, "pynvml": nvml}))
    assert read.source == "nvml" and len(read.gpus) == 8 and read.missing is None
    with pytest.raises(ValueError, match="unknown GPU vendor"):
        read_gpus("intel", importer=importer_of({}))


# ------------------------------------------------------------------------------ one call


def test_a_failing_amdsmi_call_costs_that_field_only() -> None:
    node = load_node("mi300x-healthy")
    node["gpus"][0]["amdsmi_get_pcie_info"] = {"raises": "AMDSMI_STATUS_NOT_SUPPORTED"}
    node["gpus"][0]["amdsmi_get_gpu_ecc_count"]["SDMA"] = {"raises": "AMDSMI_STATUS_NO_DATA"}
    read, _ = read_amd(node)
    first, second = read.gpus[0], read.gpus[1]
    assert first.pcie is None and second.pcie is not None
    assert first.ecc is not None and "SDMA" not in {c.block for c in first.ecc}
    assert "UMC" in {c.block for c in first.ecc}
    assert first.links is not None and len(first.links) == 8
    assert first.bus_id == "0000:05:00.0" and first.firmware and first.pages
    pcie = by_subject(findings(read)["pcie"])["gpu0"]
    assert (pcie.level, pcie.message) == (PASS, "PCIe link not read")


def test_a_failing_nvml_call_costs_that_field_only() -> None:
    node = load_node("h100-sxm-healthy")
    node["gpus"][2]["nvmlDeviceGetCurrPcieLinkWidth"] = {"raises": "NotSupported"}
    node["gpus"][2]["nvmlDeviceGetNvLinkErrorCounter"][4] = {"raises": "NotSupported"}
    read, _ = read_nvidia(node)
    g = read.gpus[2]
    assert g.pcie is not None and g.pcie.width is None
    assert (g.pcie.gen, g.pcie.width_max) == (5, 16)
    assert g.links is not None and len(g.links) == 18
    assert g.links[4].errors == {} and g.links[4].state == "up"
    assert g.links[5].errors["crc_flit"] == 0
    assert not_passing(read)["pcie"] == []


def test_a_gpu_nvml_cannot_open_keeps_its_index_and_the_rest_are_read() -> None:
    node = load_node("h100-sxm-healthy")
    node["gpus"][6]["nvmlDeviceGetHandleByIndex"] = {"raises": "GpuIsLost"}
    read, _ = read_nvidia(node)
    lost = read.gpus[6]
    assert (lost.index, lost.driver_version, lost.bus_id, lost.pcie) == (6, "550.90.07",
                                                                         None, None)
    assert read.gpus[7].bus_id == "0000:db:00.0"


def test_an_unexpected_error_propagates_after_the_library_is_shut_down() -> None:
    lib = FakeAmdSmi(load_node("mi300x-healthy"))

    def vanished(handle: object) -> None:
        raise OSError("device removed")

    lib.amdsmi_get_pcie_info = vanished  # type: ignore[method-assign,assignment]
    with pytest.raises(OSError, match="device removed"):
        read_gpus("amd", importer=importer_of({"amdsmi": lib}))
    assert lib.shut


def test_a_reading_survives_a_round_trip_through_json() -> None:
    for name in AMD_NODES + NVIDIA_NODES:
        read = read_node(name)
        again = GpuRead.from_dict(json.loads(json.dumps(read.to_dict())))
        assert again == read, name


# ------------------------------------------------------------------------------ rules


def test_a_lower_pcie_generation_fails_only_under_load() -> None:
    link = PcieLink(gen=1, gen_max=5, width=16, width_max=16)
    idle = findings(GpuRead("nvml", (gpu(pcie=link, utilization_pct=0.0),)))["pcie"][0]
    assert idle.level == WARN
    assert idle.message == ("Gen1 of Gen5 (0 % busy): may be the idle power state; "
                            "run under load")
    unknown = findings(GpuRead("nvml", (gpu(pcie=link),)))["pcie"][0]
    assert unknown.level == WARN and "(utilisation unknown)" in unknown.message
    busy = findings(GpuRead("nvml", (gpu(pcie=link, utilization_pct=97.0),)))["pcie"][0]
    assert busy.level == FAIL and busy.message == "Gen1 of Gen5 under load (97 % busy)"
    naks = PcieLink(gen=5, gen_max=5, width=16, width_max=16, nak_sent=0, nak_received=3)
    nak = findings(GpuRead("amdsmi", (gpu(vendor="amd", pcie=naks),)))["pcie"][0]
    assert nak.level == WARN and nak.message == "PCIe NAKs sent 0, received 3"


@pytest.mark.parametrize(("pages", "level", "said"), [
    (MemoryPages(retired=2, pending=0, unrepairable=1), FAIL,
     "1 bad pages could not be retired (unreservable)"),
    (MemoryPages(retired=2, pending=3, unrepairable=0), WARN, "3 bad pages pending retirement"),
    (MemoryPages(rows_corrected=0, rows_uncorrected=1, remap_pending=True, remap_failed=False),
     WARN, "a row remapping is pending: reset the GPU"),
    (MemoryPages(rows_corrected=0, rows_uncorrected=9, remap_pending=False, remap_failed=True),
     FAIL, "a row remapping failed"),
    (MemoryPages(retired=4, retirement_pending=True), WARN,
     "retired pages are pending: reset the GPU"),
])
def test_retired_memory_rules(pages: MemoryPages, level: str, said: str) -> None:
    (found,) = findings(GpuRead("x", (gpu(pages=pages),)))["pages"]
    assert (found.level, found.message) == (level, said)
    assert found.reading == pages.to_dict()


@pytest.mark.parametrize(("health", "level", "said"), [
    ({"ecc": (EccCount("DRAM", "volatile", 3, 0), EccCount("total", "volatile", 3, 0))},
     WARN, "corrected ECC errors in DRAM (3)"),
    ({"ecc": (EccCount("total", "aggregate", 0, 2),)}, WARN,
     "uncorrectable ECC errors in the lifetime count: total (2)"),
    ({"ecc": (EccCount("UMC", None, 0, 0, 5),)}, FAIL, "deferred ECC errors in UMC (5)"),
    ({"ecc_enabled": False, "ecc_supported": True}, WARN,
     "ECC is off on a GPU that supports it"),
    ({"ecc_enabled": False, "ecc_supported": None}, PASS, "ECC counts not read"),
])
def test_ecc_rules(health: dict[str, Any], level: str, said: str) -> None:
    (found,) = findings(GpuRead("x", (gpu(**health),)))["ecc"]
    assert (found.level, found.message) == (level, said)


def test_slowdowns_warn_and_other_clock_reasons_are_recorded() -> None:
    gpus = (gpu(index=0, throttle=("SwPowerCap", "HwThermalSlowdown")),
            gpu(index=1, throttle=("GpuIdle", "ApplicationsClocksSetting")),
            gpu(index=2, vendor="amd", throttle=("ppt_pwr", "hbm_thrm")),
            gpu(index=3, vendor="amd", throttle=("TEMP_HOTSPOT",)))
    found = by_subject(findings(GpuRead("x", gpus))["throttle"])
    assert (found["gpu0"].level, found["gpu0"].message) == (WARN,
                                                            "HwThermalSlowdown active now")
    assert found["gpu0"].reading == {"active": ["SwPowerCap", "HwThermalSlowdown"]}
    assert found["gpu1"].level == PASS
    assert (found["gpu2"].level, found["gpu2"].message) == (WARN, "hbm_thrm active now")
    assert found["gpu3"].level == WARN


def gpu_metrics_1_8(held_by: str | None) -> dict[str, Any]:
    """An MI300X's violation status from gpu_metrics 1.8 on: the one GFX-clock flag N/A,
    its place taken by arrays per partition and XCC (one partition, eight XCCs, the
    slots past them N/A), the XCC `held_by` heat or power set."""
    node = load_node("mi300x-healthy")
    status = node["gpus"][0]["amdsmi_get_violation_status"]
    status["active_gfx_clk_below_host_limit"] = "N/A"
    for kind in ("pwr", "thm", "total"):
        row = [kind in (held_by, "total") and held_by is not None and xcc == 3
               for xcc in range(8)]
        status[f"active_gfx_clk_below_host_limit_{kind}"] = [row + ["N/A"] * 8] + [
            ["N/A"] * 16 for _ in range(7)]
    return node


def test_a_gfx_clock_held_for_heat_in_one_xcc_warns_and_held_for_power_is_recorded() -> None:
    hot = read_amd(gpu_metrics_1_8("thm"))[0].gpus[0]
    assert hot.throttle == ("gfx_clk_below_host_limit_thm", "gfx_clk_below_host_limit_total")
    found = by_subject(findings(GpuRead("amdsmi", (hot,)))["throttle"])["gpu0"]
    assert (found.level, found.message) == (WARN, "gfx_clk_below_host_limit_thm active now")
    capped = read_amd(gpu_metrics_1_8("pwr"))[0].gpus[0]
    assert capped.throttle == ("gfx_clk_below_host_limit_pwr", "gfx_clk_below_host_limit_total")
    assert by_subject(findings(GpuRead("amdsmi", (capped,)))["throttle"])["gpu0"].level == PASS
    assert read_amd(gpu_metrics_1_8(None))[0].gpus[0].throttle == ()


def test_versions_that_differ_between_gpus_warn_naming_each() -> None:
    gpus = tuple(gpu(index=i, driver_version="550.90.07",
                     firmware={"VBIOS": "96.00.99.00.01" if i < 3 else "96.00.74.00.0B"})
                 for i in range(4))
    found = by_subject(findings(GpuRead("nvml", gpus))["versions"])
    assert found["driver"].level == PASS
    vbios = found["firmware VBIOS"]
    assert vbios.level == WARN and vbios.message == (
        "firmware VBIOS differs: 96.00.99.00.01 on gpu0, gpu1, gpu2; 96.00.74.00.0B on gpu3")
    assert vbios.reading == {"gpu0": "96.00.99.00.01", "gpu1": "96.00.99.00.01",
                             "gpu2": "96.00.99.00.01", "gpu3": "96.00.74.00.0B"}


def test_nvlink_errors_warn_and_a_node_without_links_passes() -> None:
    noisy = GpuLink("nvlink", 3, "up", "0000:05:00.0", {"replay": 0, "crc_flit": 12})
    quiet = GpuLink("nvlink", 3, "up", "0000:05:00.0", {"replay": 0, "crc_flit": 0})
    found = by_subject(findings(GpuRead("nvml", (gpu(index=0, links=(noisy,)),
                                                 gpu(index=1, links=(quiet,)))))["links"])
    assert (found["gpu0 nvlink3"].level, found["gpu0 nvlink3"].message) == (
        WARN, "NVLink errors: crc_flit 12")
    assert found["gpu0"].level == found["gpu1"].level == PASS
    down = (GpuLink("nvlink", 0, "down"),)
    unwired = by_subject(findings(GpuRead("nvml", (gpu(index=0, links=down),
                                                   gpu(index=1, links=()))))["links"])
    assert set(unwired) == {"gpu0", "gpu1"}
    assert all(f.level == PASS for f in unwired.values())
    assert unwired["gpu1"].message == "no GPU-to-GPU links reported"
