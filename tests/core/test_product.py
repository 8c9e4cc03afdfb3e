"""Identifying AMD products from what ROCm reports, names that say too little included."""

from __future__ import annotations

import math

import pytest

from accelbench.core.device import DeviceInfo
from accelbench.core.peaks import all_peaks, explain, lookup
from accelbench.core.product import (
    SIGNATURES,
    generation_name,
    identify,
    reported_count,
    shares_host_memory,
)

GENERIC = "AMD Radeon Graphics"  # ROCm's name for a device its name table lacks


def gib(n: float) -> int:
    return int(n * 2**30)


# What ROCm reports for whole devices of each product (a little under the nominal memory).
MI300X_MEMORY = 205_822_885_888  # 191.7 GiB
MI325X_MEMORY = gib(255.98)
GCD_MEMORY = 68_702_699_520  # 64 GiB per MI210 or per MI250/MI250X GCD


def rocm(name: str, arch: str | None, memory: int | None = None, cus: int | None = None,
         market_name: str | None = None) -> DeviceInfo:
    return DeviceInfo(type="cuda", index=0, platform="rocm", name=name, arch=arch,
                      memory_bytes=memory, compute_units=cus, market_name=market_name)


@pytest.mark.parametrize(
    ("name", "arch", "memory", "cus", "product"),
    [
        ("AMD Instinct MI250X / MI250", "gfx90a:sramecc+:xnack-", GCD_MEMORY, 110,
         "AMD Instinct MI250X"),
        ("AMD Instinct MI250X / MI250", "gfx90a:sramecc+:xnack-", GCD_MEMORY, 104,
         "AMD Instinct MI250"),
        (GENERIC, "gfx942:sramecc+:xnack-", MI300X_MEMORY, 304, "AMD Instinct MI300X"),
        (GENERIC, "gfx942", MI325X_MEMORY, 304, "AMD Instinct MI325X"),
        ("", "gfx942", MI300X_MEMORY, 304, "AMD Instinct MI300X"),
        ("AMD Instinct MI300A", "gfx942", gib(127.5), 228, "AMD Instinct MI300A"),
        # An APU's GPU sees what the OS lends it of the 128 GB: identified by its CUs.
        (GENERIC, "gfx942", gib(62.0), 228, "AMD Instinct MI300A"),
        # RDNA: ROCm counts work-group processors (two CUs each), as HIP runs in WGP mode.
        ("AMD Radeon Pro V620", "gfx1030", gib(31.98), 36, "AMD Radeon PRO V620"),
        (GENERIC, "gfx1030", gib(31.98), 36, "AMD Radeon PRO V620"),
        ("AMD Radeon PRO W7900", "gfx1100", gib(47.98), 48, "AMD Radeon PRO W7900"),
        ("AMD Radeon RX 7900 XTX", "gfx1100", gib(23.98), 48, "AMD Radeon RX 7900 XTX"),
        ("Radeon RX 7900 XTX", "gfx1100", gib(23.98), 48, "AMD Radeon RX 7900 XTX"),
        # W7900 and 7900 XTX: both gfx1100 with 48 WGPs, told apart by their memory.
        (GENERIC, "gfx1100", gib(23.98), 48, "AMD Radeon RX 7900 XTX"),
        # In CU mode (GPU_ENABLE_WGP_MODE=0) HIP counts CUs, as rocminfo always does.
        (GENERIC, "gfx1100", gib(23.98), 96, "AMD Radeon RX 7900 XTX"),
        ("AMD Radeon PRO W7900", "gfx1100", gib(47.98), 96, "AMD Radeon PRO W7900"),
        (GENERIC, "gfx1030", gib(31.98), 72, "AMD Radeon PRO V620"),
        (GENERIC, "gfx908", None, None, "AMD Instinct MI100"),  # the only gfx908 product
    ],
)
def test_amd_products_are_identified_by_what_the_device_reports(name, arch, memory, cus,
                                                                product):
    device = rocm(name, arch, memory, cus)
    found = identify(device)
    assert found.fit is not None and found.fit.name == product and found.reason is None
    assert generation_name(device) == product
    peaks = lookup(device)
    assert peaks is not None and peaks.name == product and explain(device) is None


@pytest.mark.parametrize(
    ("cus", "basis"),
    [(48, "gfx1100, 48 WGPs, 24 GiB"), (96, "gfx1100, 96 CUs, 24 GiB")],
)
def test_an_rdna_gpu_says_whether_it_was_counted_in_wgps_or_cus(cus, basis):
    found = identify(rocm(GENERIC, "gfx1100", gib(23.98), cus))
    assert found.fit is not None and found.fit.name == "AMD Radeon RX 7900 XTX"
    assert found.basis == basis


def test_a_7900_xt_is_not_taken_for_a_7900_xtx():
    # gfx1100 with 42 WGPs (84 CUs) and 20 GiB: a product the peak table does not hold.
    for device in (rocm(GENERIC, "gfx1100", gib(19.98), 42),
                   rocm(GENERIC, "gfx1100", gib(19.98), 84)):
        found = identify(device)
        assert found.fits == () and lookup(device) is None
        assert "fits no product in the peak table" in (explain(device) or "")
        assert "7900 XTX" not in generation_name(device)
    assert generation_name(rocm(GENERIC, "gfx1100", gib(19.98), 42)) == (
        "AMD Radeon Graphics (gfx1100, 42 WGPs, 20 GiB)")
    named = rocm("AMD Radeon RX 7900 XT", "gfx1100", gib(19.98), 42)
    assert lookup(named) is None
    assert "'AMD Radeon RX 7900 XT' is not a GPU in the peak table" in (explain(named) or "")
    # An XTX's count with a 7900 XT's memory is neither.
    assert identify(rocm(GENERIC, "gfx1100", gib(19.98), 48)).fits == ()


@pytest.mark.parametrize("memory", [gib(96), gib(64), gib(0.5), gib(120), None])
def test_strix_halo_is_identified_as_an_apu_whatever_memory_the_os_lends_it(memory):
    device = rocm("AMD Radeon 8060S Graphics", "gfx1151", memory, 20)
    found = identify(device)
    assert found.fit is not None and found.fit.name == "AMD Radeon 8060S"
    assert found.reason is None and generation_name(device) == "AMD Radeon 8060S"
    assert shares_host_memory(device) == "AMD Radeon 8060S"
    # AMD publishes no peak figures for the GPU of a Ryzen processor: none is made up.
    assert lookup(device) is None
    assert "no published figures for AMD Radeon 8060S" in (explain(device) or "")


@pytest.mark.parametrize(
    ("name", "arch", "wgps", "product"),
    [
        ("AMD Radeon 8060S Graphics", "gfx1151", 20, "AMD Radeon 8060S"),
        ("AMD Radeon 8050S Graphics", "gfx1151", 16, "AMD Radeon 8050S"),
        ("AMD Radeon 8040S Graphics", "gfx1151", 8, "AMD Radeon 8040S"),
        ("AMD Radeon 890M Graphics", "gfx1150", 8, "AMD Radeon 890M"),
        ("AMD Radeon 880M Graphics", "gfx1150", 6, "AMD Radeon 880M"),
        ("AMD Radeon 860M Graphics", "gfx1152", 4, "AMD Radeon 860M"),
        ("AMD Radeon 840M Graphics", "gfx1152", 2, "AMD Radeon 840M"),
        ("AMD Radeon 780M Graphics", "gfx1103", 6, "AMD Radeon 780M"),
        ("AMD Radeon 760M Graphics", "gfx1103", 4, "AMD Radeon 760M"),
        ("AMD Radeon 740M Graphics", "gfx1103", 2, "AMD Radeon 740M"),
        (GENERIC, "gfx1150", 8, "AMD Radeon 890M"),
        (GENERIC, "gfx1103", 6, "AMD Radeon 780M"),
    ],
)
def test_current_amd_apus_are_identified(name, arch, wgps, product):
    device = rocm(name, arch, gib(16), wgps)
    found = identify(device)
    assert found.fit is not None and found.fit.name == product, found
    assert shares_host_memory(device) == product


def test_an_apu_count_two_products_can_report_needs_the_name():
    # 20 WGPs of gfx1151: a Radeon 8060S or an 8065S (40 CUs each).
    both = rocm(GENERIC, "gfx1151", gib(96), 20)
    assert {f.name for f in identify(both).fits} == {"AMD Radeon 8060S", "AMD Radeon 8065S"}
    assert generation_name(both) == "AMD Radeon 8060S or AMD Radeon 8065S"
    # 16 of gfx1151: an 8050S's WGPs, or an 8040S's CUs in CU mode. Never one name.
    found = identify(rocm(GENERIC, "gfx1151", gib(96), 16))
    assert found.fit is None
    assert {f.name for f in found.fits} == {"AMD Radeon 8050S", "AMD Radeon 8040S"}
    named = rocm("AMD Radeon 8040S Graphics", "gfx1151", gib(96), 16)
    named_fit = identify(named).fit
    assert named_fit is not None and named_fit.name == "AMD Radeon 8040S"
    assert identify(named).basis == "device name"


def test_cdna_counts_stay_compute_units():
    # CDNA has no WGPs: half an MI250X GCD's CUs is not read as its WGPs.
    assert identify(rocm(GENERIC, "gfx90a", GCD_MEMORY, 55)).fits == ()
    assert "gfx90a, 55 CUs, 64 GiB" in (explain(rocm(GENERIC, "gfx90a", GCD_MEMORY, 55)) or "")
    # Half an MI300X's CUs is still a DPX partition, not a count of WGPs.
    fit = identify(rocm(GENERIC, "gfx942", MI300X_MEMORY, 152)).fit
    assert fit is not None and fit.mode == "DPX"


def test_mi300x_and_mi325x_with_a_generic_name_get_their_own_peaks():
    mi300x = lookup(rocm(GENERIC, "gfx942", MI300X_MEMORY, 304))
    mi325x = lookup(rocm(GENERIC, "gfx942", MI325X_MEMORY, 304))
    assert mi300x is not None and mi325x is not None
    assert mi300x.memory_tbs == 5.3 and mi325x.memory_tbs == 6.0
    assert identify(rocm(GENERIC, "gfx942", MI300X_MEMORY, 304)).basis == "gfx942, 304 CUs, 192 GiB"


@pytest.mark.parametrize(
    ("cus", "memory", "mode", "partitions"),
    [
        (152, MI300X_MEMORY, "DPX", 2),
        (76, MI300X_MEMORY, "QPX", 4),
        (38, MI300X_MEMORY, "CPX", 8),  # CPX with one memory partition: each sees it all
        (152, gib(95.9), "DPX", 2),  # each of two memory partitions (NPS2)
    ],
)
def test_a_partitioned_mi300x_with_a_generic_name_is_still_recognised(cus, memory, mode,
                                                                      partitions):
    device = rocm(GENERIC, "gfx942", memory, cus)
    fit = identify(device).fit
    assert fit is not None and fit.mode == mode
    assert generation_name(device) == f"AMD Instinct MI300X ({mode})"
    whole = lookup(rocm(GENERIC, "gfx942", MI300X_MEMORY, 304))
    share = lookup(device)
    assert whole is not None and share is not None
    assert share.devices_per_package == partitions
    assert share.dense_flops("bf16") == pytest.approx(whole.dense_flops("bf16") / partitions)


def test_a_cpx_partition_in_nps4_needs_its_name_to_tell_mi300x_from_mi300a():
    # 38 CUs and 48 GiB: one XCD of an MI300X in NPS4, or of an MI300A in CPX mode.
    generic = rocm(GENERIC, "gfx942", gib(47.9), 38)
    assert lookup(generic) is None
    reason = explain(generic)
    assert reason is not None
    assert "AMD Instinct MI300X (CPX)" in reason and "AMD Instinct MI300A (CPX)" in reason
    label = generation_name(generic)
    assert label == "AMD Instinct MI300X (CPX) or AMD Instinct MI300A (CPX)"
    for named in (rocm("AMD Instinct MI300X", "gfx942", gib(47.9), 38),
                  rocm(GENERIC, "gfx942", gib(47.9), 38, market_name="AMD Instinct MI300X")):
        peaks = lookup(named)
        assert peaks is not None and peaks.devices_per_package == 8
        assert generation_name(named) == "AMD Instinct MI300X (CPX)"


def test_mi210_or_an_mi250_gcd_gets_their_equal_peaks_but_no_one_product_name():
    device = rocm(GENERIC, "gfx90a", GCD_MEMORY, 104)
    found = identify(device)
    assert found.fit is None
    assert {f.name for f in found.fits} == {"AMD Instinct MI210", "AMD Instinct MI250"}
    assert found.reason is not None
    assert "neither the device name nor the vendor tool says which" in found.reason
    peaks = lookup(device)
    mi210 = lookup(rocm("AMD Instinct MI210", "gfx90a", GCD_MEMORY, 104))
    mi250 = lookup(rocm("AMD Instinct MI250", "gfx90a", GCD_MEMORY, 104))
    assert peaks is not None and mi210 is not None and mi250 is not None
    for key in mi210.dense:
        assert peaks.dense_flops(key) == pytest.approx(mi210.dense_flops(key), rel=0.005)
        assert peaks.dense_flops(key) == pytest.approx(mi250.dense_flops(key), rel=0.005)
    assert peaks.name == generation_name(device) == "AMD Instinct MI210 or AMD Instinct MI250"
    # amd-smi's market name decides.
    told = rocm(GENERIC, "gfx90a", GCD_MEMORY, 104, market_name="AMD Instinct MI210")
    told_fit = identify(told).fit
    assert told_fit is not None and told_fit.name == "AMD Instinct MI210"
    assert identify(told).basis == "vendor tool's product name"


def test_no_two_products_share_a_generation_name():
    devices = {
        "MI210": rocm("AMD Instinct MI210", "gfx90a", GCD_MEMORY, 104),
        "MI250": rocm("AMD Instinct MI250X / MI250", "gfx90a", GCD_MEMORY, 104),
        "MI250X": rocm("AMD Instinct MI250X / MI250", "gfx90a", GCD_MEMORY, 110),
        "MI210 or MI250": rocm(GENERIC, "gfx90a", GCD_MEMORY, 104),
        "MI300X": rocm(GENERIC, "gfx942", MI300X_MEMORY, 304),
        "MI300X CPX": rocm(GENERIC, "gfx942", MI300X_MEMORY, 38),
        "MI325X": rocm(GENERIC, "gfx942", MI325X_MEMORY, 304),
        "MI300A": rocm(GENERIC, "gfx942", gib(100), 228),
        "W7900 or Dual Slot": rocm(GENERIC, "gfx1100", gib(47.98), 48),
        "W7900": rocm("AMD Radeon PRO W7900", "gfx1100", gib(47.98), 48),
        "7900 XTX": rocm(GENERIC, "gfx1100", gib(23.98), 48),
        "7900 XT": rocm(GENERIC, "gfx1100", gib(19.98), 42),
        "8060S": rocm("AMD Radeon 8060S Graphics", "gfx1151", gib(96), 20),
        "8060S or 8065S": rocm(GENERIC, "gfx1151", gib(96), 20),
        "unknown APU": rocm(GENERIC, "gfx1151", gib(96), 12),
        "unknown gfx942": rocm(GENERIC, "gfx942", gib(191.7), 80),
    }
    names = {key: generation_name(d) for key, d in devices.items()}
    assert len(set(names.values())) == len(names), names
    # One product reached by two routes keeps one name, so its results still group.
    named = rocm("AMD Instinct MI300X", "gfx942", MI300X_MEMORY, 304)
    assert generation_name(named) == names["MI300X"] == "AMD Instinct MI300X"


@pytest.mark.parametrize(
    ("device", "words"),
    [
        (rocm(GENERIC, "gfx1100", gib(47.98), 48),
         ("AMD Radeon PRO W7900 and AMD Radeon PRO W7900 Dual Slot",
          "no published figures for AMD Radeon PRO W7900 Dual Slot")),
        (rocm("AMD Radeon PRO W7900 Dual Slot", "gfx1100", gib(47.98), 48),
         ("no published figures for AMD Radeon PRO W7900 Dual Slot",)),
        (rocm(GENERIC, "gfx1151", gib(96), 12), ("gfx1151, 12 WGPs, 96 GiB fits no product",)),
        (rocm(GENERIC, "gfx1100", gib(47.98), 35), ("gfx1100, 35 WGPs, 48 GiB fits no product",)),
        (rocm(GENERIC, "gfx942", None, None), ("takes the architecture, the compute units",)),
        (rocm(GENERIC, None, MI300X_MEMORY, 304), ("takes the architecture",)),
        (rocm("AMD Instinct MI250X", "gfx90a", GCD_MEMORY, 104),
         ("the device name says AMD Instinct MI250X, but gfx90a, 104 CUs, 64 GiB",)),
        (rocm("AMD Instinct MI300X", "gfx942", MI325X_MEMORY, 304), ("256 GiB fits no",)),
        (rocm("AMD Instinct MI300X VF", "gfx942", MI300X_MEMORY, 304),
         ("'AMD Instinct MI300X VF' is not a GPU in the peak table",)),
        (rocm("NVIDIA H100 80GB HBM3", "gfx942"), ("not a ROCm device",)),
        (DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC 9654"),
         ("holds GPUs, not cpu",)),
    ],
)
def test_a_device_that_cannot_be_identified_says_why_and_gets_no_peaks(device, words):
    assert lookup(device) is None
    reason = explain(device)
    assert reason is not None
    for text in words:
        assert text in reason


def test_a_name_that_contradicts_the_device_does_not_name_its_generation():
    device = rocm("AMD Instinct MI250X", "gfx90a", GCD_MEMORY, 104)
    assert generation_name(device) == "AMD Instinct MI250X (gfx90a, 104 CUs, 64 GiB)"


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.name)
def test_a_product_never_gets_another_products_peaks(sig):
    """Whatever a device with a generic name and this product's properties is taken for,
    the figures it gets are this product's own, or there are none."""
    memory = None if sig.memory_gib is None else gib(sig.memory_gib * 0.999)
    device = rocm(GENERIC, sig.arch, memory, reported_count(sig))
    own = next((p for p in all_peaks() if p.name == sig.name), None)
    got = lookup(device)
    if got is None:
        assert explain(device)
        return
    assert own is not None, f"{sig.name} has no entry but got {got.name}"
    assert sig.name in got.name
    for key in own.dense:
        got_flops, own_flops = got.dense_flops(key), own.dense_flops(key)
        assert got_flops is not None and own_flops is not None, key
        assert math.isclose(got_flops, own_flops, rel_tol=0.005), key
    got_bandwidth, own_bandwidth = got.memory_bandwidth, own.memory_bandwidth
    assert got_bandwidth is not None and own_bandwidth is not None
    assert math.isclose(got_bandwidth, own_bandwidth, rel_tol=0.005)


def test_every_amd_table_entry_can_be_identified_from_its_properties():
    amd = {p.name for p in all_peaks() if not p.name.startswith("NVIDIA")}
    assert amd <= {s.name for s in SIGNATURES}


def test_a_device_stored_before_these_fields_still_loads_and_is_identified_by_name():
    old = {"type": "cuda", "index": 0, "platform": "rocm", "name": "AMD Instinct MI250X",
           "arch": "gfx90a"}
    device = DeviceInfo.from_dict(old)
    assert device.market_name is None and device.compute_units is None
    peaks = lookup(device)
    assert peaks is not None and peaks.name == "AMD Instinct MI250X"


def test_an_l40s_is_identified_by_its_cuda_name():
    device = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA L40S",
                        arch="sm_89", memory_bytes=gib(44.99), compute_units=142)
    found = identify(device)
    assert found.fit is not None and found.fit.name == "NVIDIA L40S"
    assert identify(DeviceInfo(type="cuda", index=0, platform="cuda",
                               name="NVIDIA L40")).fit is None
