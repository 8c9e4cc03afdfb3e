"""How a model runs in a precision: autocast, loss scaling, whole-model casts, TF32.

- fp32: float32 everywhere; TF32 is switched off for matmuls, convolutions and RNNs.
- tf32: float32 storage, TF32 matrix math (matmuls, cuDNN convolutions and RNNs).
- fp16: autocast to float16 with a gradient scaler (the standard mixed-precision recipe).
- bf16: autocast to bfloat16; no scaler is needed.
- cast (fp16 or bf16 only): the whole model and its inputs are cast to the half type,
  with no autocast and no loss scaling, as SuperBench's model benchmarks do. Batch norm
  stays in float32, as there. Results are labelled so, to line up with charts made
  that way; it is not the recipe anyone trains with.

The float32 math mode of every precision (TF32 on for tf32 only) is set and read back
through benchmarks.mathmode, for the operations in MATH_OPS.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from accelbench.core.device import DeviceInfo
from accelbench.core.dtypes import DTYPES, unsupported_reason

if TYPE_CHECKING:
    import torch
    from torch import nn

MODEL_DTYPES = ("fp32", "tf32", "fp16", "bf16")
HALF = ("fp16", "bf16")
MATH_OPS = ("matmul", "conv", "rnn")  # what a whole model's float32 math mode covers


@dataclass(frozen=True)
class Precision:
    dtype: str  # one of MODEL_DTYPES
    cast: bool = False

    def problem(self, device: DeviceInfo) -> str | None:
        """Why this precision cannot run on device, or None."""
        return unsupported_reason(device, self.dtype)

    @property
    def applies(self) -> bool:
        return not self.cast or self.dtype in HALF

    @property
    def label(self) -> str:
        if self.cast:
            return f"{self.dtype} whole-model cast (SuperBench-style: no autocast, no loss scaling)"
        return {
            "fp32": "fp32 (TF32 off)",
            "tf32": "fp32 storage, TF32 matrix math",
            "fp16": "fp16 autocast with gradient scaling",
            "bf16": "bf16 autocast",
        }[self.dtype]

    @property
    def tf32(self) -> bool:
        """Whether float32 matrix math may run as TF32 (tf32 only; off for the others)."""
        return self.dtype == "tf32"

    @property
    def uses_autocast(self) -> bool:
        return self.dtype in HALF and not self.cast

    @property
    def uses_scaler(self) -> bool:
        return self.dtype == "fp16" and not self.cast

    def torch_dtype(self, torch: ModuleType) -> torch.dtype:
        return getattr(torch, DTYPES[self.dtype].torch_name)

    def storage_dtype(self, torch: ModuleType) -> torch.dtype:
        """The dtype of parameters and float inputs."""
        return self.torch_dtype(torch) if self.cast else torch.float32

    def autocast(self, torch: ModuleType, device_type: str
                 ) -> contextlib.AbstractContextManager[object]:
        if not self.uses_autocast:
            return contextlib.nullcontext()
        return torch.autocast(device_type, dtype=self.torch_dtype(torch))

    def scaler(self, torch: ModuleType, device_type: str) -> torch.amp.GradScaler | None:
        return torch.amp.GradScaler(device_type) if self.uses_scaler else None

    def prepare(self, torch: ModuleType, model: nn.Module) -> nn.Module:
        """Cast the model for `cast` mode (batch norm kept in float32); else unchanged."""
        if not self.cast:
            return model
        model = model.to(dtype=self.torch_dtype(torch))
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.float()
        return model
