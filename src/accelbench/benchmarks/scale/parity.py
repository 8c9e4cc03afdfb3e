"""Correctness first: a parallel form must train as one device does.

The reference is the same model, from the same seed, trained on one device (each rank's
own, no communication) with the same optimizer on the same global batch, one optimizer
step on the whole batch per step. A parallel step's loss over the global batch (averaged
across the ranks that hold it) must equal the reference's at every checked step, within
TOLERANCE of it (relative): the first step checks the forward pass, the later ones that
the gradients and the update were those of the whole batch. fp32 differs only by the
order of floating-point sums (reductions across ranks, split matmuls); bf16 compute is
compared with bf16 autocast on one device, and rounds differently in each.

The reference also gives each rank's solo step time (`solo_seconds`): one step of the
rank's own share of the batch with no communication, comparable across ranks, from
which a slow rank or node is named when the scaling analysis asks what drags.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models import zoo
from accelbench.benchmarks.scale import forms
from accelbench.benchmarks.scale.details import LossParity
from accelbench.core.measurement import CaseFailed

if TYPE_CHECKING:
    import torch

TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2}
SOLO_STEPS = 3


@dataclass(frozen=True)
class Reference:
    losses: tuple[float, ...]
    solo_seconds: float  # median of SOLO_STEPS steps on this rank's share of the batch
    layers: int  # the reference model's blocks (fewer than the case's when shrunk)


def reference(torch: Any, spec: zoo.ModelSpec, the_plan: forms.Plan, dtype: str, seq: int,
              steps: int, device: torch.device) -> Reference:
    """The single-device losses of `steps` steps on the global batch, and the solo time."""
    model = forms.build_model(torch, spec, device)
    opt = forms.optimizer(torch, model.parameters())
    ids = forms.global_batch(torch, spec, the_plan.global_batch, seq, device)
    cast = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bf16"
            else contextlib.nullcontext())

    def step(batch: Any) -> float:
        with cast:
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())  # float() of a tensor in the graph makes PyTorch warn

    losses = tuple(step(ids) for _ in range(steps))
    share = ids[: max(1, the_plan.batch * the_plan.accumulate)]
    solo = []
    for _ in range(SOLO_STEPS):
        started = time.perf_counter()
        step(share)
        solo.append(time.perf_counter() - started)
    return Reference(losses, statistics.median(solo), spec.shape["layers"])


def check(parallel_losses: list[float], ref: Reference, dtype: str) -> dict[str, object]:
    """The comparison, as the case's details store it; CaseFailed when a step is off."""
    return compare(parallel_losses, ref, dtype).to_dict()


def compare(parallel_losses: list[float], ref: Reference, dtype: str) -> LossParity:
    """The comparison, for the case's details; CaseFailed when a step is off."""
    tolerance = TOLERANCE[dtype]
    worst = 0.0
    for step, (mine, theirs) in enumerate(zip(parallel_losses, ref.losses, strict=True), 1):
        if not (math.isfinite(mine) and math.isfinite(theirs)):
            raise CaseFailed(f"loss parity: step {step} loss {mine} vs single-device {theirs} "
                             f"(not finite)")
        difference = abs(mine - theirs) / max(abs(theirs), 1e-12)
        worst = max(worst, difference)
        if difference > tolerance:
            raise CaseFailed(
                f"loss parity: step {step} loss {mine:.7g} vs single-device {theirs:.7g} "
                f"(relative difference {difference:.2e} > {tolerance:g})")
    return LossParity(
        steps=len(ref.losses), losses=tuple(parallel_losses), reference_losses=ref.losses,
        worst_relative_difference=worst, tolerance=tolerance, reference_layers=ref.layers,
        rule="each checked step's loss over the global batch within the tolerance "
             "(relative) of a single-device step on the same data and seed")
