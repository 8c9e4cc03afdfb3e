"""Synthetic batches and the loss each model's task really uses.

- masked-lm (BERT): 15% of the tokens replaced by the mask token and predicted
  (transformers' masked-LM head and loss).
- causal-lm (GPT-2, LLaMA): next-token prediction over the whole sequence
  (transformers' LM head and shifted cross-entropy).
- image-classification (CNNs, ViT) and sequence-classification (LSTM): cross-entropy
  over the classes.
- denoising (Stable Diffusion's UNet): one denoising step: a noisy latent, a timestep
  and the text condition in, the predicted noise out; MSE against random noise.
- With SuperBench's head (`head="superbench"`), BERT, GPT-2 and LLaMA are classifiers
  instead: cross-entropy of their 100 class scores against random labels. Their token
  ids are drawn from [0, 128), as SuperBench's random data set draws them.

Inputs are random and created on the device, so the input pipeline is not what is
measured; with `h2d` they stay in (pinned) host memory and every step copies them over.
With SuperBench's head the labels stay on the device even then: SuperBench makes its
labels once, on the device, and copies only the inputs each step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models.zoo import (
    HEAD_SUPERBENCH,
    HEAD_TASK,
    SUPERBENCH_CLASSES,
    ModelSpec,
)

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

MASK_FRACTION = 0.15
SUPERBENCH_TOKEN_IDS = 128  # SuperBench's random integer data: torch.randint(0, 128, ...)


@dataclass
class Batch:
    tensors: dict[str, Tensor]  # model inputs and labels, on the device (or host with h2d)
    samples: int
    tokens: int  # tokens per batch for language models, else 0
    resident: frozenset[str] = frozenset()  # on the device even with h2d

    def fetcher(self, device: torch.device, h2d: bool) -> Callable[[], dict[str, Tensor]]:
        """What a step calls for its inputs: the resident batch, or a fresh copy of it."""
        if not h2d:
            return lambda: self.tensors
        tensors, resident = self.tensors, self.resident
        return lambda: {k: v if k in resident else v.to(device, non_blocking=True)
                        for k, v in tensors.items()}


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
    head: str = HEAD_TASK,
) -> Batch:
    """A fixed random batch for spec's task (or SuperBench's classification)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    s = spec.shape
    tensors: dict[str, Tensor]
    tokens = 0
    if spec.classifies_with(head):
        ids = torch.randint(0, min(SUPERBENCH_TOKEN_IDS, s["vocab"]), (batch, seq),
                            generator=gen)
        tokens = batch * seq
        tensors = {"input_ids": ids,
                   "labels": torch.randint(0, SUPERBENCH_CLASSES, (batch,), generator=gen)}
    elif spec.task in ("masked-lm", "causal-lm"):
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
    elif spec.task == "denoising":
        latent, shape = s["latent"], (batch, 4, s["latent"], s["latent"])
        tensors = {
            "sample": torch.randn(*shape, generator=gen).to(float_dtype),
            "timestep": torch.randint(0, 1000, (batch,), generator=gen).to(float_dtype),
            "encoder_hidden_states": torch.randn(batch, s["context_len"], s["context"],
                                                 generator=gen).to(float_dtype),
            "labels": torch.randn(batch, 4, latent, latent, generator=gen).to(float_dtype),
        }
    elif spec.task == "sequence-classification":
        x = torch.randn(batch, seq, s["input"], generator=gen).to(float_dtype)
        tensors = {"x": x, "labels": torch.randint(0, s["classes"], (batch,), generator=gen)}
    else:
        x = torch.randn(batch, 3, image, image, generator=gen).to(float_dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        tensors = {"x": x, "labels": torch.randint(0, s["classes"], (batch,), generator=gen)}
    resident = frozenset({"labels"}) if head == HEAD_SUPERBENCH else frozenset()
    if h2d:
        if torch.device(device).type == "cuda":
            tensors = {k: v.to(device) if k in resident else v.pin_memory()
                       for k, v in tensors.items()}
    else:
        tensors = {k: v.to(device) for k, v in tensors.items()}
    return Batch(tensors, batch, tokens, resident)


def loss(torch: ModuleType, spec: ModelSpec, model: Callable[..., Any],
         inputs: dict[str, Tensor], head: str = HEAD_TASK) -> Tensor:
    """Forward pass and the loss (a scalar tensor; never synchronises)."""
    if spec.classifies_with(head):
        scores = model(inputs["input_ids"])
    elif spec.is_language_model:
        return model(input_ids=inputs["input_ids"], labels=inputs["labels"]).loss
    elif spec.is_unet:
        predicted = forward(spec, model, inputs)
        return torch.nn.functional.mse_loss(predicted.float(), inputs["labels"].float())
    else:
        scores = model(inputs["x"])
    return torch.nn.functional.cross_entropy(scores, inputs["labels"])


def forward(spec: ModelSpec, model: Callable[..., Any], inputs: dict[str, Tensor]) -> Tensor:
    """The inference forward pass: logits for every position (LMs) or class scores."""
    if spec.is_language_model:
        return model(input_ids=inputs["input_ids"]).logits
    if spec.is_unet:
        return model(*(inputs[name] for name in input_names(spec))).sample
    return model(inputs["x"])


def input_names(spec: ModelSpec) -> tuple[str, ...]:
    """The model inputs of a batch, in the order its forward pass takes them."""
    if spec.is_language_model:
        return ("input_ids",)
    if spec.is_unet:
        return ("sample", "timestep", "encoder_hidden_states")
    return ("x",)


OPTIMIZER_FUSED, OPTIMIZER_SUPERBENCH = "", "superbench"  # "": fused where available
OPTIMIZERS = (OPTIMIZER_FUSED, OPTIMIZER_SUPERBENCH)


def make_optimizer(torch: ModuleType, spec: ModelSpec, params: Iterable[nn.Parameter],
                   device_type: str, eps: float,
                   recipe: str = OPTIMIZER_FUSED) -> torch.optim.Optimizer:
    """AdamW for the transformers, SGD with momentum for the CNNs and the LSTM.

    "" (default): the fused implementations (CUDA, ROCm and CPU) where the build has them;
    they take the gradient scaler's checks on the device, so an fp16 step never waits
    for the host. "superbench": SuperBench's settings, in PyTorch's default
    implementation (not fused): AdamW with lr 1e-5 and betas (0.9, 0.999); SGD with lr
    1e-5, momentum 0.9, weight decay 1e-4 and Nesterov momentum. Tiny models get a larger
    learning rate, so that a few steps visibly lower the loss; speed does not depend on it.
    """
    params = list(params)
    superbench = recipe == OPTIMIZER_SUPERBENCH
    if spec.arch in ("bert", "gpt2", "llama", "vit"):
        lr = 1e-2 if spec.tiny else (1e-5 if superbench else 1e-4)
        kind: Any = torch.optim.AdamW
        settings: dict[str, Any] = {"lr": lr, "eps": eps}
        if superbench:
            settings["betas"] = (0.9, 0.999)
    else:
        lr = 0.1 if spec.tiny else (1e-5 if superbench else 0.01)
        kind, settings = torch.optim.SGD, {"lr": lr, "momentum": 0.9, "weight_decay": 1e-4}
        if superbench:
            settings["nesterov"] = True
    if superbench:
        return kind(params, **settings)
    if device_type in ("cuda", "cpu"):
        try:
            return kind(params, fused=True, **settings)
        except (RuntimeError, TypeError):  # no fused kernel for these parameters here
            pass
    return kind(params, **settings)
