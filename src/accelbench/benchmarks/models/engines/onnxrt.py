"""onnxruntime: the model exported with torch.onnx and run by an ONNX Runtime session.

Export: the dynamo exporter (`torch.onnx.export(..., dynamo=True)`, which needs
onnxscript) where it works; otherwise the TorchScript-based exporter, with the dynamo
exporter's reason recorded. An export that fails both ways fails the case with both
reasons. For fp16 and bf16 the model is cast before export, as for TorchScript.

The session runs on the platform's execution provider unless `provider` names one: on
ROCm MIGraphX, else ROCm; on CUDA the CUDA provider (TensorRT when asked); on the CPU the
CPU provider. The providers the session actually uses, the graph optimisation level and
the thread count are recorded. On the CPU inputs are handed over as numpy views of the
tensors (no copy); on GPUs they are bound on the device (I/O binding), and the output
stays there.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.benchmarks.models.engines import ONNXRUNTIME, Job, Prepared
from accelbench.benchmarks.models.engines.packages import require
from accelbench.benchmarks.models.engines.torchscript import (
    _first_line,
    cast_dtype,
    cast_for,
    cast_inputs,
)
from accelbench.core.measurement import CaseFailed, CaseSkipped

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "dnnl": "DnnlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
}
PROVIDER_NAMES = ("", *PROVIDERS)
GPU_PROVIDERS = ("cuda", "tensorrt", "rocm", "migraphx")
# What `provider=""` picks, in order of preference, per platform.
AUTO = {"rocm": ("migraphx", "rocm"), "cuda": ("cuda",), "cpu": ("cpu",)}
LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
          "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
GPU_PACKAGES = {"rocm": "onnxruntime-rocm (or onnxruntime-migraphx)",
                "cuda": "onnxruntime-gpu"}


def available_providers() -> list[str] | None:
    """ONNX Runtime's providers in this environment; None when it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return list(onnxruntime.get_available_providers())


def provider_problem(value: str) -> str | None:
    """Parameter check: a provider that does not exist, or that this machine lacks."""
    if not value:
        return None
    if value not in PROVIDERS:
        return f"unknown provider (providers: {', '.join(PROVIDERS)})"
    available = available_providers()
    if available is not None and PROVIDERS[value] not in available:
        have = ", ".join(k for k, v in PROVIDERS.items() if v in available) or "none"
        return f"ONNX Runtime here has no {PROVIDERS[value]} (available: {have})"
    return None


def choose_provider(requested: str, platform: str, available: list[str]) -> str:
    """The provider key a session uses; CaseSkipped when none fits this device."""
    if requested:
        on_gpu = requested in GPU_PROVIDERS
        if on_gpu != (platform != "cpu"):
            where = "a GPU" if on_gpu else "the CPU"
            raise CaseSkipped(f"provider {requested} runs on {where}, not on this "
                              f"{platform} device")
        return requested
    for key in AUTO.get(platform, ("cpu",)):
        if PROVIDERS[key] in available:
            return key
    raise CaseSkipped(f"ONNX Runtime here has no execution provider for {platform} "
                      f"(it has {', '.join(available)}): install "
                      f"{GPU_PACKAGES.get(platform, 'a build of onnxruntime for it')}")


@dataclass(frozen=True)
class Exported:
    path: Path
    exporter: str  # "dynamo" or "torchscript"
    fallback: str | None  # why the dynamo exporter was not used
    seconds: float


def export(job: Job, module: Any, example: tuple[Any, ...], path: Path) -> Exported:
    """The model as an ONNX file: the dynamo exporter, else the TorchScript one."""
    torch = job.torch
    names = list(job.input_names)
    started = time.perf_counter()
    reasons: list[str] = []
    for dynamo in (True, False):
        try:
            with quiet(), torch.no_grad():
                torch.onnx.export(module, example, str(path), dynamo=dynamo, verbose=False,
                                  input_names=names, output_names=["output"])
            fallback = None if dynamo else reasons[0]
            return Exported(path, "dynamo" if dynamo else "torchscript", fallback,
                            time.perf_counter() - started)
        except Exception as exc:
            reasons.append(f"{'dynamo' if dynamo else 'torchscript'} exporter: "
                           f"{type(exc).__name__}: {_first_line(exc)}")
    raise CaseFailed("onnxruntime: the export failed: " + "; ".join(reasons))


@contextlib.contextmanager
def quiet() -> Any:
    """The exporters and quantizers print progress, warn and log about what they
    translate: none of it is for accelbench's output. A handler on the root logger keeps
    `logging.warning` from configuring logging for the whole process meanwhile."""
    root, guard = logging.getLogger(), logging.NullHandler()
    root.addHandler(guard)
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)
        root.removeHandler(guard)


def session(job: Job, path: Path, provider: str) -> Any:
    """An InferenceSession of the file on `provider`, the CPU provider behind it."""
    ort = require("onnxruntime", "the onnxruntime engine")
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                               LEVELS[job.options.ort_level or "all"])
    options.intra_op_num_threads = job.torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    providers = [PROVIDERS[provider]]
    if provider != "cpu":
        providers.append(PROVIDERS["cpu"])
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        raise CaseFailed(f"onnxruntime: the session could not be created: "
                         f"{type(exc).__name__}: {_first_line(exc)}") from None


def runner(job: Job, sess: Any, dtype: Any) -> tuple[Any, Any]:
    """`run(inputs)` and `output(result)` for the session: numpy on the CPU, bound
    device memory on GPUs."""
    torch = job.torch
    names = list(job.input_names)
    if job.device.type == "cpu":
        def run(inputs: tuple[Any, ...]) -> Any:
            arrays = cast_inputs(job, inputs, dtype)
            return sess.run(None, {n: a.numpy() for n, a in zip(names, arrays, strict=True)})

        def output(result: Any) -> Any:
            return torch.from_numpy(result[0])

        return run, output

    import numpy as np

    index = job.device.index or 0
    binding = sess.io_binding()

    def run_bound(inputs: tuple[Any, ...]) -> Any:
        for name, tensor in zip(names, cast_inputs(job, inputs, dtype), strict=True):
            tensor = tensor.contiguous()
            binding.bind_input(name, "cuda", index, _numpy_type(np, tensor),
                               tuple(tensor.shape), tensor.data_ptr())
        binding.bind_output("output", "cuda", index)
        sess.run_with_iobinding(binding)
        binding.synchronize_outputs()
        return binding

    def output_bound(result: Any) -> Any:
        return torch.from_numpy(result.copy_outputs_to_cpu()[0]).to(job.device)

    return run_bound, output_bound


def _numpy_type(np: Any, tensor: Any) -> Any:
    name = str(tensor.dtype).removeprefix("torch.")
    return {"bfloat16": np.uint16}.get(name, getattr(np, name))  # numpy has no bfloat16


class OnnxRuntime:
    name = ONNXRUNTIME

    def problem(self, job: Job) -> str | None:
        return None

    def prepare(self, job: Job) -> Prepared:
        ort = require("onnxruntime", "the onnxruntime engine")
        require("onnx", "the onnxruntime engine")
        provider = choose_provider(job.options.provider, _platform(job),
                                   list(ort.get_available_providers()))
        module, example = cast_for(job)
        exported = export(job, module, example, job.workdir / "model.onnx")
        started = time.perf_counter()
        sess = session(job, exported.path, provider)
        session_s = time.perf_counter() - started
        used = list(sess.get_providers())
        run, output = runner(job, sess, cast_dtype(job))
        details = {
            "onnxruntime": ort.__version__,
            "exporter": exported.exporter,
            "export_s": exported.seconds,
            "session_s": session_s,
            "onnx_bytes": exported.path.stat().st_size,
            "provider_requested": PROVIDERS[provider],
            "providers_used": used,
            "graph_optimization_level": LEVELS[job.options.ort_level or "all"],
            "intra_op_threads": job.torch.get_num_threads(),
            "io": "numpy views of CPU tensors" if job.device.type == "cpu"
                  else "I/O binding on the device",
        }
        if exported.fallback:
            details["exporter_fallback_reason"] = exported.fallback
        if used[0] != PROVIDERS[provider]:
            details["provider_warning"] = (f"ONNX Runtime fell back to {used[0]} from "
                                           f"{PROVIDERS[provider]}")
        return Prepared(run, details, output=output)


def _platform(job: Job) -> str:
    if job.device.type == "cpu":
        return "cpu"
    return "rocm" if getattr(job.torch.version, "hip", None) else "cuda"


ENGINE = OnnxRuntime()
