"""The GPU runtime library through ctypes: a fake HIP and CUDA library for the calls, and
the real CUDA runtime PyTorch ships with where this torch is a CUDA build (no GPU
driver here: its calls return error codes, which must come back as exceptions)."""

from __future__ import annotations

import ctypes

import pytest
import torch
from unified_fakes import fake_runtime

from accelbench.benchmarks.micro import gpu_runtime
from accelbench.benchmarks.micro.gpu_runtime import (
    CUDA,
    HIP,
    MANAGED_MEMORY,
    RuntimeCallFailed,
    RuntimeUnavailable,
    find_library,
    open_runtime,
)


@pytest.mark.parametrize(("platform", "managed", "host", "free_host"), [
    ("rocm", "hipMallocManaged", "hipHostMalloc", "hipHostFree"),
    ("cuda", "cudaMallocManaged", "cudaHostAlloc", "cudaFreeHost"),
])
def test_allocations_ask_for_the_flags_and_give_addresses(platform, managed, host, free_host):
    runtime, library = fake_runtime(platform)
    managed_at = runtime.malloc_managed(4096)
    host_at = runtime.malloc_host_mapped(8192)
    assert library.allocations() == [(managed, 4096, 0x1), (host, 8192, 0x2)]
    assert {managed_at, host_at} <= set(library.memory)
    assert runtime.host_device_pointer(host_at) == host_at
    runtime.free(managed_at)
    runtime.free_host(host_at)
    assert [c[0] for c in library.calls[-2:]] == [managed.replace("MallocManaged", "Free"),
                                                  free_host]
    assert runtime.version() == 60342131


def test_a_hip_runtime_without_hiphostmalloc_uses_hiphostalloc():
    runtime, library = fake_runtime("rocm", host_alloc="HostAlloc")
    assert runtime.host_alloc_name() == "hipHostAlloc"
    runtime.malloc_host_mapped(64)
    assert library.allocations() == [("hipHostAlloc", 64, 0x2)]


@pytest.mark.parametrize(("platform", "name", "number"), [
    ("rocm", "hipDeviceAttributeManagedMemory", 24),
    ("cuda", "cudaDevAttrManagedMemory", 83),
])
def test_attributes_are_asked_by_the_runtime_s_number(platform, name, number):
    runtime, library = fake_runtime(platform, attributes={number: 0})
    assert runtime.attribute(MANAGED_MEMORY, 3) == 0
    assert library.calls[-1][2:] == (number, 3)
    assert runtime.attribute_name(MANAGED_MEMORY) == name


def test_an_error_code_is_an_exception_with_the_runtime_s_words():
    runtime, _ = fake_runtime("rocm", fail={"hipMallocManaged": 2})
    with pytest.raises(RuntimeCallFailed) as info:
        runtime.malloc_managed(1 << 20)
    assert str(info.value) == "hipMallocManaged returned 2 (hipError2: a fake error)"
    assert (info.value.function, info.value.code) == ("hipMallocManaged", 2)


def test_a_missing_function_is_unavailable_not_a_crash():
    class Empty:
        pass

    runtime = gpu_runtime.Runtime(CUDA, Empty(), "/lib/libempty.so")
    with pytest.raises(RuntimeUnavailable, match=r"libempty\.so has no function cudaSetDevice"):
        runtime.set_device(0)
    assert runtime.version() is None
    assert runtime.error_text(1) == ""


def test_the_library_loaded_into_the_process_comes_first(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
        "7f20-7f30 r-xp 00000000 08:01 2 /site/torch/lib/libamdhip64.so.6\n\n")
    assert find_library(HIP, str(maps)) == "/site/torch/lib/libamdhip64.so.6"


def test_then_the_installation_named_by_the_environment(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libamdhip64.so.7").write_bytes(b"")
    found = find_library(HIP, str(tmp_path / "no-maps"), {"ROCM_PATH": str(tmp_path)})
    assert found == str(tmp_path / "lib" / "libamdhip64.so.7")


def test_an_unknown_platform_has_no_runtime():
    with pytest.raises(RuntimeUnavailable, match="for the xpu platform"):
        open_runtime("xpu")


def test_no_hip_runtime_here_is_said(monkeypatch):
    monkeypatch.setattr(gpu_runtime, "find_library", lambda api: None)
    with pytest.raises(RuntimeUnavailable, match=r"libamdhip64\.so was not found"):
        open_runtime("rocm")


def test_a_library_that_will_not_load_is_unavailable(tmp_path):
    broken = tmp_path / "libcudart.so.99"
    broken.write_text("not a shared object")
    with pytest.raises(RuntimeUnavailable, match="could not be loaded"):
        open_runtime("cuda", path=str(broken))


# -- the real CUDA runtime, without a GPU driver ------------------------------------------

needs_cuda_build = pytest.mark.skipif(
    not torch.version.cuda or torch.cuda.is_available(),
    reason="needs a CUDA build of PyTorch on a machine without a GPU driver")


@needs_cuda_build
def test_the_cuda_runtime_next_to_torch_is_found_and_loaded():
    path = find_library(CUDA)
    assert path is not None and "libcudart.so" in path
    runtime = open_runtime("cuda")
    assert runtime.path == path
    # ctypes' base class of foreign functions is private, and the one to check against.
    assert isinstance(runtime._function("SetDevice"), ctypes._CFuncPtr)  # type: ignore[attr-defined]


@needs_cuda_build
def test_managed_memory_without_a_driver_is_an_error_code_not_a_crash():
    runtime = open_runtime("cuda")
    with pytest.raises(RuntimeCallFailed) as info:
        runtime.malloc_managed(1 << 20)
    assert info.value.function == "cudaMallocManaged" and info.value.code != 0
    assert "cudaError" in str(info.value)  # the runtime's own name for the code
    with pytest.raises(RuntimeCallFailed):
        runtime.attribute(MANAGED_MEMORY, 0)
    with pytest.raises(RuntimeCallFailed):
        runtime.malloc_host_mapped(1 << 20)
