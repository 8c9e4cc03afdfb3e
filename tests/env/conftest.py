"""Fakes of the torch API of ROCm and CUDA builds, and a runner that replays vendor tools."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from accelbench.env import vendor_tools

VENDOR_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "vendor"

_FIXTURE_FILES = {
    vendor_tools.AMD_SMI_VERSION: "amd-smi-version.json",
    vendor_tools.AMD_SMI_STATIC: "amd-smi-static.json",
    vendor_tools.ROCM_SMI_INFO: "rocm-smi.json",
    vendor_tools.NVIDIA_SMI_QUERY: "nvidia-smi-query.csv",
    vendor_tools.NVIDIA_SMI_VERSION: "nvidia-smi-version.txt",
}

ROCM_CONFIG = """PyTorch built with:
  - GCC 9.3
  - C++ Version: 201703
  - Intel(R) oneAPI Math Kernel Library Version 2022.2-Product Build 20220804 for Intel(R) 64 architecture applications
  - Intel(R) MKL-DNN v3.5.3 (Git Hash 66f0cb9eb66affd2da3bf5f8d897376f04aae6af)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - LAPACK is enabled (usually provided by MKL)
  - NNPACK is enabled
  - CPU capability usage: AVX512
  - HIP Runtime 6.2.41133
  - MIOpen 3.2.0
  - Magma 2.7.2
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, LAPACK_INFO=mkl, TORCH_VERSION=2.5.1, USE_CUDA=OFF, USE_MKL=ON, USE_MKLDNN=ON, USE_NCCL=1, USE_ROCM=ON,
"""  # noqa: E501

CUDA_CONFIG = """PyTorch built with:
  - GCC 9.3
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture applications
  - Intel(R) MKL-DNN v3.5.3 (Git Hash 66f0cb9eb66affd2da3bf5f8d897376f04aae6af)
  - CPU capability usage: AVX512
  - CUDA Runtime 12.4
  - CuDNN 9.1
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_VERSION=12.4, CUDNN_VERSION=9.1.0, LAPACK_INFO=mkl, TORCH_VERSION=2.5.1, USE_CUDA=ON, USE_CUDNN=ON, USE_ROCM=OFF,
"""  # noqa: E501


def fake_torch(
    *,
    version: str,
    props: Sequence[Any],
    hip: str | None = None,
    cuda: str | None = None,
    cudnn: int | None = None,
    nccl: tuple[Any, ...] | None = None,
    config: str = "",
    blas_backend: str = "Cublaslt",
) -> SimpleNamespace:
    """An object with the parts of the torch API the fingerprint reads."""

    def get_device_properties(index: int) -> Any:
        if not 0 <= index < len(props):
            raise RuntimeError("invalid device ordinal")
        return props[index]

    return SimpleNamespace(
        __version__=version,
        __config__=SimpleNamespace(show=lambda: config),
        version=SimpleNamespace(hip=hip, cuda=cuda, git_version="0123abcd", debug=False),
        cuda=SimpleNamespace(
            is_available=lambda: bool(props),
            device_count=lambda: len(props),
            get_device_properties=get_device_properties,
            nccl=SimpleNamespace(version=lambda: nccl),
        ),
        backends=SimpleNamespace(
            cudnn=SimpleNamespace(version=lambda: cudnn, is_available=lambda: cudnn is not None),
            cuda=SimpleNamespace(preferred_blas_library=lambda: SimpleNamespace(name=blas_backend)),
            mps=SimpleNamespace(is_available=lambda: False),
        ),
        get_num_threads=lambda: 32,
    )


def rocm_props(name: str, gcn_arch: str, memory: int, cus: int, l2: int,
               integrated: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        gcnArchName=gcn_arch,
        total_memory=memory,
        multi_processor_count=cus,
        major=9,
        minor=0,
        L2_cache_size=l2,
        is_integrated=integrated,
    )


def mi250x_torch(count: int = 2) -> SimpleNamespace:
    """PyTorch 2.5.1 for ROCm 6.2 on MI250X GCDs."""
    gcd = rocm_props("AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", 68702699520, 110, 8 << 20)
    return fake_torch(
        version="2.5.1+rocm6.2",
        props=[gcd] * count,
        hip="6.2.41133-dd7f95766",
        cudnn=3002000,
        nccl=(2, 20, 5),
        config=ROCM_CONFIG,
    )


def mi300x_torch(count: int = 8) -> SimpleNamespace:
    """PyTorch 2.6.0 for ROCm 6.3 on MI300X."""
    return rocm_torch("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 205822885888, 304, count)


def mi300a_torch(xnack: bool, count: int = 4) -> SimpleNamespace:
    """PyTorch 2.6.0 for ROCm 6.3 on MI300A APUs, with XNACK on or off (gcnArchName says
    which is in effect); the GPU of an APU sees the memory the OS lends it."""
    feature = "xnack+" if xnack else "xnack-"
    gpu = rocm_props("AMD Instinct MI300A", f"gfx942:sramecc+:{feature}", 110 << 30, 228,
                     4 << 20, integrated=True)
    return fake_torch(
        version="2.6.0+rocm6.3",
        props=[gpu] * count,
        hip="6.3.42131-fa1d09cbd",
        cudnn=3003000,
        nccl=(2, 21, 5),
        config=ROCM_CONFIG,
    )


def rocm_torch(name: str, gcn_arch: str, memory: int, cus: int, count: int = 8
               ) -> SimpleNamespace:
    """PyTorch 2.6.0 for ROCm 6.3 on `count` GPUs that report these properties."""
    gpu = rocm_props(name, gcn_arch, memory, cus, 4 << 20)
    return fake_torch(
        version="2.6.0+rocm6.3",
        props=[gpu] * count,
        hip="6.3.42131-fa1d09cbd",
        cudnn=3003000,
        nccl=(2, 21, 5),
        config=ROCM_CONFIG,
    )


def h100_torch(count: int = 8) -> SimpleNamespace:
    """PyTorch 2.5.1 for CUDA 12.4 on H100 SXM5."""
    gpu = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        total_memory=85520809984,
        multi_processor_count=132,
        major=9,
        minor=0,
        L2_cache_size=50 << 20,
        is_integrated=False,
    )
    return fake_torch(
        version="2.5.1+cu124",
        props=[gpu] * count,
        cuda="12.4",
        cudnn=90100,
        nccl=(2, 21, 5),
        config=CUDA_CONFIG,
    )


def cpu_only_torch() -> SimpleNamespace:
    return fake_torch(version="2.5.1+cpu", props=[], config=CUDA_CONFIG)


def replay(node: str | None) -> vendor_tools.Runner:
    """A vendor-tool runner that answers from tests/fixtures/vendor/<node>/; a command with
    no recording there is a tool that is not installed."""

    def run(argv: Sequence[str], timeout: float) -> vendor_tools.ToolRun:
        name = _FIXTURE_FILES.get(tuple(argv))
        path = VENDOR_FIXTURES / node / name if node and name else None
        if path is None or not path.exists():
            return vendor_tools.ToolRun(problem=vendor_tools.MISSING)
        return vendor_tools.ToolRun(path.read_text(encoding="utf-8"))

    return run


def no_tools(argv: Sequence[str], timeout: float) -> vendor_tools.ToolRun:
    return vendor_tools.ToolRun(problem=vendor_tools.MISSING)


def answer(text: str | None) -> vendor_tools.ToolRun:
    """What a runner returns for a tool that printed `text` (None: it failed)."""
    if text is None:
        return vendor_tools.ToolRun(problem=vendor_tools.FAILED, detail="exit status 1")
    return vendor_tools.ToolRun(text)


@pytest.fixture
def fakes() -> SimpleNamespace:
    """The fakes above, for tests to build stacks from."""
    return SimpleNamespace(
        mi250x=mi250x_torch,
        mi300x=mi300x_torch,
        mi300a=mi300a_torch,
        rocm=rocm_torch,
        h100=h100_torch,
        cpu_only=cpu_only_torch,
        replay=replay,
        no_tools=no_tools,
        answer=answer,
        fixtures=VENDOR_FIXTURES,
        rocm_config=ROCM_CONFIG,
    )
