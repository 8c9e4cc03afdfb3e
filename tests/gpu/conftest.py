"""Tests on a real GPU, CUDA or ROCm: `pytest -m gpu`.

They drive accelbench's real paths (the runner and its worker processes, the CLI, the
profiler) on the first GPU PyTorch sees, with small shapes and short timing budgets.
Where PyTorch sees no GPU, every test marked `gpu` is skipped when it is collected, with
the reason, before any of its fixtures runs; `torch.cuda.is_available()` answers for CUDA
and ROCm builds alike (ROCm GPUs are `cuda` devices in PyTorch).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from accelbench.core.device import DeviceInfo


def gpu_missing() -> str | None:
    """Why there is no GPU to test on, or None when there is one."""
    import torch

    if torch.cuda.is_available():
        return None
    build = ("ROCm" if torch.version.hip else "CUDA" if torch.version.cuda else "CPU-only")
    return (f"no GPU: torch.cuda.is_available() is False ({build} build of PyTorch "
            f"{torch.__version__}); these tests run with pytest -m gpu on a CUDA or ROCm GPU")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("gpu")]
    reason = gpu_missing() if marked else None
    if reason is not None:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))


@dataclass(frozen=True)
class Gpu:
    """The GPU under test, as accelbench's fingerprint describes it."""

    device: DeviceInfo
    count: int  # GPUs PyTorch sees

    @property
    def platform(self) -> str:
        return self.device.platform  # "cuda" or "rocm"


@pytest.fixture(scope="session")
def gpu() -> Gpu:
    from accelbench.env.fingerprint import collect

    fingerprint = collect("cuda")
    return Gpu(fingerprint.device, fingerprint.data["devices"]["count"])
