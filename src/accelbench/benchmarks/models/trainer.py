"""One model set up for training on one device: the step that the benchmark times.

A step is forward, the task's loss, backward and the optimizer step, with the gradient
scaler for fp16 autocast (and, with `h2d`, the copy of the batch to the device first).
Nothing in a step waits for the device (no `.item()`, no synchronisation), so
back-to-back steps queue up as they would in a real training loop; `timed_step` is the
exception, a step timed on its own as SuperBench times its steps. With data parallelism
the model is wrapped in DistributedDataParallel, which averages the gradients across
ranks during backward.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models import tasks, zoo
from accelbench.benchmarks.models.precision import Precision

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn
    from torch import device as TorchDevice


@dataclass(frozen=True)
class ModelSetup:
    """Everything that decides what one training or inference step computes."""

    spec: zoo.ModelSpec
    precision: Precision
    batch: int
    seq: int = 128
    image: int = 224
    channels_last: bool = False
    compile: bool = False
    h2d: bool = False
    seed: int = 0
    head: str = zoo.HEAD_TASK  # the task's own head, or SuperBench's classifier
    optimizer: str = tasks.OPTIMIZER_FUSED  # the optimizer's implementation and settings

    def with_batch(self, batch: int) -> ModelSetup:
        return replace(self, batch=batch)


def build_model(torch: ModuleType, setup: ModelSetup, device: torch.device) -> nn.Module:
    """The model on device, initialised from a fixed seed, in setup's precision and layout."""
    torch.manual_seed(setup.seed)
    with torch.device(device):
        model = zoo.build(setup.spec, setup.image, setup.head)
    model = setup.precision.prepare(torch, model)
    if setup.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def adam_eps(precision: Precision) -> float:
    """AdamW's epsilon: 1e-8 underflows to zero in float16, so fp16 casts get 1e-6."""
    return 1e-6 if precision.cast and precision.dtype == "fp16" else 1e-8


class Trainer:
    """A model, its optimizer and a fixed batch; `step()` trains on the batch once."""

    def __init__(self, torch: ModuleType, setup: ModelSetup, device: torch.device | str,
                 rank: int = 0) -> None:
        self.torch = torch
        self.setup = setup
        self.device: TorchDevice = torch.device(device)
        device_type = self.device.type
        model = build_model(torch, setup, self.device)
        model.train()
        self.module = model  # unwrapped: for counting and for the batch-size search
        self.model: Callable[..., Any] = model  # what a step calls: see wrap()
        self.optimizer = tasks.make_optimizer(torch, setup.spec, model.parameters(),
                                              device_type, adam_eps(setup.precision),
                                              setup.optimizer)
        self.scaler = setup.precision.scaler(torch, device_type)
        self.autocast: Callable[[], AbstractContextManager[object]] = (
            lambda: setup.precision.autocast(torch, device_type))
        self.rank = rank
        self.batch: tasks.Batch | None = None
        self._inputs: Callable[[], dict[str, Tensor]]
        self.set_batch(setup.batch)
        self.last_loss: Tensor | None = None

    def wrap(self, data_parallel: bool = False) -> None:
        """Wrap the model for the timed steps: DistributedDataParallel, then torch.compile.

        Done after any batch-size search, which must run on the bare model.
        """
        model: Callable[..., Any] = self.module
        if data_parallel:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index or 0] if self.device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids)
        if self.setup.compile:
            model = self.torch.compile(model)
        self.model = model

    def step(self) -> Tensor:
        """One training step; returns the loss tensor (not synchronised)."""
        self.last_loss = loss = self._train_on(self.model, self._inputs())
        return loss

    def timed_step(self) -> float:
        """Seconds of one step timed as SuperBench times its steps: the device synchronised
        and the host clock read before the step, and again after it (batch copy included
        with `h2d`). Synchronises: for the per-step figure, never inside a timed window."""
        self.sync()
        started = time.perf_counter()
        self.step()
        self.sync()
        return time.perf_counter() - started

    def _train_on(self, model: Callable[..., Any], inputs: dict[str, Tensor]) -> Tensor:
        with self.autocast():
            loss = tasks.loss(self.torch, self.setup.spec, model, inputs, self.setup.head)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def set_batch(self, batch: int) -> None:
        """Train on a fresh batch of `batch` samples from now on."""
        self.setup = self.setup.with_batch(batch)
        # Drops the previous batch before the next one is made.
        self.batch = self._inputs = None  # type: ignore[assignment]
        self.batch = tasks.make_batch(
            self.torch, self.setup.spec, batch, self.setup.seq, self.setup.image, self.device,
            self.setup.precision.storage_dtype(self.torch), seed=1000 + self.rank,
            channels_last=self.setup.channels_last, h2d=self.setup.h2d, head=self.setup.head,
        )
        self._inputs = self.batch.fetcher(self.device, self.setup.h2d)

    def fits(self, batch: int, steps: int = 2) -> bool:
        """Whether `steps` steps at `batch` samples run without running out of memory.

        Runs on the unwrapped, uncompiled model with no collectives, so that one rank
        running out of memory cannot leave the others waiting. The second step
        allocates the optimizer's state, so the probe sees a step's full footprint.
        """
        torch = self.torch
        probe: tasks.Batch | None
        try:
            probe = tasks.make_batch(
                torch, self.setup.spec, batch, self.setup.seq, self.setup.image, self.device,
                self.setup.precision.storage_dtype(torch), seed=2000 + self.rank,
                channels_last=self.setup.channels_last, head=self.setup.head,
            )
            for _ in range(steps):
                self._train_on(self.module, probe.tensors)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            ok = True
        except torch.cuda.OutOfMemoryError:  # torch.OutOfMemoryError from torch 2.5 on
            ok = False
        probe = None  # frees the probe batch before the next try
        self.optimizer.zero_grad(set_to_none=True)
        if not ok:
            # A step cut short may leave the scaler mid-step; start it afresh.
            self.scaler = self.setup.precision.scaler(torch, self.device.type)
            free_cached(torch, self.device)
        return ok

    def steps(self, count: int) -> None:
        """`count` steps back to back: one timed window."""
        for _ in range(count):
            self.step()

    def losses(self, count: int) -> list[float]:
        """`count` steps, reading each loss (synchronises: for checks, never timed)."""
        return [float(self.step()) for _ in range(count)]

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def release(self) -> None:
        """Drop every reference to device memory, so that it can be given back."""
        # The trainer is not used after this, so its fields may break their types.
        self.model = self.module = self.optimizer = self.scaler = None  # type: ignore[assignment]
        self.batch = self._inputs = self.last_loss = None  # type: ignore[assignment]


def free_cached(torch: ModuleType, device: torch.device | str) -> None:
    """Collect garbage and give cached device memory back (after an out-of-memory error)."""
    import gc

    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
