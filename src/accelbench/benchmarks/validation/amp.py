"""Mixed-precision training: autocast with a GradScaler (fp16) and bf16 autocast train a
small model on a fixed synthetic task as well as fp32 does.

The task: 512 seeded standard-normal points in 32 dimensions, each labelled with the
class a fixed random linear teacher scores highest (8 classes); a 32-64-64-8 MLP trains
on all of them with Adam (lr 0.01) for `steps` steps, from the same initial weights in
fp32 (TF32 off) and in the precision checked. It passes when:

- its last loss is at most LOSS_THRESHOLD of its first (the task is learnt);
- its loss curve stays within the stated distance of the fp32 curve at every step, as a
  share of the first loss: DISTANCE per precision (fp16 keeps 10 mantissa bits, bf16 7);
- every loss is finite;
- fp16 only: a scaler given a gradient with an infinite element skips that step (the
  weights stay bit-identical) and halves its scale (its backoff factor), as
  GradScaler.step promises; the scaler's inf check is a device kernel of its own.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.validation.modes import math_mode, require_precision
from accelbench.benchmarks.validation.verdict import TOLERANCE_SCALE, Verdict, conclude
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

AMP_DTYPES = ("fp16", "bf16")
SAMPLES, FEATURES, HIDDEN, CLASSES = 512, 32, 64, 8
LEARNING_RATE = 0.01
LOSS_THRESHOLD = 0.05  # the last loss, as a share of the first
DISTANCE = {"fp16": 0.02, "bf16": 0.05}  # from the fp32 curve, as a share of the first loss


@dataclass(frozen=True)
class AmpParams:
    """The parameters of an amp case (`BENCHMARK.params`)."""

    dtype: str
    steps: int
    tolerance_scale: float


def measure(ctx: CaseContext, params: AmpParams) -> CaseResult:
    dtype, steps = params.dtype, params.steps
    require_precision(ctx.device, dtype)
    import torch

    device = torch.device(ctx.device.torch_device)
    x, y, model = _task(torch, device)
    with math_mode(torch, "fp32") as mode:
        reference = train(torch, copy.deepcopy(model), x, y, steps, None, device)
        curve = train(torch, copy.deepcopy(model), x, y, steps, dtype, device)
        skip = overflow_skipped(torch, copy.deepcopy(model), x, y, device) \
            if dtype == "fp16" else None
    limit = DISTANCE[dtype] * params.tolerance_scale
    start = reference[0]
    distance = max(abs(a - b) for a, b in zip(curve, reference, strict=True)) / start
    threshold = LOSS_THRESHOLD * curve[0]
    problems = []
    if not all(math.isfinite(v) for v in curve):
        problems.append(f"the {dtype} loss became non-finite at step "
                        f"{next(i for i, v in enumerate(curve) if not math.isfinite(v))}")
    else:
        if curve[-1] > threshold:
            problems.append(f"the {dtype} loss is {curve[-1]:.4g} after {steps} steps, above "
                            f"the threshold {threshold:.4g} ({LOSS_THRESHOLD:g} of its first)")
        if not distance <= limit:
            problems.append(f"the {dtype} loss curve is {distance:.3g} of the first loss "
                            f"away from the fp32 curve, beyond {limit:.3g}")
    if skip is not None:
        problems += skip
    verdict = Verdict(
        distance if math.isfinite(distance) else None, limit, "",
        f"{'autocast + GradScaler' if dtype == 'fp16' else 'autocast'} {dtype}: "
        + "; ".join(problems) if problems else None,
        extra=(Figure("final_loss", curve[-1], "", higher_is_better=False),
               Figure("loss_threshold", threshold, "", higher_is_better=False),
               Figure("fp32_final_loss", reference[-1], "", higher_is_better=False)),
    )
    return conclude(verdict, {
        "recipe": "autocast + GradScaler" if dtype == "fp16" else "autocast (no scaler)",
        "task": f"{SAMPLES} points, {FEATURES} features, {CLASSES} classes of a linear "
                f"teacher; MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}, Adam lr "
                f"{LEARNING_RATE}, full batch",
        "steps": steps,
        "distance": "largest |loss - fp32 loss| over the steps, over the first fp32 loss",
        "loss_curve": curve,
        "fp32_loss_curve": reference,
        "overflow_step_skipped": None if skip is None else not skip,
        "math_mode": mode,
    })


def _task(torch: ModuleType, device: torch.device) -> tuple[Tensor, Tensor, nn.Module]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=generator)
    teacher = torch.randn(FEATURES, CLASSES, generator=generator)
    y = (x @ teacher).argmax(-1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, CLASSES))
    return x.to(device), y.to(device), model.to(device)


def train(torch: ModuleType, model: nn.Module, x: Tensor, y: Tensor, steps: int,
          dtype: str | None, device: torch.device) -> list[float]:
    """The loss before each of `steps` steps: fp32 when `dtype` is None, else autocast
    (with a GradScaler for fp16)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    scaler = torch.amp.GradScaler(device.type) if dtype == "fp16" else None
    cast = _autocast(torch, device, dtype)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with cast():
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        losses.append(float(loss.detach()))
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
    return losses


def overflow_skipped(torch: ModuleType, model: nn.Module, x: Tensor, y: Tensor,
                     device: torch.device) -> list[str]:
    """What is wrong with a GradScaler step whose gradients hold an inf: it must leave
    the weights as they were and halve the scale. Empty when it did both."""
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    scaler = torch.amp.GradScaler(device.type)
    with _autocast(torch, device, "fp16")():
        loss = torch.nn.functional.cross_entropy(model(x).float(), y)
    scaler.scale(loss).backward()
    first = next(iter(model.parameters()))
    assert first.grad is not None
    first.grad.view(-1)[0] = float("inf")
    before = [p.detach().clone() for p in model.parameters()]
    scale = float(scaler.get_scale())
    scaler.step(optimizer)
    scaler.update()
    problems = []
    changed = sum(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters(),
                                                                  strict=True))
    if changed:
        problems.append(f"GradScaler stepped despite an infinite gradient: {changed} of "
                        f"{len(before)} weight tensors changed")
    backoff = scaler.get_backoff_factor()
    if float(scaler.get_scale()) != scale * backoff:
        problems.append(f"GradScaler's scale went from {scale:g} to {scaler.get_scale():g} "
                        f"after an overflow, not to {scale * backoff:g}")
    return problems


def _autocast(torch: ModuleType, device: torch.device, dtype: str | None
              ) -> Callable[[], Any]:
    import contextlib

    if dtype is None:
        return contextlib.nullcontext
    kind = torch.float16 if dtype == "fp16" else torch.bfloat16
    return lambda: torch.autocast(device.type, dtype=kind)


BENCHMARK = Benchmark(
    name="amp",
    family="validation",
    summary="Mixed-precision training (autocast + GradScaler fp16, autocast bf16) reaches "
    "the loss threshold and follows the fp32 curve; an overflowing step is skipped",
    entry="accelbench.benchmarks.validation.amp:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes"),
    params=(
        Param("dtype", "str", "fp16", help="the autocast precision", choices=AMP_DTYPES),
        Param("steps", "int", 60, help="training steps, the same for fp32", minimum=5,
              maximum=10_000, quiet_default=True),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=AmpParams,
)
