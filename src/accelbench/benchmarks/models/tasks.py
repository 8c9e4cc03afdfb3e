"""Synthetic batches and the loss each model's task really uses.

- masked-lm (BERT): 15% of the tokens replaced by the mask token and predicted
  (transformers' masked-LM head and loss).
- causal-lm (GPT-2, LLaMA): next-token prediction over the whole sequence
  (transformers' LM head and shifted cross-entropy).
- image-classification (CNNs, ViT) and sequence-classification (LSTM): cross-entropy
  over the classes.

Inputs are random and created on the device, so the input pipeline is not what is
measured; with `h2d` they stay in (pinned) host memory and every step copies them over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models.zoo import ModelSpec

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

MASK_FRACTION = 0.15


@dataclass
class Batch:
    tensors: dict[str, Tensor]  # model inputs and labels, on the device (or host with h2d)
    samples: int
    tokens: int  # tokens per batch for language models, else 0

    def fetcher(self, device: torch.device, h2d: bool) -> Callable[[], dict[str, Tensor]]:
        """What a step calls for its inputs: the resident batch, or a fresh copy of it."""
        if not h2d:
            return lambda: self.tensors
        tensors = self.tensors
        return lambda: {k: v.to(device, non_blocking=True) for k, v in tensors.items()}


def make_batch(
    torch: ModuleType,
    spec: ModelSpec,
    batch: int,
    seq: int,
    image: int,
    device: torch.device,
    float_dtype: torch.dtype,
    seed: int = 0,
    channels_last: bool = False,
    h2d: bool = False,
) -> Batch:
    """A fixed random batch for spec's task."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    s = spec.shape
    tensors: dict[str, Tensor]
    tokens = 0
    if spec.task in ("masked-lm", "causal-lm"):
        ids = torch.randint(0, s["vocab"], (batch, seq), generator=gen)
        tokens = batch * seq
        if spec.task == "causal-lm":
            tensors = {"input_ids": ids, "labels": ids.clone()}
        else:
            masked = torch.rand(batch, seq, generator=gen) < MASK_FRACTION
            masked[:, 0] = True  # at least one prediction per sequence
            labels = torch.where(masked, ids, torch.full_like(ids, -100))
            inputs = torch.where(masked, torch.full_like(ids, min(103, s["vocab"] - 1)), ids)
            tensors = {"input_ids": inputs, "labels": labels}
    elif spec.task == "sequence-classification":
        x = torch.randn(batch, seq, s["input"], generator=gen).to(float_dtype)
        tensors = {"x": x, "labels": torch.randint(0, s["classes"], (batch,), generator=gen)}
    else:
        x = torch.randn(batch, 3, image, image, generator=gen).to(float_dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        tensors = {"x": x, "labels": torch.randint(0, s["classes"], (batch,), generator=gen)}
    if h2d:
        if torch.device(device).type == "cuda":
            tensors = {k: v.pin_memory() for k, v in tensors.items()}
    else:
        tensors = {k: v.to(device) for k, v in tensors.items()}
    return Batch(tensors, batch, tokens)


def loss(torch: ModuleType, spec: ModelSpec, model: Callable[..., Any],
         inputs: dict[str, Tensor]) -> Tensor:
    """Forward pass and the task's loss (a scalar tensor; never synchronises)."""
    if spec.is_language_model:
        return model(input_ids=inputs["input_ids"], labels=inputs["labels"]).loss
    logits = model(inputs["x"])
    return torch.nn.functional.cross_entropy(logits, inputs["labels"])


def forward(spec: ModelSpec, model: Callable[..., Any], inputs: dict[str, Tensor]) -> Tensor:
    """The inference forward pass: logits for every position (LMs) or class scores."""
    if spec.is_language_model:
        return model(input_ids=inputs["input_ids"]).logits
    return model(inputs["x"])


def make_optimizer(torch: ModuleType, spec: ModelSpec, params: Iterable[nn.Parameter],
                   device_type: str, eps: float) -> torch.optim.Optimizer:
    """AdamW for the transformers, SGD with momentum for the CNNs and the LSTM.

    The fused implementations (CUDA, ROCm and CPU) take the gradient scaler's checks on
    the device, so an fp16 step never waits for the host. Tiny models get a larger
    learning rate, so that a few steps visibly lower the loss; speed does not depend on it.
    """
    params = list(params)
    if spec.arch in ("bert", "gpt2", "llama", "vit"):
        kind, settings = torch.optim.AdamW, {"lr": 1e-2 if spec.tiny else 1e-4, "eps": eps}
    else:
        kind, settings = torch.optim.SGD, {"lr": 0.1 if spec.tiny else 0.01, "momentum": 0.9,
                                           "weight_decay": 1e-4}
    if device_type in ("cuda", "cpu"):
        try:
            return kind(params, fused=True, **settings)
        except RuntimeError:  # no fused kernel for these parameters on this build
            pass
    return kind(params, **settings)
