"""onnxruntime: the model exported with torch.onnx and run by an ONNX Runtime session.

Export: the dynamo exporter (`torch.onnx.export(..., dynamo=True)`, which needs
onnxscript) where it works; otherwise the TorchScript-based exporter, with the dynamo
exporter's reason recorded. An export that fails both ways fails the case with both
reasons. For fp16 and bf16 the model is cast before export, as for TorchScript.

The session runs on the platform's execution provider unless `provider` names one: on
ROCm MIGraphX, else ROCm; on CUDA the CUDA provider (TensorRT when asked); on the CPU the
CPU provider. Each GPU provider is given the case's device and the float math its
precision states (`provider_options`): the CUDA provider's default is TF32 for float32
matrix math, so fp32 sets `use_tf32=0` and only tf32 sets it to 1; TensorRT and
MIGraphX enable a half type only for the fp16 or bf16 case. What a provider cannot be
told (TensorRT's TF32 for float32 layers, MIGraphX's lack of TF32) is said in the
record's `math_mode`. The record holds the options as the session applied them, the
providers it uses, how many nodes each runs (and the operators of those that left the
requested provider, for the CPU mostly), the optimisation level and the thread count.

Inputs and the output are torch tensors bound through their data pointers (I/O
binding), on the CPU as on GPUs: no copy, and bf16 passes as ONNX's bfloat16, which
numpy lacks. On GPUs, torch's stream is synchronised before each run (`stream_sync`
says why).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
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
PROVIDER_KEYS = {name: key for key, name in PROVIDERS.items()}
PROVIDER_NAMES = ("", *PROVIDERS)
GPU_PROVIDERS = ("cuda", "tensorrt", "rocm", "migraphx")
AMD_PROVIDERS = ("rocm", "migraphx")  # their device memory is an AMD GPU's
HALF_FLAGS = {"tensorrt": "trt", "migraphx": "migraphx"}  # prefix of *_fp16_enable etc.
# What `provider=""` picks, in order of preference, per platform.
AUTO = {"rocm": ("migraphx", "rocm"), "cuda": ("cuda",), "cpu": ("cpu",)}
LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
          "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
# How a session tells which provider runs each node (see `placement`).
ASSIGNMENT_KEY = "session.record_ep_graph_assignment_info"
ASSIGNMENT_SOURCE = ("the graph assignment recorded by ONNX Runtime (nodes after its "
                     "graph optimisations)")
PROFILE_SOURCE = ("ONNX Runtime's profile of one run (a subgraph that a provider "
                  "compiles counts as one node)")
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


def session_providers(job: Job, provider: str) -> dict[str, dict[str, str]]:
    """The providers a session is made with, in order, each with its options: the
    requested one with the case's device and math mode, the CPU provider behind it."""
    providers = {PROVIDERS[provider]: provider_options(provider, job.precision.dtype,
                                                       device_index(job))}
    if provider != "cpu":
        providers[PROVIDERS["cpu"]] = {}
    return providers


def provider_options(provider: str, dtype: str, device_id: int) -> dict[str, str]:
    """A GPU provider's options: its device, and the float math the case's precision
    states. The CUDA provider runs float32 matrix math as TF32 unless `use_tf32=0`;
    TensorRT and MIGraphX use a half type only where `*_fp16_enable`/`*_bf16_enable`
    says so. Only the keys that state the case's precision are given, so an fp32 case
    works on builds that predate the bf16 keys; a build that lacks a key refuses the
    session, and the case fails with ONNX Runtime's reason."""
    if provider not in GPU_PROVIDERS:
        return {}
    options = {"device_id": str(device_id)}
    if provider == "cuda":
        options["use_tf32"] = "1" if dtype == "tf32" else "0"
    elif provider in HALF_FLAGS:
        prefix = HALF_FLAGS[provider]
        if dtype in ("fp16", "bf16"):
            options[f"{prefix}_{dtype}_enable"] = "1"
        else:
            options[f"{prefix}_fp16_enable"] = "0"
    return options


def math_note(provider: str, dtype: str) -> str:
    """What the provider's options do to float32 math, in words, for the record."""
    if provider == "cuda":
        return ("use_tf32=1: float32 matrix math may run as TF32" if dtype == "tf32" else
                "use_tf32=0: float32 matrix math in IEEE float32 (the CUDA provider's "
                "default is TF32)")
    if provider == "tensorrt":
        if dtype in ("fp16", "bf16"):
            return f"trt_{dtype}_enable=1"
        return ("no half types; TensorRT runs float32 layers as TF32 by default and ONNX "
                "Runtime's TensorRT provider has no option to clear it, so an fp32 case's "
                "worker starts with NVIDIA_TF32_OVERRIDE=0 (a value of your own is kept)")
    if provider == "migraphx":
        if dtype in ("fp16", "bf16"):
            return f"migraphx_{dtype}_enable=1"
        return ("migraphx_fp16_enable=0: float32 stays float32 (MIGraphX has no TF32 "
                "option, so tf32 runs as fp32 here)" if dtype == "tf32" else
                "migraphx_fp16_enable=0: float32 stays float32")
    if provider == "rocm":
        return ("the ROCm provider has no math-mode option: float32 matrix math is what "
                "the ROCm libraries do in the worker's environment")
    return "the CPU computes float32 in float32"


def applied_options(sess: Any, asked: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The options given, as the session reports it applied them (where it reports a
    key; what was asked otherwise)."""
    reported = sess.get_provider_options()
    return {name: {key: str(reported.get(name, {}).get(key, value))
                   for key, value in options.items()}
            for name, options in asked.items()}


def device_index(job: Job) -> int:
    """The case's GPU index (the current device where the device names none)."""
    if job.device.type == "cpu":
        return 0
    index = job.device.index
    return int(index) if index is not None else int(job.torch.cuda.current_device())


def session(job: Job, path: Path, provider: str, count_nodes: bool = False) -> Any:
    """An InferenceSession of the file on `provider` with its options, the CPU provider
    behind it. With `count_nodes`, it records which provider runs each node: ONNX
    Runtime's record of graph assignment where the build has one, else its profiler,
    which `placement` stops after one run."""
    ort = require("onnxruntime", "the onnxruntime engine")
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                               LEVELS[job.options.ort_level or "all"])
    options.intra_op_num_threads = job.torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    if count_nodes:
        if records_assignment(ort):
            options.add_session_config_entry(ASSIGNMENT_KEY, "1")
        else:
            options.enable_profiling = True
            options.profile_file_prefix = str(job.workdir / "ort-profile")
    providers = session_providers(job, provider)
    try:
        return ort.InferenceSession(str(path), options, providers=list(providers),
                                    provider_options=list(providers.values()))
    except Exception as exc:
        raise CaseFailed(f"onnxruntime: the session could not be created: "
                         f"{type(exc).__name__}: {_first_line(exc)}") from None


def records_assignment(ort: Any) -> bool:
    """Whether this ONNX Runtime can report which provider each node was assigned to."""
    return hasattr(ort.InferenceSession, "get_provider_graph_assignment_info")


@dataclass(frozen=True)
class Placement:
    """How many of a session's nodes each provider runs, and the operators of those
    that run on another provider than the one asked for (the CPU, mostly: ONNX Runtime
    hands it what the GPU provider has no kernel for, and shape arithmetic)."""

    nodes: dict[str, int]  # provider -> nodes: the requested one first, then most first
    off_requested: dict[str, dict[str, int]]  # provider -> operator -> nodes
    source: str

    @classmethod
    def of(cls, assigned: Iterable[tuple[str, str]], requested: str,
           source: str) -> Placement:
        """From (provider, operator type) pairs, one per node."""
        nodes: Counter[str] = Counter()
        off: dict[str, Counter[str]] = {}
        for provider, op in assigned:
            nodes[provider] += 1
            if provider != PROVIDERS[requested]:
                off.setdefault(provider, Counter())[op] += 1
        first = sorted(nodes.items(), key=lambda pn: (pn[0] != PROVIDERS[requested], -pn[1]))
        return cls(dict(first), {p: dict(ops.most_common()) for p, ops in off.items()},
                   source)


def placement(sess: Any, run_once: Callable[[], Any], requested: str) -> Placement | None:
    """Which provider runs each node of the session made by `session(count_nodes=True)`;
    None where this ONNX Runtime can tell neither way. The profiler, where it is the
    way, sees one run (`run_once`) and is then stopped, so no timed call is profiled."""
    recorded = getattr(sess, "get_provider_graph_assignment_info", None)
    try:
        subgraphs = recorded() if recorded is not None else []
    except Exception:  # raised where the session was made without the record (profiled)
        subgraphs = []
    if subgraphs:
        return Placement.of(((s.ep_name, n.op_type) for s in subgraphs for n in s.get_nodes()),
                            requested, ASSIGNMENT_SOURCE)
    if not sess.get_session_options().enable_profiling:
        return None
    run_once()
    profile = Path(sess.end_profiling())
    return Placement.of(_profiled_nodes(profile), requested, PROFILE_SOURCE)


def _profiled_nodes(profile: Path) -> list[tuple[str, str]]:
    """(provider, operator type) of each node that ran, from a profile's node events."""
    nodes: dict[tuple[str, str], tuple[str, str]] = {}
    for event in json.loads(profile.read_text()):
        args = event.get("args") or {}
        if event.get("cat") == "Node" and "provider" in args:
            key = (str(args["provider"]), str(args.get("node_index", event.get("name"))))
            nodes[key] = (str(args["provider"]), str(args.get("op_name", "?")))
    return list(nodes.values())


# -- I/O binding ----------------------------------------------------------------------------

AMD_VENDOR_ID = 0x1002  # PCI vendor id: what ONNX Runtime's OrtDevice names AMD GPUs by
ONNX_BFLOAT16 = 16  # onnx.TensorProto.BFLOAT16: numpy has no bfloat16


@dataclass(frozen=True)
class Place:
    """Where bound tensors live, in the terms of ONNX Runtime's Python API."""

    device_type: str  # "cpu", "cuda", or "gpu" with a vendor
    device_id: int
    vendor_id: int | None = None

    def describe(self) -> str:
        where = f"{self.device_type}:{self.device_id}"
        return where if self.vendor_id is None else f"{where} (vendor {self.vendor_id:#06x})"


def place(ort: Any, provider: str, device_id: int) -> Place:
    """The device that `provider`'s tensors are bound on. ONNX Runtime's Python API has
    no "rocm" device: its GPU memory is the "cuda" device type on NVIDIA, and on AMD the
    GPU device type with AMD's vendor id, since builds that tell devices apart by vendor
    (those with `OrtDeviceVendorId`); before those, "cuda" was the one GPU type, AMD's
    providers' included."""
    if provider not in GPU_PROVIDERS:
        return Place("cpu", 0)
    if provider in AMD_PROVIDERS and hasattr(ort, "OrtDeviceVendorId"):
        return Place("gpu", device_id, AMD_VENDOR_ID)
    return Place("cuda", device_id)



def element_type(torch: Any, dtype: Any) -> Any:
    """What bind_input/bind_output take as a tensor's element type: ONNX's type number
    for bfloat16 (numpy has none, and ONNX Runtime refuses uint16 for it), the numpy
    type otherwise (which every ONNX Runtime takes)."""
    if dtype == torch.bfloat16:
        return ONNX_BFLOAT16
    import numpy as np

    return np.bool_ if dtype == torch.bool else getattr(np, str(dtype).removeprefix("torch."))


def _torch_dtype(torch: Any, ort_type: str) -> Any:
    """The torch dtype of an ONNX Runtime type name ("tensor(bfloat16)")."""
    name = ort_type.removeprefix("tensor(").removesuffix(")")
    return getattr(torch, {"float": "float32", "double": "float64"}.get(name, name))


def _bind(binding: Any, ort: Any, kind: str, name: str, where: Place, element: Any,
          shape: tuple[int, ...], pointer: int) -> None:
    """Bind a tensor's memory as input or output `name`. IOBinding's Python methods take
    a device type and index but no vendor, so a vendor's device is made with
    OrtDevice.make and bound through the binding's native object, the one the Python
    methods call."""
    if where.vendor_id is None:
        getattr(binding, f"bind_{kind}")(name, where.device_type, where.device_id, element,
                                         list(shape), pointer)
        return
    device = ort.OrtDevice.make(where.device_type, where.device_id, where.vendor_id)
    getattr(binding._iobinding, f"bind_{kind}")(name, device._get_c_device(), element,
                                                list(shape), pointer)


def _provider_of(job: Job, sess: Any) -> str:
    """The provider whose memory the bound tensors are in: the session's GPU provider,
    else the platform's (a GPU case whose session fell back to the CPU still holds GPU
    tensors, which must never be bound as host memory)."""
    for name in sess.get_providers():
        key = PROVIDER_KEYS.get(name, "")
        if key in GPU_PROVIDERS:
            return key
    return "cpu" if job.device.type == "cpu" else AUTO[_platform(job)][-1]


def runner(job: Job, sess: Any, dtype: Any) -> tuple[Any, Any]:
    """`run(inputs)` and `output(result)` for the session: the torch tensors are bound
    where they are, through their data pointers and ONNX element types (no copy, on the
    CPU as on GPUs), and the output is written into a torch tensor allocated beside the
    inputs, which `run` returns. That tensor is reused: a call overwrites the last one's
    output."""
    torch = job.torch
    ort = require("onnxruntime", "the onnxruntime engine")
    names = list(job.input_names)
    where = place(ort, _provider_of(job, sess), device_index(job))
    binding = sess.io_binding()
    declared = sess.get_outputs()[0]
    out_dtype = _torch_dtype(torch, declared.type)
    out_shape = tuple(declared.shape) if all(isinstance(d, int) for d in declared.shape) \
        else None
    before_run = stream_sync(torch, job.device)
    held: list[Any] = []  # the output tensor, once allocated

    def execute() -> None:
        if before_run is not None:
            before_run()
        sess.run_with_iobinding(binding)
        binding.synchronize_outputs()

    def bind_output(shape: tuple[int, ...], device: Any) -> Any:
        out = torch.empty(shape, dtype=out_dtype, device=device)
        _bind(binding, ort, "output", declared.name, where, element_type(torch, out_dtype),
              tuple(out.shape), out.data_ptr())
        held.append(out)
        return out

    def run(inputs: tuple[Any, ...]) -> Any:
        tensors = [t.contiguous() for t in cast_inputs(job, inputs, dtype)]
        for name, tensor in zip(names, tensors, strict=True):
            _bind(binding, ort, "input", name, where, element_type(torch, tensor.dtype),
                  tuple(tensor.shape), tensor.data_ptr())
        if held:
            execute()
            return held[0]
        shape = out_shape
        if shape is None:  # a dimension the graph leaves open: one run tells it
            binding.bind_output(declared.name, "cpu")
            execute()
            shape = tuple(binding.get_outputs()[0].shape())
        out = bind_output(shape, tensors[0].device)
        execute()
        return out

    return run, lambda result: result


def stream_sync(torch: Any, device: Any) -> Callable[[], None] | None:
    """What to call before each run on a GPU: synchronise torch's current stream. The
    inputs are cast (fp16, bf16) and made contiguous on torch's stream, and ONNX
    Runtime's GPU providers run on a stream of their own, which does not wait for
    torch's: without the sync, a run may read an input before its cast has written it.
    Handing ONNX Runtime torch's stream (`user_compute_stream`) would order the two on
    the device alone, but it is fixed when the session is made, the MIGraphX provider
    has no such option, and a tensor made on another stream would still race; the sync
    holds for every provider. Its cost is in the engine's time per call, as it is for
    any program that feeds torch tensors to ONNX Runtime. None on the CPU."""
    if device.type == "cpu":
        return None

    def sync() -> None:
        torch.cuda.current_stream(device).synchronize()

    return sync


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
        sess = session(job, exported.path, provider, count_nodes=True)
        session_s = time.perf_counter() - started
        used = list(sess.get_providers())
        run, output = runner(job, sess, cast_dtype(job))
        placed = placement(sess, lambda: run(job.example), provider)
        where = place(ort, _provider_of(job, sess), device_index(job))
        details: dict[str, Any] = {
            "onnxruntime": ort.__version__,
            "exporter": exported.exporter,
            "export_s": exported.seconds,
            "session_s": session_s,
            "onnx_bytes": exported.path.stat().st_size,
            "provider_requested": PROVIDERS[provider],
            "providers_used": used,
            "provider_options": applied_options(sess, session_providers(job, provider)),
            "math_mode": math_note(provider, job.precision.dtype),
            "graph_optimization_level": LEVELS[job.options.ort_level or "all"],
            "intra_op_threads": job.torch.get_num_threads(),
            "io": f"I/O binding of the torch tensors on {where.describe()}",
        }
        if job.device.type != "cpu":
            details["input_sync"] = ("torch's current stream synchronised before each run, "
                                     "so ONNX Runtime's stream reads finished inputs")
        if placed is not None:
            details["nodes_per_provider"] = placed.nodes
            details["node_count_source"] = placed.source
            if placed.off_requested:
                details["nodes_off_requested_provider"] = placed.off_requested
        else:
            details["nodes_per_provider_unknown"] = (
                "this ONNX Runtime neither records graph assignment nor profiles nodes")
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
