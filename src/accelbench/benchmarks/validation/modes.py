"""What a check needs to know about precisions: whether the device has one, the torch
dtype it stores, and the math mode actually in force while the check runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.core.device import DeviceInfo
from accelbench.core.dtypes import DTYPES, fp8_torch_name, unsupported_reason
from accelbench.core.measurement import CaseSkipped

if TYPE_CHECKING:
    import torch


def require_precision(device: DeviceInfo, dtype: str) -> None:
    """Skip, with the reason, a precision this device does not offer."""
    reason = unsupported_reason(device, dtype)
    if reason:
        raise CaseSkipped(reason)


def storage(torch: ModuleType, device: DeviceInfo, dtype: str) -> torch.dtype:
    """The torch dtype a tensor of `dtype` is stored in (float32 for tf32)."""
    name = fp8_torch_name(device) if dtype == "fp8" else DTYPES[dtype].torch_name
    return getattr(torch, name)


@contextlib.contextmanager
def math_mode(torch: ModuleType, dtype: str) -> Iterator[dict[str, Any]]:
    """TF32 matrix math on for tf32 and off for every other precision (matmuls and
    cuDNN/MIOpen convolutions alike), restored after (benchmarks.mathmode, the one place
    that sets it); yields the mode as read back, so a check records the mode it actually
    ran in. A tf32 check whose TF32 is not in effect is skipped with the reason."""
    from accelbench.benchmarks.mathmode import math_mode as shared

    ops = ("matmul", "conv")
    platform = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    with shared(torch, dtype == "tf32", ops, platform) as mode:
        problem = mode.problem("matmul") if dtype == "tf32" else None
        if problem:
            raise CaseSkipped(problem)
        yield {**mode.details(ops), **reduced_precision(torch)}


def reduced_precision(torch: ModuleType) -> dict[str, Any]:
    """PyTorch's switches for reduced-precision reductions in half-precision matmuls."""
    matmul = torch.backends.cuda.matmul
    return {
        "matmul.allow_fp16_reduced_precision_reduction":
            bool(matmul.allow_fp16_reduced_precision_reduction),
        "matmul.allow_bf16_reduced_precision_reduction":
            bool(matmul.allow_bf16_reduced_precision_reduction),
    }
