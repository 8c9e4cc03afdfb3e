"""What a check needs to know about precisions: whether the device has one, the torch
dtype it stores, and the math mode actually in force while the check runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.core.dtypes import DTYPES, fp8_torch_name, unsupported_reason
from accelbench.core.measurement import CaseSkipped
from accelbench.env.device import DeviceInfo

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
    cuDNN/MIOpen convolutions alike), restored after; yields the switches as they are in
    force inside, so a check records the mode it actually ran in."""
    from accelbench.benchmarks.models.precision import Precision
    from accelbench.benchmarks.models.precision import math_mode as model_math_mode

    with model_math_mode(torch, Precision("tf32" if dtype == "tf32" else "fp32")):
        yield mode_in_force(torch)


def mode_in_force(torch: ModuleType) -> dict[str, Any]:
    """PyTorch's switches that decide how float32 and half-precision math is done."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    out: dict[str, Any] = {
        "matmul.allow_tf32": bool(matmul.allow_tf32),
        "cudnn.allow_tf32": bool(cudnn.allow_tf32),
        "float32_matmul_precision": str(torch.get_float32_matmul_precision()),
        "matmul.allow_fp16_reduced_precision_reduction":
            bool(matmul.allow_fp16_reduced_precision_reduction),
        "matmul.allow_bf16_reduced_precision_reduction":
            bool(matmul.allow_bf16_reduced_precision_reduction),
    }
    with contextlib.suppress(AttributeError, RuntimeError):
        out["matmul.fp32_precision"] = str(matmul.fp32_precision)
    return out
