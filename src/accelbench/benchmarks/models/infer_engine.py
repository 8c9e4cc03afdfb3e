"""Inference through an engine: eager, torch.compile, TorchScript, ONNX Runtime or int8.

One case is one model, precision, batch and engine. Before anything is timed, the
engine's output on the case's seeded batch is compared with eager fp32's on the same
device (engines.parity): an engine out of tolerance fails the case with the figures as
its reason, and is never timed. Then, as `infer` does: throughput from back-to-back
windows of `steps_per_window` calls, p50/p90/p99 from single synchronised calls. The
time to make the engine ready (compile, trace and freeze, export and session,
quantisation) is `compile_time`, apart from the steady state. The speed-up over eager,
with its interval, is derived from the eager case of the same run when read
(analysis.engines).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models import MODEL_SOURCES, checks, engines, flops, tasks
from accelbench.benchmarks.models.engines import parity
from accelbench.benchmarks.models.engines.onnxrt import PROVIDER_NAMES, provider_problem
from accelbench.benchmarks.models.infer import latency_samples
from accelbench.benchmarks.models.memory import PeakMemory
from accelbench.benchmarks.models.params import model_params
from accelbench.benchmarks.models.precision import Precision, math_mode
from accelbench.benchmarks.models.results import Work, model_result
from accelbench.benchmarks.models.trainer import build_model
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark
from accelbench.core.timing import Timing

if TYPE_CHECKING:
    import torch
    from torch import Tensor

# What `infer` has that engines do not take: a whole-model cast is what the graph
# engines do for fp16/bf16 anyway, and torch.compile is an engine here.
_SHARED = ("model", "dtype", "batch", "seq", "image", "steps_per_window", "config")
CLASSIFIER_TASKS = ("masked-lm", "causal-lm", "image-classification",
                    "sequence-classification")

ENGINE_PARAMS = (
    Param("engine", "str", engines.EAGER, help="eager, compile, compile-max-autotune, "
          "torchscript, onnxruntime or int8", choices=engines.ENGINE_NAMES),
    Param("provider", "str", "", help="ONNX Runtime execution provider: cpu, cuda, "
          "tensorrt, rocm, migraphx, dnnl, openvino ('': the platform's: MIGraphX or ROCm "
          "on AMD, CUDA on NVIDIA, else the CPU)", choices=PROVIDER_NAMES,
          check=provider_problem),
    Param("ort_level", "str", "", help="ONNX Runtime graph optimisation level: disable, "
          "basic, extended, all ('': all)", choices=engines.ORT_LEVELS),
    Param("int8", "str", "", help="int8 recipe: dynamic, pt2e, ort-dynamic, ort-static, "
          "torchao ('': dynamic on CPUs, torchao on GPUs)", choices=engines.INT8_METHODS),
)


def engine_options(params: dict[str, Any]) -> engines.Options:
    return engines.Options(params["provider"], params["ort_level"], params["int8"])


@dataclass(frozen=True)
class Ran:
    """What the timed part of a case gives back."""

    timing: Timing
    latencies: list[float]
    first_call: float
    steady: float
    check: parity.Parity
    details: dict[str, Any]
    lazy: bool


def measure(ctx: CaseContext, params: dict[str, Any]) -> CaseResult:
    import torch

    from accelbench.benchmarks.models.engines.wrap import TensorModule

    name = params["engine"]
    options = engine_options(params)
    unused = engines.unused_options(name, options)
    if unused:
        raise CaseSkipped(unused)
    setup = checks.setup_from_params(ctx, {**params, "cast": False, "channels_last": False,
                                           "compile": False, "h2d": False})
    spec, precision = setup.spec, setup.precision
    device = torch.device(ctx.device.torch_device)
    engine = engines.get(name)
    meter = PeakMemory(torch, device)
    fp32 = Precision("fp32")
    prepared = None
    with tempfile.TemporaryDirectory(prefix="accelbench-engine-") as workdir:
        try:
            model = checks.built(torch, spec.name, lambda: build_model(
                torch, replace(setup, precision=fp32), device).eval())
            module = TensorModule(spec, model).eval()
            n_params = sum(p.numel() for p in model.parameters())
            model_flops = flops.model_flops(torch, spec, model, setup.seq, setup.image)
            batch = tasks.make_batch(torch, spec, setup.batch, setup.seq, setup.image, device,
                                     torch.float32, seed=1000)
            example = tuple(batch.tensors[n] for n in tasks.input_names(spec))
            with math_mode(torch, fp32), torch.inference_mode():
                reference = module(*example).float().clone()
            job = engines.Job(torch, module, example, tasks.input_names(spec), device,
                              precision, options, Path(workdir))
            problem = engine.problem(job)
            if problem:
                raise CaseSkipped(problem)
            with math_mode(torch, precision):
                started = time.perf_counter()
                with torch.no_grad():
                    prepared = engine.prepare(job)
                prepare_s = time.perf_counter() - started
                tol = parity.tolerance(name, precision.dtype)
                with torch.inference_mode():
                    ran = run_engine(ctx, torch, device, prepared, example, reference, tol,
                                     classes=spec.task in CLASSIFIER_TASKS,
                                     steps=params["steps_per_window"])
            peak_memory, memory_details = meter.peak()
        finally:
            if prepared is not None and prepared.cleanup is not None:
                prepared.cleanup()
            model = module = batch = example = reference = prepared = None  # type: ignore[assignment]

    steps = params["steps_per_window"]
    samples = setup.batch * steps
    tokens = samples * setup.seq if spec.is_language_model else 0
    work = Work(samples, tokens, model_flops.per_step(samples, training=False), steps)
    details = {
        **checks.setup_details(setup, n_params),
        **memory_details,
        "mode": "inference",
        "engine": name,
        **engines.describe_options(name, options),
        "engine_details": ran.details,
        "precision_applied": ran.details.get("precision_applied", precision.label),
        "parity": ran.check.to_dict(),
        "model_flop_formula": model_flops.formula.replace("; training 3x", ""),
        "latency": f"p50/p90/p99 over {len(ran.latencies)} single synchronised calls",
        "first_call_s": ran.first_call,
        "prepare_s": prepare_s,
    }
    compile_time = None
    if name != engines.EAGER:
        compile_time = prepare_s + (max(0.0, ran.first_call - ran.steady) if ran.lazy else 0.0)
        details["compile_time"] = (
            "the time to make the engine ready (compile, trace and freeze, export and "
            "session, quantisation): " + ("its preparation plus the first call less a "
                                          "steady one" if ran.lazy else "its preparation"))
    warnings = (ran.details["provider_warning"],) if "provider_warning" in ran.details else ()
    return model_result(
        timing=ran.timing, work=work, peak_flops=ctx.peak_flops(precision.dtype),
        peak_memory=peak_memory, step_times=ran.latencies, compile_time=compile_time,
        details=details, time_name="window_time", warnings=warnings,
    )


def run_engine(ctx: CaseContext, torch: ModuleType, device: torch.device,
               prepared: engines.Prepared, example: tuple[Tensor, ...], reference: Tensor,
               tol: parity.Tolerance, classes: bool, steps: int) -> Ran:
    """Parity first (CaseFailed when out of tolerance: never timed), then the timing."""
    def call() -> Any:
        return prepared.run(example)

    started = time.perf_counter()
    out = call()
    _sync(torch, device)
    first_call = time.perf_counter() - started
    output = prepared.output(out) if prepared.output is not None else out
    check = parity.measure(torch, reference, output, tol, classes)
    if not check.ok:
        raise CaseFailed(check.reason())
    del out, output
    started = time.perf_counter()
    call()
    _sync(torch, device)
    steady = time.perf_counter() - started

    def window() -> None:
        for _ in range(steps):
            call()

    timing = ctx.time(window)
    latencies = latency_samples(ctx, call)
    return Ran(timing, latencies, first_call, steady, check, dict(prepared.details),
               prepared.lazy)


def _sync(torch: ModuleType, device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


BENCHMARK = Benchmark(
    name="infer-engine",
    family="model",
    summary="Inference through an engine (eager, torch.compile, TorchScript, ONNX Runtime, "
            "int8), checked for parity with eager fp32 before it is timed",
    entry="accelbench.benchmarks.models.infer_engine:measure",
    params=(*(p for p in model_params(batch=1) if p.name in _SHARED), *ENGINE_PARAMS),
    devices=("cpu", "cuda"),
    timeout_s=1800.0,
    sources=(*MODEL_SOURCES, *engines.ENGINE_SOURCES, "accelbench.benchmarks.models.infer"),
)
