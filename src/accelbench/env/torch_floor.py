"""The oldest PyTorch accelbench runs on: the one its CI tests beside the pinned one.

Older releases lack what the benchmarks call (torch._scaled_mm with positional scales,
torch.nn.attention.sdpa_kernel, torch.amp.GradScaler(device), fused SGD and AdamW):
rather than cases failing one by one with an AttributeError, a run stops at start-up
with one line.
"""

from __future__ import annotations

import re

from accelbench.errors import EXIT_DEVICE, UserError

TORCH_FLOOR = (2, 9)

_RELEASE = re.compile(r"^\s*(\d+)\.(\d+)")


def unsupported_torch(version: str | None) -> str | None:
    """Why PyTorch `version` ("2.5.1+rocm6.2") cannot run accelbench, or None."""
    floor = ".".join(map(str, TORCH_FLOOR))
    match = _RELEASE.match(version or "")
    if match is None:
        return None if version is None else (
            f"cannot tell the PyTorch release from its version {version!r}; "
            f"accelbench needs PyTorch {floor} or newer")
    if (int(match[1]), int(match[2])) >= TORCH_FLOOR:
        return None
    return (f"PyTorch {version} is older than accelbench supports: install PyTorch {floor} "
            "or newer (the ROCm or CUDA build for this machine)")


def require_supported_torch(version: str | None = None) -> None:
    """Raise a one-line UserError when the PyTorch here (or `version`) is too old."""
    if version is None:
        import torch

        version = str(torch.__version__)
    reason = unsupported_torch(version)
    if reason:
        raise UserError(reason, EXIT_DEVICE)
