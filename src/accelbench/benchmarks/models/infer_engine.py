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

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.benchmarks.mathmode import math_mode, tf32_worker_env
from accelbench.benchmarks.models import MODEL_SOURCES, checks, engines, flops, tasks
from accelbench.benchmarks.models.engines import parity
from accelbench.benchmarks.models.engines.onnxrt import PROVIDER_NAMES, provider_problem
from accelbench.benchmarks.models.flops import ModelFlops
from accelbench.benchmarks.models.infer import latency_samples, sync
from accelbench.benchmarks.models.memory import PeakMemory
from accelbench.benchmarks.models.params import model_params
from accelbench.benchmarks.models.precision import MATH_OPS, Precision
from accelbench.benchmarks.models.results import Work, model_result
from accelbench.benchmarks.models.trainer import ModelSetup, build_model
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped
from accelbench.core.params import DEFAULT, Param
from accelbench.core.registry import Benchmark
from accelbench.core.worker_env import WorkerEnv

if TYPE_CHECKING:
    from accelbench.core.device import DeviceInfo

# What `infer` has that engines do not take: a whole-model cast is what the graph
# engines do for fp16/bf16 anyway, and torch.compile is an engine here.
_SHARED = ("model", "dtype", "batch", "seq", "image", "steps_per_window", "config")
CLASSIFIER_TASKS = ("masked-lm", "causal-lm", "image-classification",
                    "sequence-classification")

ENGINE_PARAMS = (
    Param("engine", "str", engines.EAGER, help="eager, compile, compile-max-autotune, "
          "torchscript, onnxruntime or int8", choices=engines.ENGINE_NAMES),
    # Each applies to its engines only: crossed with `engine=eager,...` the other engines
    # keep their default, so the grid keeps its eager reference.
    Param("provider", "str", "", help="ONNX Runtime execution provider: cpu, cuda, "
          "tensorrt, rocm, migraphx, dnnl, openvino ('': the platform's: MIGraphX or ROCm "
          "on AMD, CUDA on NVIDIA, else the CPU)", choices=PROVIDER_NAMES,
          check=provider_problem, only_when=(("engine", (engines.ONNXRUNTIME,)),
                                             ("int8", engines.ORT_INT8_METHODS)),
          outside=DEFAULT),
    Param("ort_level", "str", "", help="ONNX Runtime graph optimisation level: disable, "
          "basic, extended, all ('': all)", choices=engines.ORT_LEVELS,
          only_when=("engine", (engines.ONNXRUNTIME,)), outside=DEFAULT),
    Param("int8", "str", "", help="int8 recipe: dynamic, pt2e, ort-dynamic, ort-static, "
          "torchao ('': dynamic on CPUs, torchao on GPUs)", choices=engines.INT8_METHODS,
          only_when=("engine", (engines.INT8,)), outside=DEFAULT),
)


@dataclass(frozen=True)
class InferEngineParams:
    """The parameters of an infer-engine case (`BENCHMARK.params`)."""

    model: str
    dtype: str
    batch: int
    seq: int
    image: int
    steps_per_window: int
    config: str
    engine: str
    provider: str
    ort_level: str
    int8: str


class EngineCase(Protocol):
    """What `ready_engine` reads of a case (an infer-engine or a serve case)."""

    @property
    def model(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def image(self) -> int: ...
    @property
    def config(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def ort_level(self) -> str: ...
    @property
    def int8(self) -> str: ...


def engine_options(params: EngineCase) -> engines.Options:
    return engines.Options(params.provider, params.ort_level, params.int8)


@dataclass(frozen=True)
class Ready:
    """An engine made ready for a case, its output checked against eager fp32."""

    setup: ModelSetup
    engine: str
    options: engines.Options
    prepared: engines.Prepared
    example: tuple[Any, ...]  # the seeded batch the parity was checked on
    check: parity.Parity
    prepare_s: float
    first_call: float  # the first call after preparing (a lazy engine compiles in it)
    steady: float  # the second call
    n_params: int
    model_flops: ModelFlops
    device: Any

    def call(self) -> Any:
        return self.prepared.run(self.example)

    @property
    def compile_time(self) -> float | None:
        if self.engine == engines.EAGER:
            return None
        lazy = max(0.0, self.first_call - self.steady) if self.prepared.lazy else 0.0
        return self.prepare_s + lazy

    def details(self) -> dict[str, Any]:
        setup, extra = self.setup, self.prepared.details
        out = {
            **checks.setup_details(setup, self.n_params),
            "mode": "inference",
            "engine": self.engine,
            **engines.describe_options(self.engine, self.options),
            "engine_details": dict(extra),
            "precision_applied": extra.get("precision_applied", setup.precision.label),
            "parity": self.check.to_dict(),
            "first_call_s": self.first_call,
            "prepare_s": self.prepare_s,
        }
        if self.engine != engines.EAGER:
            out["compile_time"] = (
                "the time to make the engine ready (compile, trace and freeze, export and "
                "session, quantisation): " + ("its preparation plus the first call less a "
                                              "steady one" if self.prepared.lazy
                                              else "its preparation"))
        return out

    @property
    def warnings(self) -> tuple[str, ...]:
        warning = self.prepared.details.get("provider_warning")
        return (warning,) if warning else ()


@contextlib.contextmanager
def ready_engine(ctx: CaseContext, params: EngineCase, batch: int) -> Iterator[Ready]:
    """The case's engine, prepared for `batch` and checked for parity on a seeded batch,
    inside the precision's math mode; CaseSkipped, or CaseFailed with the figures when the
    engine is out of tolerance (never timed)."""
    import torch

    from accelbench.benchmarks.models.engines.wrap import TensorModule

    name = params.engine
    options = engine_options(params)
    unused = engines.unused_options(name, options)
    if unused:
        raise CaseSkipped(unused)
    setup = checks.model_setup(ctx, params.model, params.config, params.dtype, batch,
                               params.seq, params.image)
    spec, precision = setup.spec, setup.precision
    device = torch.device(ctx.device.torch_device)
    checks.check_lstm_precision(torch, setup, device)
    engine = engines.get(name)
    fp32 = Precision("fp32")
    prepared = None
    with tempfile.TemporaryDirectory(prefix="accelbench-engine-") as workdir:
        try:
            model = checks.built(torch, spec.name, lambda: build_model(
                torch, replace(setup, precision=fp32), device).eval())
            module = TensorModule(spec, model).eval()
            n_params = sum(p.numel() for p in model.parameters())
            model_flops = flops.model_flops(torch, spec, model, setup.seq, setup.image)
            batch_ = tasks.make_batch(torch, spec, setup.batch, setup.seq, setup.image,
                                      device, torch.float32, seed=1000)
            example = tuple(batch_.tensors[n] for n in tasks.input_names(spec))
            platform = ctx.device.platform
            with math_mode(torch, False, MATH_OPS, platform), torch.inference_mode():
                reference = module(*example).float().clone()
            job = engines.Job(torch, module, example, tasks.input_names(spec), device,
                              precision, options, Path(workdir))
            problem = engine.problem(job)
            if problem:
                raise CaseSkipped(problem)
            with math_mode(torch, precision.tf32, MATH_OPS, platform) as mode:
                checks.check_math_mode(mode, precision)
                started = time.perf_counter()
                with torch.no_grad():
                    prepared = engine.prepare(job)
                prepare_s = time.perf_counter() - started
                ready_to_run = prepared
                with torch.inference_mode():
                    first_call, out = _timed_call(torch, device,
                                                  lambda: ready_to_run.run(example))
                    output = prepared.output(out) if prepared.output is not None else out
                    check = parity.measure(torch, reference, output,
                                           parity.tolerance(name, precision.dtype),
                                           classes=spec.task in CLASSIFIER_TASKS)
                    del out, output, reference
                    if not check.ok:
                        raise CaseFailed(check.reason())
                    steady, _ = _timed_call(torch, device, lambda: ready_to_run.run(example))
                yield Ready(setup, name, options, prepared, example, check, prepare_s,
                            first_call, steady, n_params, model_flops, device)
        finally:
            if prepared is not None and prepared.cleanup is not None:
                prepared.cleanup()
            model = module = batch_ = example = prepared = None  # type: ignore[assignment]


def _timed_call(torch: ModuleType, device: Any, fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    sync(torch, device)
    return time.perf_counter() - started, out


def engine_worker_env(params: Mapping[str, Any], device: DeviceInfo) -> WorkerEnv:
    """The math mode's worker environment, and for an fp32 case on ONNX Runtime's TensorRT
    provider NVIDIA_TF32_OVERRIDE=0: TensorRT runs float32 layers as TF32 by default, and
    neither ONNX Runtime nor TensorRT's builder flags reach it from here, while the
    override turns TF32 off in every NVIDIA library of the process (the user's own value
    is kept)."""
    env = tf32_worker_env(params, device)
    if (params.get("dtype") == "fp32" and params.get("provider") == "tensorrt"
            and device.platform == "cuda"):
        env = env.union(WorkerEnv.of(values={"NVIDIA_TF32_OVERRIDE": "0"}))
    return env


def mfu_precision(engine: str, dtype: str) -> str:
    """The precision whose peak a case's MFU is taken against: int8 for the int8 engine,
    whose matrix products run on the int8 units (its dtype names the fp32 model it
    quantises, and the fp32 peak would let its MFU pass 100%), else the case's dtype."""
    return "int8" if engine == engines.INT8 else dtype


def measure(ctx: CaseContext, params: InferEngineParams) -> CaseResult:
    import torch

    device = torch.device(ctx.device.torch_device)
    meter = PeakMemory(torch, device)
    steps = params.steps_per_window
    with ready_engine(ctx, params, params.batch) as ready, torch.inference_mode():
        call = ready.call

        def window() -> None:
            for _ in range(steps):
                call()

        timing = ctx.time(window)
        latencies = latency_samples(ctx, call)
        peak_memory, memory_details = meter.peak()
    setup = ready.setup
    samples = setup.batch * steps
    tokens = samples * setup.seq if setup.spec.is_language_model else 0
    work = Work(samples, tokens, ready.model_flops.per_step(samples, training=False), steps)
    details = {
        **ready.details(),
        **memory_details,
        "model_flop_formula": ready.model_flops.formula.replace("; training 3x", ""),
        "latency": f"p50/p90/p99 over {len(latencies)} single synchronised calls",
    }
    peak_dtype = mfu_precision(ready.engine, setup.precision.dtype)
    details["mfu_peak"] = f"{peak_dtype} dense peak"
    return model_result(
        timing=timing, work=work, peak_flops=ctx.peak_flops(peak_dtype),
        peak_memory=peak_memory, step_times=latencies, compile_time=ready.compile_time,
        details=details, time_name="window_time", warnings=ready.warnings,
    )


BENCHMARK = Benchmark(
    name="infer-engine",
    family="models",
    summary="Inference through an engine (eager, torch.compile, TorchScript, ONNX Runtime, "
            "int8), checked for parity with eager fp32 before it is timed",
    entry="accelbench.benchmarks.models.infer_engine:measure",
    params=(*(p for p in model_params(batch=1) if p.name in _SHARED), *ENGINE_PARAMS),
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    sources=(*MODEL_SOURCES, *engines.ENGINE_SOURCES, "accelbench.benchmarks.models.infer"),
    worker_env=engine_worker_env,
    views=("accelbench.benchmarks.models.view:sections",
           "accelbench.benchmarks.models.engines.view:sections"),
    typed=InferEngineParams,
)
