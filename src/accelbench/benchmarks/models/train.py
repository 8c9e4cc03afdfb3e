"""Training throughput of a whole model: samples/s, tokens/s, MFU, memory.

One timed call is a window of `steps_per_window` real training steps (forward, the
task's loss, backward, optimizer step) on a fixed synthetic batch; the device is
synchronised at the ends of the timing core's samples only, never inside a window.
Warm-up, repetitions and the noise target are the timing core's, as for every
benchmark. Before timing, the loss of the first steps must be finite; after timing,
the loss must still be finite.

`train` runs on one device, in the ordinary worker. `train-ddp` is the same measurement
on every rank of a torchrun job, the model wrapped in DistributedDataParallel: its
throughput is the aggregate (ranks x batch per rank x steps over the slowest rank's
time, as the timing core takes each sample from the slowest rank), stored once, by
rank 0. With a single rank it is skipped: that is `train`'s measurement.
"""

from __future__ import annotations

import time
from typing import Any

from accelbench.benchmarks.mathmode import math_mode, tf32_worker_env
from accelbench.benchmarks.models import MODEL_SOURCES, batchsize, checks, flops
from accelbench.benchmarks.models.memory import PeakMemory
from accelbench.benchmarks.models.params import (
    FIND_BATCH,
    TRAIN_PARAMS,
    TrainParams,
    model_params,
)
from accelbench.benchmarks.models.precision import MATH_OPS
from accelbench.benchmarks.models.results import PerStep, Work, model_result
from accelbench.benchmarks.models.trainer import Trainer
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped
from accelbench.core.registry import Benchmark

CHECK_STEPS = 2  # steps whose loss is read before timing
SUPERBENCH_MIN_STEPS = 10  # single steps timed even past the time budget
NEEDS_RANKS = ("data-parallel training needs at least 2 ranks; run with --nproc-per-node 2 "
               "or under torchrun (`train` measures one device)")


def measure(ctx: CaseContext, params: TrainParams) -> CaseResult:
    """Single-device training (in torchrun's rank mode each rank trains on its own)."""
    return _measure(ctx, params, data_parallel=False)


def measure_ddp(ctx: CaseContext, params: TrainParams) -> CaseResult:
    """Data-parallel training across the ranks of the job."""
    if ctx.dist is None or ctx.dist.world_size < 2:
        raise CaseSkipped(NEEDS_RANKS)
    return _measure(ctx, params, data_parallel=True)


def _measure(ctx: CaseContext, params: TrainParams, data_parallel: bool) -> CaseResult:
    import torch

    setup = checks.model_setup(
        ctx, params.model, params.config, params.dtype, params.batch, params.seq, params.image,
        cast=params.cast, channels_last=params.channels_last, compile=params.compile,
        h2d=params.h2d, head=params.head, optimizer=params.optimizer)
    device = torch.device(ctx.device.torch_device)
    checks.check_lstm_precision(torch, setup, device)
    rank = ctx.dist.rank if ctx.dist else 0
    world = ctx.dist.world_size if data_parallel and ctx.dist else 1
    meter = PeakMemory(torch, device)
    trainer: Trainer | None = None
    try:
        with math_mode(torch, setup.precision.tf32, MATH_OPS, ctx.device.platform) as mode:
            checks.check_math_mode(mode, setup.precision)
            trainer = checks.built(torch, setup.spec.name,
                                   lambda: Trainer(torch, setup, device, rank=rank))
            details: dict[str, Any] = mode.details(MATH_OPS)
            if params.find_batch:
                details.update(_find_batch(ctx, trainer, setup.batch))
                meter.reset()  # the search's tries are not the case's footprint
            trainer.wrap(data_parallel)
            result = _time_training(ctx, trainer, params.steps_per_window, world, meter,
                                    params.superbench_steps)
        result.details.update(details)
        return result
    finally:
        if trainer is not None:
            trainer.release()
        if setup.compile:
            torch._dynamo.reset()  # compiled graphs hold on to the model


def _find_batch(ctx: CaseContext, trainer: Trainer, start: int) -> dict[str, Any]:
    if trainer.device.type == "cuda":
        found = batchsize.find_on_device(trainer, start)
    else:
        ranks_here = ctx.dist.local_world_size if ctx.dist else 1
        found = batchsize.find_on_cpu(trainer, start, ranks_here)
    batch = checks.agree_min(ctx, found.batch) if ctx.dist else found.batch
    if batch < 1:
        raise CaseFailed("out of memory: not even a batch of 1 fits")
    trainer.set_batch(batch)
    return {"find_batch": {"batch": batch, "rule": found.rule,
                           "tried": [list(t) for t in found.tried]}}


def _time_training(
    ctx: CaseContext, trainer: Trainer, steps_per_window: int, world: int, meter: PeakMemory,
    superbench_steps: int = 0,
) -> CaseResult:
    torch, setup = trainer.torch, trainer.setup
    started = time.perf_counter()
    trainer.step()
    trainer.sync()
    first_step = time.perf_counter() - started
    check_times, losses = [], []
    for _ in range(CHECK_STEPS):
        started = time.perf_counter()
        losses.append(float(trainer.step()))
        check_times.append(time.perf_counter() - started)
    checks.check_finite(losses[0], "the training loss before timing")

    timing = ctx.time(lambda: trainer.steps(steps_per_window))
    per_step = None
    if superbench_steps:
        per_step = time_single_steps(ctx, trainer, superbench_steps, world)

    assert trainer.last_loss is not None  # set by every step
    last_loss = float(trainer.last_loss)
    checks.check_finite(last_loss, "the training loss after timing")
    peak_memory, memory_details = meter.peak()
    batch = trainer.setup.batch
    model_flops = flops.model_flops(torch, setup.spec, trainer.module, setup.seq, setup.image)
    samples = batch * steps_per_window * world
    work = flops_work(model_flops, trainer, samples, steps_per_window)
    peak = ctx.peak_flops(setup.precision.dtype)
    n_params = sum(p.numel() for p in trainer.module.parameters())
    details = {
        **checks.setup_details(trainer.setup, n_params),
        **memory_details,
        "mode": "train",
        "optimizer": type(trainer.optimizer).__name__
        + (" (fused)" if trainer.optimizer.defaults.get("fused") else "")
        + (" (Nesterov)" if trainer.optimizer.defaults.get("nesterov") else ""),
        "loss_scaling": trainer.scaler is not None,
        "loss_first": losses[0],
        "loss_last": last_loss,
        "model_flop_formula": model_flops.formula,
        "first_step_s": first_step,
        "step_times": "p50/p90/p99 of the seconds per step, one value per timed sample",
    }
    if world > 1:
        details.update(data_parallel="DistributedDataParallel", world_size=world,
                       batch_per_rank=batch, global_batch=batch * world,
                       throughput_scope="aggregate over ranks; each sample the slowest rank's",
                       step_time_scope="the slowest rank's")
        if per_step is not None:
            details["throughput_superbench_scope"] = (
                "aggregate over ranks, each step the slowest rank's; SuperBench reports "
                "one rank's: divide by world_size")
    compile_time = None
    if setup.compile:
        compile_time = max(0.0, first_step - min(check_times))
        details["compile_time"] = ("first step minus a steady step (synchronised); PyTorch's "
                                   "on-disk compile caches, when warm, shorten it")
    step_times = [s / steps_per_window for s in timing.samples]
    return model_result(
        timing, work, peak_flops=peak * world if peak else None, peak_memory=peak_memory,
        step_times=step_times, compile_time=compile_time, details=details,
        time_name="window_time", per_step=per_step,
    )


def time_single_steps(ctx: CaseContext, trainer: Trainer, steps: int, world: int) -> PerStep:
    """Up to `steps` single steps, each timed on its own (Trainer.timed_step), within the
    case's time budget; with several ranks each step's time is the slowest rank's."""
    seconds: list[float] = []
    started = time.perf_counter()
    least = min(steps, SUPERBENCH_MIN_STEPS)
    while True:
        seconds.append(ctx.coordinator.slowest(trainer.timed_step()))
        in_budget = time.perf_counter() - started < ctx.policy.max_time
        more = len(seconds) < steps and (len(seconds) < least or in_budget)
        if not ctx.coordinator.agree(int(more)):
            break
    stopped = "steps" if len(seconds) >= steps else "time budget"
    return PerStep(trainer.setup.batch * world, tuple(seconds), stopped)


def flops_work(model_flops: flops.ModelFlops, trainer: Trainer, samples: int,
               steps: int) -> Work:
    tokens = samples * trainer.setup.seq if trainer.setup.spec.is_language_model else 0
    return Work(samples=samples, tokens=tokens,
                flop=model_flops.per_step(samples, training=True), steps=steps)


_SUMMARY = ("Training throughput of a whole model (sample/s, token/s, MFU): forward, loss, "
            "backward, optimizer step")

BENCHMARK = Benchmark(
    name="train",
    family="models",
    summary=_SUMMARY,
    entry="accelbench.benchmarks.models.train:measure",
    params=(*model_params(batch=8), FIND_BATCH, *TRAIN_PARAMS),
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    sources=MODEL_SOURCES,
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.models.view:sections",),
    typed=TrainParams,
)

DDP_BENCHMARK = Benchmark(
    name="train-ddp",
    family="models",
    summary=_SUMMARY + "; DistributedDataParallel across the ranks of a torchrun job",
    entry="accelbench.benchmarks.models.train:measure_ddp",
    params=(*model_params(batch=8), FIND_BATCH, *TRAIN_PARAMS),
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    distributed=True,
    sources=MODEL_SOURCES,
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.models.view:sections",),
    typed=TrainParams,
)
