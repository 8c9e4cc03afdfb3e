"""The model as engines take it: the batch's tensors in, in order, one tensor out.

Exporters (TorchScript's tracer, torch.onnx, torch.export) need plain tensors in and out,
not transformers' output objects or a dict of inputs. Imports torch: worker side only.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from accelbench.benchmarks.models import tasks
from accelbench.benchmarks.models.zoo import ModelSpec


class TensorModule(nn.Module):
    """spec's inference forward pass (tasks.forward) over positional tensors."""

    def __init__(self, spec: ModelSpec, model: nn.Module) -> None:
        super().__init__()
        self.spec = spec
        self.names = tasks.input_names(spec)
        self.model = model

    def forward(self, *tensors: Tensor) -> Tensor:
        out: Tensor = tasks.forward(self.spec, self.model, dict(zip(self.names, tensors,
                                                                    strict=True)))
        return out

    def per_sequence_modules(self) -> Any:  # keeps flops' per-sequence count of the model
        return getattr(self.model, "per_sequence_modules", tuple)()
