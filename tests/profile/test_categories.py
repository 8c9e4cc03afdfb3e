"""What each event counts as, by the names CUDA, ROCm and their libraries give it."""

from __future__ import annotations

import pytest

from accelbench.profile.categories import (
    cpu_op_category,
    device_category,
    is_kernel_launch,
    platform_of,
    short_name,
)


@pytest.mark.parametrize("cat, name, expected", [
    ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
               "ncclWork*)", "communication"),
    ("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ncclWork*)",
     "communication"),
    ("kernel", "rcclGenericKernel", "communication"),
    ("kernel", "__amd_rocclr_copyBuffer", "memory"),
    ("kernel", "__amd_rocclr_fillBufferAligned", "memory"),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", "memory"),
    ("gpu_memcpy", "CopyDeviceToHost", "memory"),
    ("gpu_memset", "Memset (Device)", "memory"),
    ("kernel", "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1", "compute"),
    ("kernel", "void at::native::vectorized_elementwise_kernel<4>(int)", "compute"),
])
def test_device_activity(cat, name, expected):
    assert device_category(cat, name) == expected


@pytest.mark.parametrize("name, expected", [
    ("c10d::allreduce_", "communication"), ("record_param_comms", "communication"),
    ("gloo:all_reduce", "communication"), ("aten::copy_", "memory"),
    ("aten::_to_copy", "memory"), ("aten::fill_", "memory"), ("aten::addmm", "compute"),
    ("aten::copysign", "compute"),
])
def test_cpu_operators(name, expected):
    assert cpu_op_category(name) == expected


def test_launch_calls_of_both_platforms():
    launches = ["cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel",
                "cudaGraphLaunch", "hipGraphLaunch"]
    others = ["cudaMemcpyAsync", "hipMemsetAsync", "cudaStreamSynchronize", "hipGetDevice"]
    assert all(is_kernel_launch(n) for n in launches)
    assert not any(is_kernel_launch(n) for n in others)
    assert platform_of({"hipLaunchKernel", "hipMemcpyAsync"}) == "rocm"
    assert platform_of({"cudaLaunchKernel"}) == "cuda"
    assert platform_of(set()) is None


def test_short_names():
    assert short_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                      "at::native::X<2>, float>(at::native::X<2>)") == (
        "at::native::multi_tensor_apply_kernel")
    assert short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert len(short_name("Cijk_" + "x" * 200)) == 70
