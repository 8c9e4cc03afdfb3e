from __future__ import annotations

import pytest

from accelbench.core.dtypes import DTYPES
from accelbench.env.device import DeviceInfo
from accelbench.env.peaks import PRECISIONS, all_peaks, lookup


def gpu(name: str, platform: str = "cuda", arch: str | None = None, cus: int | None = None):
    return DeviceInfo(
        type="cuda", index=0, platform=platform, name=name, arch=arch, compute_units=cus
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
        ("NVIDIA A100-SXM4-40GB", "cuda", "sm_80", "NVIDIA A100 SXM4 40GB"),
        ("NVIDIA A100-SXM4-80GB", "cuda", "sm_80", "NVIDIA A100 SXM4 80GB"),
        ("NVIDIA A100-PCIE-40GB", "cuda", "sm_80", "NVIDIA A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", "cuda", "sm_80", "NVIDIA A100 PCIe 80GB"),
        ("NVIDIA H100 80GB HBM3", "cuda", "sm_90", "NVIDIA H100 SXM5"),
        ("NVIDIA H100 PCIe", "cuda", "sm_90", "NVIDIA H100 PCIe"),
        ("NVIDIA H200", "cuda", "sm_90", "NVIDIA H200 SXM"),
    ],
)
def test_every_listed_device_is_found_by_its_pytorch_name(torch_name, platform, arch, entry):
    peaks = lookup(gpu(torch_name, platform, arch))
    assert peaks is not None and peaks.name == entry
    assert peaks.memory_bandwidth and peaks.memory_bandwidth > 1e12
    assert peaks.dense_flops("fp16") and peaks.dense_flops("fp16") > 1e14
    assert peaks.source


def test_mi250x_figures_are_per_gcd():
    peaks = lookup(gpu("AMD Instinct MI250X", "rocm", "gfx90a"))
    assert peaks.devices_per_package == 2
    assert peaks.dense["fp16"] == 383.0
    assert peaks.dense_flops("fp16") == pytest.approx(383.0e12 / 2)
    assert peaks.dense_flops("fp64") == pytest.approx(95.7e12 / 2)
    assert peaks.memory_bandwidth == pytest.approx(3.2768e12 / 2)
    mi250 = lookup(gpu("AMD Instinct MI250", "rocm", "gfx90a"))
    assert mi250.dense_flops("bf16") == pytest.approx(362.1e12 / 2)


def test_dense_and_sparse_are_kept_apart():
    h100 = lookup(gpu("NVIDIA H100 80GB HBM3"))
    assert h100.dense_flops("fp16") == pytest.approx(989.5e12)
    assert h100.sparse_flops("fp16") == pytest.approx(1979e12)
    assert h100.dense_flops("fp32") == pytest.approx(67e12)  # CUDA cores, not tensor cores
    assert h100.sparse_flops("fp32") is None
    mi300x = lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942"))
    assert mi300x.dense_flops("fp8") == pytest.approx(2614.9e12)
    assert mi300x.sparse_flops("fp8") == pytest.approx(5229.8e12)


def test_what_a_datasheet_does_not_give_is_absent():
    a100 = lookup(gpu("NVIDIA A100-SXM4-80GB"))
    assert a100.dense_flops("fp8") is None
    mi250x = lookup(gpu("AMD Instinct MI250X", "rocm", "gfx90a"))
    assert mi250x.dense_flops("tf32") is None and mi250x.dense_flops("fp8") is None
    assert mi250x.sparse_flops("fp16") is None


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
        "AMD Instinct MI300A",
        "AMD Instinct MI300X VF",
        "",
    ],
)
def test_unknown_or_ambiguous_names_give_none(name):
    assert lookup(gpu(name, "cuda", "sm_90")) is None
    assert lookup(gpu(name, "rocm", "gfx90a")) is None


def test_the_rocm_arch_decides_only_where_it_is_unambiguous():
    assert lookup(gpu("", "rocm", "gfx908")).name == "AMD Instinct MI100"
    assert lookup(gpu("AMD Radeon Graphics", "rocm", "gfx908:sramecc+:xnack-")).name == (
        "AMD Instinct MI100"
    )
    assert lookup(gpu("", "rocm", "gfx90a")) is None
    assert lookup(gpu("AMD Radeon Graphics", "rocm", "gfx942")) is None
    assert lookup(gpu("", "cuda", "gfx908")) is None  # an arch means nothing off ROCm


def test_a_compute_partition_gets_its_share_of_the_package():
    full = lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942", cus=304))
    cpx = lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942", cus=38))
    assert full.devices_per_package == 1
    assert cpx.devices_per_package == 8
    assert cpx.dense_flops("bf16") == pytest.approx(full.dense_flops("bf16") / 8)
    assert lookup(gpu("AMD Instinct MI300X", "rocm", "gfx942", cus=300)).devices_per_package == 1


def test_the_table_is_consistent():
    names = [p.name for p in all_peaks()]
    assert len(names) == len(set(names))
    for peaks in all_peaks():
        assert set(peaks.dense) <= set(PRECISIONS), peaks.name
        assert set(peaks.sparse) <= set(peaks.dense), peaks.name
        for key, sparse in peaks.sparse.items():
            assert sparse == pytest.approx(2 * peaks.dense[key], rel=1e-3), (peaks.name, key)
        assert peaks.dense["fp16"] >= peaks.dense["fp32"] >= peaks.dense["fp64"] * 0.99


def test_every_precision_accelbench_measures_has_a_peak_key():
    assert {d.peak_key for d in DTYPES.values()} == set(PRECISIONS)
