from __future__ import annotations

from dataclasses import dataclass

import pytest

from accelbench.core.device import DeviceInfo
from accelbench.core.dtypes import DTYPES
from accelbench.core.peaks import PRECISIONS, DevicePeaks, all_peaks, explain, lookup
from accelbench.core.product import SIGNATURES


def gpu(
    name: str, platform: str = "cuda", arch: str | None = None, cus: int | None = None,
    memory: int | None = None,
) -> DeviceInfo:
    return DeviceInfo(
        type="cuda", index=0, platform=platform, name=name, arch=arch, compute_units=cus,
        memory_bytes=memory,
    )


@pytest.mark.parametrize(
    ("torch_name", "platform", "arch", "entry"),
    [
        ("AMD Instinct MI100", "rocm", "gfx908", "AMD Instinct MI100"),
        ("AMD Instinct MI210", "rocm", "gfx90a", "AMD Instinct MI210"),
        ("AMD Instinct MI250", "rocm", "gfx90a", "AMD Instinct MI250"),
        ("AMD Instinct MI250X", "rocm", "gfx90a", "AMD Instinct MI250X"),
        ("AMD Instinct MI300X", "rocm", "gfx942", "AMD Instinct MI300X"),
        ("AMD Instinct MI325X", "rocm", "gfx942", "AMD Instinct MI325X"),
        ("AMD Instinct MI300A", "rocm", "gfx942", "AMD Instinct MI300A"),
        ("AMD Radeon Pro V620", "rocm", "gfx1030", "AMD Radeon PRO V620"),
        ("AMD Radeon PRO W7900", "rocm", "gfx1100", "AMD Radeon PRO W7900"),
        ("AMD Radeon RX 7900 XTX", "rocm", "gfx1100", "AMD Radeon RX 7900 XTX"),
        ("NVIDIA A100-SXM4-40GB", "cuda", "sm_80", "NVIDIA A100 SXM4 40GB"),
        ("NVIDIA A100-SXM4-80GB", "cuda", "sm_80", "NVIDIA A100 SXM4 80GB"),
        ("NVIDIA A100-PCIE-40GB", "cuda", "sm_80", "NVIDIA A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", "cuda", "sm_80", "NVIDIA A100 PCIe 80GB"),
        ("NVIDIA H100 80GB HBM3", "cuda", "sm_90", "NVIDIA H100 SXM5"),
        ("NVIDIA H100 PCIe", "cuda", "sm_90", "NVIDIA H100 PCIe"),
        ("NVIDIA H200", "cuda", "sm_90", "NVIDIA H200 SXM"),
        ("NVIDIA L40S", "cuda", "sm_89", "NVIDIA L40S"),
    ],
)
def test_every_listed_device_is_found_by_its_pytorch_name(torch_name, platform, arch, entry):
    peaks = lookup(gpu(torch_name, platform, arch))
    assert peaks is not None and peaks.name == entry
    assert peaks.memory_bandwidth and peaks.memory_bandwidth > 5e11  # V620: 512 GB/s
    fp16 = peaks.dense_flops("fp16")
    assert fp16 and fp16 > 4e13  # V620: 40.55
    assert peaks.source


# The vendors' own spec parameters, from which their datasheets compute each peak:
# compute units (CUs or SMs), the clock the figure assumes, FLOP (OP for int8) per clock
# per unit for each precision, and the memory's bus width and per-pin data rate. AMD's
# datasheet footnotes give the products (e.g. MI300X: 304 CUs x 2100 MHz x 2048
# FLOP/clock/CU = 1307.4 TFLOP/s fp16). NVIDIA's Hopper figures assume two boost clocks:
# 1830 MHz (SXM5) or 1620 MHz (PCIe) for tensor-core math, 1980 or 1755 MHz for fp64 and
# fp32 (H100 whitepaper, table 3). NVIDIA fp32 is the CUDA cores' figure (128 per SM on
# Hopper, 64 on Ampere, two FLOP per FMA); AMD fp32 and fp64 are the matrix cores', but
# MI100 has no fp64 matrix cores and its fp64 figure is the vector one.
@dataclass(frozen=True)
class Spec:
    units: int  # CUs or SMs per PyTorch device
    clock_mhz: dict[str, float]  # per precision
    per_clock: dict[str, int]  # dense FLOP per clock per unit, per precision
    sparse: tuple[str, ...]  # precisions the vendor rates at 2x with 2:4 sparsity
    bus_bits: int | None  # memory bus per PyTorch device
    gbps: float | None  # memory data rate per pin
    devices: int = 1  # PyTorch devices per package
    sparse_mhz: dict[str, float] | None = None  # where the sparse figure assumes another clock


def _clocks(mhz: float, keys: str = "fp64 fp32 tf32 fp16 bf16 fp8 int8") -> dict[str, float]:
    return dict.fromkeys(keys.split(), mhz)


CDNA1_CU = {"fp64": 64, "fp32": 256, "fp16": 1024, "bf16": 512, "int8": 1024}
CDNA2_CU = {"fp64": 256, "fp32": 256, "fp16": 1024, "bf16": 1024, "int8": 1024}
CDNA3_CU = {"fp64": 256, "fp32": 256, "tf32": 1024, "fp16": 2048, "bf16": 2048, "fp8": 4096,
            "int8": 4096}
AMPERE_SM = {"fp64": 128, "fp32": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048, "int8": 4096}
# RDNA has no fp32 or fp64 matrix units: fp32 is the vector rate, dual-issued on RDNA 3
# (64 lanes x 2 issues x 2 FLOP per FMA); fp16 is packed math on RDNA 2 and WMMA on RDNA 3,
# where bf16 runs at the fp16 rate.
RDNA2_CU = {"fp32": 128, "fp16": 256}
RDNA3_CU = {"fp32": 256, "fp16": 512, "bf16": 512}
HOPPER_SM = {"fp64": 256, "fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096, "fp8": 8192,
             "int8": 8192}
TENSOR_SPARSE = ("tf32", "fp16", "bf16", "fp8", "int8")
AMPERE_SPARSE = ("tf32", "fp16", "bf16", "int8")  # Ampere has no fp8
ADA_SM = {"fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp8": 2048}
ADA_SPARSE = ("tf32", "fp16", "bf16", "fp8")


def _hopper(sms: int, high_mhz: float, tensor_mhz: float, bus_bits: int, gbps: float) -> Spec:
    return Spec(sms, {**_clocks(high_mhz, "fp64 fp32"), **_clocks(tensor_mhz,
                                                                   "tf32 fp16 bf16 fp8 int8")},
                HOPPER_SM, TENSOR_SPARSE, bus_bits, gbps)


SPECS = {
    # 120 CUs at 1502 MHz; 4096-bit HBM2 at 2.4 Gb/s.
    "AMD Instinct MI100": Spec(120, _clocks(1502), CDNA1_CU, (), 4096, 2.4),
    # 104 CUs at 1700 MHz; 4096-bit HBM2e at 3.2 Gb/s.
    "AMD Instinct MI210": Spec(104, _clocks(1700), CDNA2_CU, (), 4096, 3.2),
    # Per GCD: 104 (MI250) or 110 (MI250X) CUs at 1700 MHz, 4096 bits of HBM2e at 3.2 Gb/s.
    "AMD Instinct MI250": Spec(104, _clocks(1700), CDNA2_CU, (), 4096, 3.2, devices=2),
    "AMD Instinct MI250X": Spec(110, _clocks(1700), CDNA2_CU, (), 4096, 3.2, devices=2),
    # 304 CUs at 2100 MHz; 8192-bit HBM3 at 5.2 Gb/s. MI325X: the same die with HBM3E,
    # whose data rate AMD does not print (only "6 TB/s"), so its memory is not derived.
    "AMD Instinct MI300X": Spec(304, _clocks(2100), CDNA3_CU, TENSOR_SPARSE, 8192, 5.2),
    "AMD Instinct MI325X": Spec(304, _clocks(2100), CDNA3_CU, TENSOR_SPARSE, None, None),
    # 228 CUs (six XCDs of 38) at 2100 MHz; 8192-bit HBM3 at 5.2 Gb/s, as MI300X.
    "AMD Instinct MI300A": Spec(228, _clocks(2100), CDNA3_CU, TENSOR_SPARSE, 8192, 5.2),
    # 72 CUs at 2200 MHz; 256-bit GDDR6 at 16 Gb/s.
    "AMD Radeon PRO V620": Spec(72, _clocks(2200, "fp32 fp16"), RDNA2_CU, (), 256, 16.0),
    # 96 CUs at 2495 MHz (W7900) or 2500 MHz (7900 XTX); 384-bit GDDR6 at 18 or 20 Gb/s.
    "AMD Radeon PRO W7900": Spec(96, _clocks(2495, "fp32 fp16 bf16"), RDNA3_CU, (), 384, 18.0),
    "AMD Radeon RX 7900 XTX": Spec(96, _clocks(2500, "fp32 fp16 bf16"), RDNA3_CU, (), 384,
                                   20.0),
    # 108 SMs at 1410 MHz; 5120-bit HBM2 at 2.43 Gb/s (40GB), HBM2e at 3.186 (SXM4 80GB)
    # or 3.024 Gb/s (PCIe 80GB).
    "NVIDIA A100 SXM4 40GB": Spec(108, _clocks(1410), AMPERE_SM, AMPERE_SPARSE, 5120, 2.43),
    "NVIDIA A100 PCIe 40GB": Spec(108, _clocks(1410), AMPERE_SM, AMPERE_SPARSE, 5120, 2.43),
    "NVIDIA A100 SXM4 80GB": Spec(108, _clocks(1410), AMPERE_SM, AMPERE_SPARSE, 5120, 3.186),
    "NVIDIA A100 PCIe 80GB": Spec(108, _clocks(1410), AMPERE_SM, AMPERE_SPARSE, 5120, 3.024),
    # 132 SMs; 5120-bit HBM3 at 5.2 Gb/s. H200: the same GPU, 6144-bit HBM3E at 6.2 Gb/s.
    "NVIDIA H100 SXM5": _hopper(132, 1980, 1830, 5120, 5.2),
    "NVIDIA H200 SXM": _hopper(132, 1980, 1830, 6144, 6.2),
    # 114 SMs; 5120-bit HBM2e at 3.2 Gb/s (the datasheet rounds to "2 TB/s").
    "NVIDIA H100 PCIe": _hopper(114, 1755, 1620, 5120, 3.2),
    # 142 SMs at 2520 MHz; 384-bit GDDR6 at 18 Gb/s. The datasheet's dense FP16/BF16
    # figure (362.05) is 2490 MHz's, its sparse one (733) twice 2520 MHz's.
    "NVIDIA L40S": Spec(142, {**_clocks(2520, "fp32 tf32 fp8"), **_clocks(2490, "fp16 bf16")},
                        ADA_SM, ADA_SPARSE, 384, 18.0,
                        sparse_mhz=_clocks(2520, "tf32 fp16 bf16 fp8")),
}
COMPUTE_REL = 0.01  # datasheets print three or four significant figures
MEMORY_REL = 0.025  # and bandwidth to two or three ("2 TB/s", "5.3 TB/s")


def _derived_dense(spec: Spec, key: str) -> float:
    """FLOP/s per PyTorch device from the spec parameters."""
    return spec.units * spec.clock_mhz[key] * 1e6 * spec.per_clock[key]


def test_every_table_entry_has_its_spec_here():
    assert {p.name for p in all_peaks()} == set(SPECS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_dense_peaks_are_what_the_spec_parameters_give(name):
    spec, peaks = SPECS[name], _entry(name)
    assert peaks.devices_per_package == spec.devices
    # A precision the vendor rates is in the table, and nothing else is.
    assert set(peaks.dense) == set(spec.per_clock)
    for key in spec.per_clock:
        assert peaks.dense_flops(key) == pytest.approx(_derived_dense(spec, key),
                                                       rel=COMPUTE_REL), key


@pytest.mark.parametrize("name", sorted(SPECS))
def test_sparse_peaks_are_twice_dense_where_the_vendor_says_so(name):
    spec, peaks = SPECS[name], _entry(name)
    assert set(peaks.sparse) == set(spec.sparse)
    for key in spec.sparse:
        dense = _derived_dense(spec, key)
        if spec.sparse_mhz is not None:
            dense *= spec.sparse_mhz[key] / spec.clock_mhz[key]
        assert peaks.sparse_flops(key) == pytest.approx(2 * dense, rel=COMPUTE_REL), key
    assert peaks.sparse_flops("fp64") is None and peaks.sparse_flops("fp32") is None


@pytest.mark.parametrize("name", sorted(n for n, s in SPECS.items() if s.bus_bits))
def test_memory_bandwidth_is_bus_width_times_data_rate(name):
    spec, peaks = SPECS[name], _entry(name)
    assert spec.bus_bits is not None and spec.gbps is not None
    derived = spec.bus_bits / 8 * spec.gbps * 1e9
    assert peaks.memory_bandwidth == pytest.approx(derived, rel=MEMORY_REL)


def test_mi250_and_mi250x_devices_are_one_gcd_each():
    for name in ("AMD Instinct MI250", "AMD Instinct MI250X"):
        peaks = lookup(gpu(name, "rocm", "gfx90a"))
        assert peaks is not None and peaks.devices_per_package == 2
        for key in peaks.dense:
            # What PyTorch sees is half the package the datasheet rates.
            assert peaks.dense_flops(key) == pytest.approx(peaks.dense[key] * 1e12 / 2)
        assert peaks.memory_tbs is not None
        assert peaks.memory_bandwidth == pytest.approx(peaks.memory_tbs * 1e12 / 2)
    # MI250X's GCD has 110 CUs where MI210's whole GPU has 104, at the same clock.
    mi250x = lookup(gpu("AMD Instinct MI250X", "rocm", "gfx90a"))
    mi210 = lookup(gpu("AMD Instinct MI210", "rocm", "gfx90a"))
    assert mi250x is not None and mi210 is not None
    mi250x_fp64, mi210_fp64 = mi250x.dense_flops("fp64"), mi210.dense_flops("fp64")
    assert mi250x_fp64 is not None and mi210_fp64 is not None
    assert mi250x_fp64 / mi210_fp64 == pytest.approx(110 / 104, rel=0.01)


def test_h200_computes_like_h100_sxm_with_more_bandwidth():
    h100, h200 = _entry("NVIDIA H100 SXM5"), _entry("NVIDIA H200 SXM")
    assert h200.dense == h100.dense and h200.sparse == h100.sparse
    assert h200.memory_tbs is not None and h100.memory_tbs is not None
    assert h200.memory_tbs > h100.memory_tbs


def _entry(name: str) -> DevicePeaks:
    return next(p for p in all_peaks() if p.name == name)


@pytest.mark.parametrize(
    ("name", "arch", "wgps", "gib", "entry"),
    [
        # What ROCm reports: work-group processors (two CUs each) and a little under the
        # nominal memory.
        ("AMD Radeon RX 7900 XTX", "gfx1100", 48, 23.98, "AMD Radeon RX 7900 XTX"),
        ("AMD Radeon Graphics", "gfx1100", 48, 23.98, "AMD Radeon RX 7900 XTX"),
        ("AMD Radeon PRO W7900", "gfx1100", 48, 47.98, "AMD Radeon PRO W7900"),
        ("AMD Radeon Pro V620", "gfx1030", 36, 31.98, "AMD Radeon PRO V620"),
        ("AMD Radeon Graphics", "gfx1030", 36, 31.98, "AMD Radeon PRO V620"),
    ],
)
def test_rdna_gpus_as_rocm_reports_them_get_their_peaks(name, arch, wgps, gib, entry):
    peaks = lookup(gpu(name, "rocm", arch, cus=wgps, memory=int(gib * 2**30)))
    assert peaks is not None and peaks.name == entry
    assert peaks.devices_per_package == 1  # a WGP count is not a compute partition
    fp16 = peaks.dense_flops("fp16")
    assert fp16 is not None and fp16 == pytest.approx(peaks.dense["fp16"] * 1e12)


def test_a_7900_xt_gets_no_7900_xtx_peaks():
    device = gpu("AMD Radeon Graphics", "rocm", "gfx1100", cus=42, memory=int(19.98 * 2**30))
    assert lookup(device) is None
    assert "gfx1100, 42 WGPs, 20 GiB fits no product" in (explain(device) or "")


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.unified_memory and
                                 s.arch.startswith("gfx11")], ids=lambda s: s.name)
def test_an_amd_apu_gpu_has_no_made_up_peaks(sig):
    """AMD gives a Ryzen processor's GPU a model, a CU count and a clock, but no peak
    figures: the table holds none, and says so, rather than a figure of its own making."""
    assert sig.name not in {p.name for p in all_peaks()}
    device = gpu(sig.name + " Graphics", "rocm", sig.arch, cus=sig.compute_units // 2,
                 memory=96 << 30)
    assert lookup(device) is None
    assert f"no published figures for {sig.name}" in (explain(device) or "")


def test_the_cpu_has_no_published_peak():
    cpu = DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC 7763 64-Core")
    assert lookup(cpu) is None


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GeForce RTX 4090",
        "NVIDIA H100",  # SXM or PCIe: cannot tell
        "NVIDIA H100 NVL",
        "NVIDIA H200 NVL",
        "AMD Instinct MI250X / MI250",
        "AMD Instinct MI300X VF",
        "",
    ],
)
def test_unknown_or_ambiguous_names_give_none(name):
    assert lookup(gpu(name, "cuda", "sm_90")) is None
    assert lookup(gpu(name, "rocm", "gfx90a")) is None


def test_the_rocm_arch_decides_only_where_it_is_unambiguous():
    mi100 = lookup(gpu("", "rocm", "gfx908"))
    assert mi100 is not None and mi100.name == "AMD Instinct MI100"
    mi100 = lookup(gpu("AMD Radeon Graphics", "rocm", "gfx908:sramecc+:xnack-"))
    assert mi100 is not None and mi100.name == "AMD Instinct MI100"
    assert lookup(gpu("", "rocm", "gfx90a")) is None
    assert lookup(gpu("AMD Radeon Graphics", "rocm", "gfx942")) is None
    assert lookup(gpu("", "cuda", "gfx908")) is None  # an arch means nothing off ROCm


def test_a_gpu_name_on_the_wrong_platform_or_arch_gets_no_peaks():
    assert lookup(gpu("AMD Instinct MI300A", "cuda", "sm_90")) is None
    assert lookup(gpu("AMD Instinct MI300A", "rocm", "gfx90a")) is None
    assert lookup(gpu("NVIDIA H100 PCIe", "rocm", "gfx942")) is None


def test_a_compute_partition_gets_its_share_of_the_package():
    full = lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942", cus=304))
    cpx = lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942", cus=38))
    assert full is not None and cpx is not None
    assert full.devices_per_package == 1
    assert cpx.devices_per_package == 8
    full_bf16 = full.dense_flops("bf16")
    assert full_bf16 is not None
    assert cpx.dense_flops("bf16") == pytest.approx(full_bf16 / 8)
    near_full = lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942", cus=300))
    assert near_full is not None and near_full.devices_per_package == 1


L40S_CLOCK_SPLIT = {("NVIDIA L40S", "fp16"), ("NVIDIA L40S", "bf16")}


def test_the_table_is_consistent():
    names = [p.name for p in all_peaks()]
    assert len(names) == len(set(names))
    for peaks in all_peaks():
        assert set(peaks.dense) <= set(PRECISIONS), peaks.name
        assert set(peaks.sparse) <= set(peaks.dense), peaks.name
        for key, sparse in peaks.sparse.items():
            # The L40S datasheet's dense FP16/BF16 figure assumes a lower clock than its
            # sparse one (see SPECS): 733 is not twice 362.05.
            rel = 0.015 if (peaks.name, key) in L40S_CLOCK_SPLIT else 1e-3
            assert sparse == pytest.approx(2 * peaks.dense[key], rel=rel), (peaks.name, key)
        fp64 = peaks.dense.get("fp64", 0.0)  # RDNA data sheets give none
        assert peaks.dense["fp16"] >= peaks.dense["fp32"] >= fp64 * 0.99
        # A precision a GPU does not support has no figure: tf32 and fp8 on RDNA.
        if not peaks.name.startswith(("AMD Instinct MI300", "AMD Instinct MI325", "NVIDIA H",
                                      "NVIDIA L40S")):
            assert "fp8" not in peaks.dense, peaks.name


def test_every_precision_accelbench_measures_has_a_peak_key():
    assert {d.peak_key for d in DTYPES.values()} == set(PRECISIONS)
