"""Inference of a whole model: throughput, and latency percentiles per batch.

The model runs in eval mode under `torch.inference_mode`, in the case's precision
(autocast, or a whole-model cast). Throughput comes from the timing core: windows of
`steps_per_window` forward passes back to back, synchronised only at the ends of its
samples. Latency is measured apart, afterwards: single forward passes, each timed by
the device clock on its own (synchronised), for about half the case's time budget;
p50/p90/p99 are over those. For language models a forward pass is the whole sequence
(prefill), not token-by-token generation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.mathmode import math_mode, tf32_worker_env
from accelbench.benchmarks.models import MODEL_SOURCES, checks, flops, tasks
from accelbench.benchmarks.models.memory import PeakMemory
from accelbench.benchmarks.models.params import ModelParams, model_params
from accelbench.benchmarks.models.precision import MATH_OPS
from accelbench.benchmarks.models.results import Work, model_result
from accelbench.benchmarks.models.trainer import build_model
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor

LATENCY_MIN_CALLS = 10
LATENCY_MAX_CALLS = 1000


def measure(ctx: CaseContext, params: ModelParams) -> CaseResult:
    import torch

    setup = checks.model_setup(
        ctx, params.model, params.config, params.dtype, params.batch, params.seq, params.image,
        cast=params.cast, channels_last=params.channels_last, compile=params.compile,
        h2d=params.h2d)
    device = torch.device(ctx.device.torch_device)
    checks.check_lstm_precision(torch, setup, device)
    spec, precision = setup.spec, setup.precision
    meter = PeakMemory(torch, device)
    try:
        with math_mode(torch, precision.tf32, MATH_OPS, ctx.device.platform) as mode, \
                torch.inference_mode():
            checks.check_math_mode(mode, precision)
            model = checks.built(torch, spec.name,
                                 lambda: build_model(torch, setup, device).eval())
            n_params = sum(p.numel() for p in model.parameters())
            model_flops = flops.model_flops(torch, spec, model, setup.seq, setup.image)
            runner = torch.compile(model) if setup.compile else model
            batch = tasks.make_batch(torch, spec, setup.batch, setup.seq, setup.image, device,
                                     precision.storage_dtype(torch), seed=1000,
                                     channels_last=setup.channels_last, h2d=setup.h2d)
            inputs = batch.fetcher(device, setup.h2d)
            autocast = precision.autocast(torch, device.type)

            def forward() -> Tensor:
                with autocast:
                    return tasks.forward(spec, runner, inputs())

            started = time.perf_counter()
            out = forward()
            if not bool(torch.isfinite(out).all()):
                raise CaseFailed("wrong result: the model's output is not finite")
            first_call = time.perf_counter() - started
            started = time.perf_counter()
            forward()
            sync(torch, device)
            steady = time.perf_counter() - started
            del out

            steps = params.steps_per_window

            def window() -> None:
                for _ in range(steps):
                    forward()

            timing = ctx.time(window)
            latencies = latency_samples(ctx, forward)
        peak_memory, memory_details = meter.peak()
    finally:
        model = runner = batch = inputs = None  # type: ignore[assignment]  # give the memory back
        if setup.compile:
            torch._dynamo.reset()

    samples = setup.batch * steps
    tokens = samples * setup.seq if spec.is_language_model else 0
    work = Work(samples, tokens, model_flops.per_step(samples, training=False), steps)
    details = {
        **checks.setup_details(setup, n_params),
        **memory_details,
        "mode": "inference",
        "model_flop_formula": model_flops.formula.replace("; training 3x", ""),
        "latency": f"p50/p90/p99 over {len(latencies)} single synchronised forward passes",
        "first_call_s": first_call,
        **mode.details(MATH_OPS),
    }
    compile_time = None
    if setup.compile:
        compile_time = max(0.0, first_call - steady)
        details["compile_time"] = ("first call minus a steady call (synchronised); PyTorch's "
                                   "on-disk compile caches, when warm, shorten it")
    return model_result(
        timing, work, peak_flops=ctx.peak_flops(precision.dtype), peak_memory=peak_memory,
        step_times=latencies, compile_time=compile_time, details=details,
        time_name="window_time",
    )


def latency_samples(ctx: CaseContext, forward: Callable[[], Any]) -> list[float]:
    """Seconds of single forward passes, each timed alone by the device clock."""
    budget = ctx.policy.max_time / 2
    out: list[float] = []
    start = ctx.clock.now()
    while len(out) < LATENCY_MAX_CALLS and (
        len(out) < LATENCY_MIN_CALLS or ctx.clock.now() - start < budget
    ):
        out.append(ctx.clock.time(forward, 1))
    return out


def sync(torch: ModuleType, device: torch.device) -> None:
    """Wait for the device (a GPU's queued work); nothing to wait for on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


BENCHMARK = Benchmark(
    name="infer",
    family="models",
    summary="Inference of a whole model: throughput and p50/p90/p99 latency per batch",
    entry="accelbench.benchmarks.models.infer:measure",
    params=model_params(batch=1),
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    sources=MODEL_SOURCES,
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.models.view:sections",),
    typed=ModelParams,
)
