"""Which precisions each device supports, with ROCm and CUDA described by their arch names."""

import pytest

from accelbench.core.device import DeviceInfo
from accelbench.core.dtypes import fp8_torch_name, gfx_version, unsupported_reason

CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI100 = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI100", "gfx908")
MI250X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X", "gfx90a")
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942")
MI355X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI355X", "gfx950")
V100 = DeviceInfo("cuda", 0, "cuda", "Tesla V100", "sm_70")
A100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA A100-SXM4-80GB", "sm_80")
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90")


def test_gfx_names_parse():
    assert gfx_version("gfx90a:sramecc+:xnack-") == (9, 0, 10)
    assert gfx_version("gfx942") == (9, 4, 2)
    assert gfx_version("gfx1100") == (11, 0, 0)
    assert gfx_version("sm_90") is None


@pytest.mark.parametrize(
    ("device", "supported", "unsupported"),
    [
        (CPU, {"fp64", "fp32", "fp16", "bf16", "int8"}, {"tf32", "fp8"}),
        (MI100, {"fp32", "fp16", "bf16", "int8"}, {"tf32", "fp8"}),
        (MI250X, {"fp64", "fp16", "bf16", "int8"}, {"tf32", "fp8"}),
        (MI300X, {"tf32", "fp8", "bf16"}, set()),
        (MI355X, {"tf32", "fp8"}, set()),
        (V100, {"fp16", "fp32"}, {"bf16", "tf32", "fp8", "int8"}),
        (A100, {"tf32", "bf16", "int8"}, {"fp8"}),
        (H100, {"tf32", "bf16", "fp8", "int8"}, set()),
    ],
)
def test_support_matrix(device, supported, unsupported):
    for dtype in supported:
        assert unsupported_reason(device, dtype) is None, dtype
    for dtype in unsupported:
        reason = unsupported_reason(device, dtype)
        assert reason and dtype in reason


def test_mi300_uses_the_fnuz_fp8_variant():
    assert fp8_torch_name(MI300X) == "float8_e4m3fnuz"
    assert fp8_torch_name(MI355X) == "float8_e4m3fn"
    assert fp8_torch_name(H100) == "float8_e4m3fn"
