"""Convolution throughput (MIOpen on ROCm, cuDNN on CUDA, oneDNN on the CPU).

One case is one layer in one direction: forward, backward-data (the input gradient) or
backward-weight (the weight gradient), 2-D or 3-D, in NCHW or channels-last. Every
direction does 2 * N * K * prod(output size) * (C / groups) * prod(kernel) FLOP.

Algorithm selection is a parameter. With `search` on, `torch.backends.cudnn.benchmark`
is set for the case: cuDNN times its candidate algorithms, and PyTorch's ROCm build calls
MIOpen's find step with exhaustive search (unless `torch.backends.miopen.immediate` is
set). On ROCm that alone is no search: in MIOpen's default find mode (DYNAMIC_HYBRID;
FAST and HYBRID alike) a problem the find database knows is answered from it without
benchmarking anything, and the system find database installed with MIOpen knows the
common layers. Only the NORMAL find mode benchmarks every applicable solution. So a
search case's worker starts with MIOPEN_FIND_MODE=NORMAL (PyTorch 2.7 and later also set
NORMAL on the convolution when benchmark is on, with MIOpen 3.4 or later; the variable
covers older stacks too), next to fresh user databases (below); a find mode the user set
is kept, recorded, and warned about. MIOPEN_FIND_ENFORCE is left alone: its SEARCH
values tune every tunable solver's kernel parameters, which can take far longer than a
case may run, so a searched algorithm's tuned kernel parameters may still come from
MIOpen's system performance database. The search happens on the first call of each
problem in a process, so that call is timed on its own, and the search time (first call
minus one steady-state call) is reported apart from the steady-state throughput; with
search off the first call is reported too, for contrast (on ROCm it includes compiling
or loading MIOpen's kernels).
The library flags in force, and on ROCm the MIOpen environment settings, are recorded.
PyTorch keeps the algorithm it chose for a problem until the process ends, whatever
cudnn.benchmark says later, so a GPU case whose problem this worker already ran is
marked with a warning (`algorithm_cache: warm`).

Nothing is timed in steady state before it is checked: the same call on a batch of
CHECK_BATCH is checked in full against a float64 CPU reference of the same (already
rounded) inputs, and one image of the full-size result too (forward and backward-data).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.mathmode import MathMode, math_mode, read_precision
from accelbench.benchmarks.micro.conv_shapes import ConvLayer, layer_problem, parse_layer
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.dtypes import DTYPES, unsupported_reason
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark
from accelbench.core.worker_env import FRESH_DIRS_VARIABLE, NONE, WorkerEnv

if TYPE_CHECKING:
    import torch
    from torch import Tensor

CONV_DTYPES = ("fp32", "fp16", "bf16")
DIRECTIONS = ("fwd", "bwd-data", "bwd-weight")
LAYOUTS = ("nchw", "channels-last")

# Largest accepted ||out - ref|| / ||ref|| against float64 on the same rounded inputs:
# accumulation and output rounding, plus the extra error of Winograd and FFT algorithms
# that a search may pick.
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2}

CHECK_BATCH = 2  # the small case, checked in full
MEMORY_HEADROOM = 0.9  # skip a case whose tensors need more than this share of the device

FLOP_FORMULA = "2 * N * K * prod(output size) * (C / groups) * prod(kernel), every direction"

CONV_LIBRARY = {"rocm": "MIOpen", "cuda": "cuDNN", "cpu": "oneDNN (mkldnn)"}

# Problems this process has already run on a GPU. PyTorch keeps the algorithm it chose
# for a problem for the life of the process (cuDNN and MIOpen paths alike) and looks it up
# before it looks at cudnn.benchmark, so a problem seen before keeps its first algorithm.
_PROBLEMS_SEEN: set[tuple[object, ...]] = set()

OPS = {
    "fwd": "torch.nn.functional.conv{dims}d",
    "bwd-data": "torch.ops.aten.convolution_backward, output_mask=(True, False, False)",
    "bwd-weight": "torch.ops.aten.convolution_backward, output_mask=(False, True, False)",
}


@dataclass
class ConvProblem:
    """Tensors of one convolution, the bare call to time and how to read its result."""

    layer: ConvLayer
    x: Tensor  # input, N x C x (D x) H x W
    w: Tensor  # weight, K x C/groups x (T x) R x S
    grad_out: Tensor | None  # gradient of the output, N x K x output size (backward directions)
    call: Callable[[], Any]
    direction: str

    def run(self) -> Tensor:
        """One call, returning the tensor the direction computes."""
        out = self.call()
        if self.direction == "bwd-data":
            return out[0]
        if self.direction == "bwd-weight":
            return out[1]
        return out


@dataclass(frozen=True)
class ConvParams:
    """The parameters of a conv case (`BENCHMARK.params`)."""

    layer: str
    batch: int
    direction: str
    dtype: str
    layout: str
    search: bool


def measure(ctx: CaseContext, params: ConvParams) -> CaseResult:
    """Refuse what cannot run, check the result, time the first call, then the steady state."""
    import torch

    layer = parse_layer(params.layer)
    batch, dtype, direction = params.batch, params.dtype, params.direction
    layout, search = params.layout, params.search
    reason = unsupported_reason(ctx.device, dtype)
    if reason:  # a precision the device lacks: the case does not apply here
        raise CaseSkipped(reason)
    needed = tensor_bytes(layer, batch, DTYPES[dtype].bytes)
    memory = ctx.device.memory_bytes
    if memory and needed > MEMORY_HEADROOM * memory:
        raise CaseSkipped(
            f"needs about {needed / 2**30:.1f} GiB for its tensors; the device has "
            f"{memory / 2**30:.1f} GiB"
        )
    device = torch.device(ctx.device.torch_device)
    tolerance = TOLERANCE[dtype]
    databases = miopen_databases(os.environ) if ctx.device.platform == "rocm" else None

    with conv_settings(torch, search, dtype, ctx.device.platform) as mode:
        skip = mode.problem("conv") if mode is not None else None
        if skip:
            raise CaseSkipped(skip)
        deterministic = bool(torch.backends.cudnn.deterministic)

        def problem_key(n: int) -> tuple[object, ...]:
            return (ctx.device.torch_device, layer, n, dtype, layout, direction, deterministic)

        details: dict[str, Any] = {}
        small_batch = min(batch, CHECK_BATCH)
        if batch > CHECK_BATCH:  # else the full-size problem is small, checked in full below
            small = make_problem(torch, device, layer, small_batch, dtype, layout, direction,
                                 seed=1)
            algorithm_cache_note(ctx.device, problem_key(small_batch), _PROBLEMS_SEEN)
            small_error = relative_error(torch, small, small.run())
            _check(small_error, tolerance, dtype, f"batch {small_batch}")
            del small

        problem = make_problem(torch, device, layer, batch, dtype, layout, direction, seed=0)
        cache_note = algorithm_cache_note(ctx.device, problem_key(batch), _PROBLEMS_SEEN)
        # Timed before anything else runs this problem: with search on, this call searches.
        first_call, result = first_call_seconds(torch, ctx.device, problem.run)
        if batch <= CHECK_BATCH:
            small_error = relative_error(torch, problem, result)
            _check(small_error, tolerance, dtype, f"batch {batch}")
        elif direction != "bwd-weight":
            full_error = relative_error(torch, problem, result, image=0)
            _check(full_error, tolerance, dtype, f"image 0 of batch {batch}")
            details["check_rel_error_full"] = full_error
        output_format = memory_format_name(torch, result)
        del result

        timing = ctx.time(problem.call)
        flags = library_flags(torch)

    steady = timing.summary().median
    search_time = max(first_call - steady, 0.0)
    flop = layer.flop(batch)
    details.update({
        "layer": params.layer,
        "problem": layer.describe(),
        "dims": layer.dims,
        "batch": batch,
        "in_channels": layer.in_channels,
        "input_size": list(layer.size),
        "out_channels": layer.out_channels,
        "output_size": list(layer.output_size),
        "kernel": list(layer.kernel),
        "stride": list(layer.stride),
        "padding": list(layer.padding),
        "groups": layer.groups,
        "dilation": list(layer.dilation),
        "occurs_in_network": layer.occurs,
        "flop_per_call": flop,
        "flop_formula": FLOP_FORMULA,
        "op": OPS[direction].format(dims=layer.dims),
        "layout": layout,
        "output_memory_format": output_format,
        "first_call_s": first_call,
        "check_rel_error_small": small_error,
        "check_tolerance": tolerance,
        "check": (
            f"batch {small_batch} in full"
            + (f", and image 0 of batch {batch}" if "check_rel_error_full" in details else "")
            + ", against a float64 CPU reference"
        ),
        **library_settings(ctx.device, flags, os.environ),
    })
    if mode is not None:
        details.update(mode.details(("conv",)))
    search_note = search_warning(ctx.device, search, os.environ)
    if search:
        details["search_time_s"] = search_time
        details["search_time_formula"] = "first call - median steady-state call"
    details["algorithm_cache"] = "warm" if cache_note else "cold"
    if databases is not None:
        details["miopen_databases"] = databases
    figures = [Figure("first_call_time", first_call, "s", higher_is_better=False)]
    if search:
        figures.insert(0, Figure("search_time", search_time, "s", higher_is_better=False))
    return CaseResult(
        timing=timing,
        rates=(Rate("throughput", flop, "FLOP/s", ctx.peak_flops(dtype)),),
        figures=tuple(figures),
        details=details,
        warnings=tuple(note for note in (cache_note, search_note) if note),
    )


def algorithm_cache_note(
    device: DeviceInfo, key: tuple[object, ...], seen: set[tuple[object, ...]]
) -> str | None:
    """A warning when this process has run the problem before on a GPU, else None (and the
    problem is remembered): the algorithm then comes from PyTorch's per-process cache,
    whatever the search setting of this case."""
    if device.platform not in ("cuda", "rocm"):
        return None
    if key in seen:
        return (
            "algorithm from PyTorch's per-process cache: this worker ran the same problem "
            "before, so this case's search setting did not choose the algorithm and the "
            "first call did no search; measure it alone for a clean figure"
        )
    seen.add(key)
    return None


def tensor_bytes(layer: ConvLayer, batch: int, element_bytes: int) -> int:
    """Bytes of input, weight, output gradient and result of the largest direction."""
    inputs = batch * layer.in_channels * math.prod(layer.size)
    outputs = batch * layer.out_channels * math.prod(layer.output_size)
    weights = layer.out_channels * (layer.in_channels // layer.groups) * math.prod(layer.kernel)
    return element_bytes * (2 * inputs + outputs + 2 * weights)


@contextmanager
def conv_settings(torch: ModuleType, search: bool, dtype: str, platform: str = "cpu"
                  ) -> Iterator[MathMode | None]:
    """Set cudnn.benchmark to `search` and, for fp32, forbid TF32 for convolutions (read
    back: the MathMode, None for the half types); restore both after.

    A worker process runs many cases, so nothing set here may outlive the case.
    """
    cudnn = torch.backends.cudnn
    previous = cudnn.benchmark
    cudnn.benchmark = search
    try:
        if dtype != "fp32":
            yield None
            return
        with math_mode(torch, False, ("conv",), platform) as mode:
            yield mode
    finally:
        cudnn.benchmark = previous


def library_flags(torch: ModuleType) -> dict[str, Any]:
    """The PyTorch switches that decide how convolutions are chosen and computed."""
    cudnn = torch.backends.cudnn
    flags: dict[str, Any] = {
        "cudnn.enabled": bool(cudnn.enabled),
        "cudnn.benchmark": bool(cudnn.benchmark),
        "cudnn.deterministic": bool(cudnn.deterministic),
        # Not the legacy cudnn.allow_tf32: reading it raises once the per-op API is used.
        "cudnn.conv.fp32_precision": read_precision(torch, "conv"),
        "mkldnn.enabled": bool(torch.backends.mkldnn.enabled),
    }
    limit = getattr(cudnn, "benchmark_limit", None)
    if limit is not None:
        flags["cudnn.benchmark_limit"] = int(limit)
    miopen = getattr(torch.backends, "miopen", None)
    if miopen is not None and hasattr(miopen, "immediate"):
        flags["miopen.immediate"] = bool(miopen.immediate)
    return flags


def library_settings(
    device: DeviceInfo, flags: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """What to store with a result about the convolution library and its settings.

    A pure function of the device, the PyTorch flags and the environment, so the ROCm
    recording is tested with faked devices.
    """
    from accelbench.env.fingerprint import environment_switches

    platform = device.platform
    out: dict[str, Any] = {
        "conv_library": CONV_LIBRARY.get(platform, f"PyTorch's {platform} kernels"),
        "flags": {
            name: value
            for name, value in flags.items()
            if platform == "rocm" or not name.startswith("miopen.")
        },
        "algorithm_selection": _selection(platform, flags, environ),
    }
    if platform == "rocm":
        miopen = {
            name: value
            for name, value in environment_switches(environ).items()
            if name.startswith("MIOPEN_")
        }
        out["miopen_env"] = miopen
        out["miopen_find_mode"] = miopen.get("MIOPEN_FIND_MODE", "unset (MIOpen's default)")
        out["miopen_find_enforce"] = miopen.get("MIOPEN_FIND_ENFORCE", "unset (MIOpen's default)")
        out["miopen_user_db_path"] = miopen.get(
            "MIOPEN_USER_DB_PATH", "unset (MIOpen's default, under the home directory)"
        )
    return out


def _selection(platform: str, flags: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    benchmark = bool(flags.get("cudnn.benchmark"))
    if platform == "rocm":
        if flags.get("miopen.immediate"):
            return ("MIOpen immediate mode: a solution from the find database or heuristics, "
                    "no search (torch.backends.miopen.immediate)")
        if benchmark:
            mode = environ.get(FIND_MODE, "unset (MIOpen's default, DYNAMIC_HYBRID)")
            return ("MIOpen find with exhaustive search, once per problem per process "
                    f"(torch.backends.cudnn.benchmark), in find mode {mode}; results also "
                    "go to MIOpen's user find database; tuned kernel parameters come from "
                    "MIOpen's performance databases where they hold the problem")
        return ("MIOpen find without exhaustive search (the find mode decides; answers "
                "from the find database when it has them)")
    if platform == "cuda":
        if benchmark:
            return ("cuDNN benchmark: candidate algorithms timed once per problem per "
                    "process (torch.backends.cudnn.benchmark)")
        return "cuDNN heuristics, no search"
    library = CONV_LIBRARY.get(platform, f"PyTorch's {platform} kernels")
    return f"{library} picks its implementation itself; the search flag has no effect here"


def make_problem(
    torch: ModuleType,
    device: torch.device,
    layer: ConvLayer,
    batch: int,
    dtype: str,
    layout: str,
    direction: str,
    seed: int,
) -> ConvProblem:
    """Seeded inputs uniform in [-1, 1) in the layout asked for, and the bare call."""
    storage = getattr(torch, DTYPES[dtype].torch_name)
    generator = torch.Generator(device=device).manual_seed(seed)
    if layout == "channels-last":
        memory_format = torch.channels_last if layer.dims == 2 else torch.channels_last_3d
    else:
        memory_format = torch.contiguous_format

    def uniform(*shape: int) -> Tensor:
        x = torch.rand(*shape, generator=generator, device=device, dtype=storage)
        return x.mul_(2).sub_(1).contiguous(memory_format=memory_format)

    x = uniform(batch, layer.in_channels, *layer.size)
    w = uniform(layer.out_channels, layer.in_channels // layer.groups, *layer.kernel)
    stride, padding, dilation = list(layer.stride), list(layer.padding), list(layer.dilation)
    if direction == "fwd":
        conv = getattr(torch.nn.functional, f"conv{layer.dims}d")
        call = functools.partial(conv, x, w, None, stride, padding, dilation, layer.groups)
        return ConvProblem(layer, x, w, None, call, direction)
    grad_out = uniform(batch, layer.out_channels, *layer.output_size)
    mask = [direction == "bwd-data", direction == "bwd-weight", False]
    # The op autograd runs for a convolution's backward pass, asked for one gradient.
    call = functools.partial(
        torch.ops.aten.convolution_backward, grad_out, x, w, None, stride, padding,
        dilation, False, [0] * layer.dims, layer.groups, mask,
    )
    return ConvProblem(layer, x, w, grad_out, call, direction)


def reference(torch: ModuleType, problem: ConvProblem, image: int | None = None) -> Tensor:
    """The float64 CPU result of the problem's direction on the very same inputs."""
    layer = problem.layer

    def cpu64(t: Tensor, batched: bool = True) -> Tensor:
        if batched and image is not None:
            t = t[image : image + 1]
        return t.detach().cpu().to(torch.float64).contiguous()

    x, w = cpu64(problem.x), cpu64(problem.w, batched=False)
    stride, padding, dilation = list(layer.stride), list(layer.padding), list(layer.dilation)
    if problem.direction == "fwd":
        # The generic op rather than F.conv2d/conv3d, so the reference takes another route.
        return torch.ops.aten.convolution(x, w, None, stride, padding, dilation, False,
                                          [0] * layer.dims, layer.groups)
    assert problem.grad_out is not None  # made for both backward directions
    mask = [problem.direction == "bwd-data", problem.direction == "bwd-weight", False]
    grads = torch.ops.aten.convolution_backward(
        cpu64(problem.grad_out), x, w, None, stride, padding, dilation, False,
        [0] * layer.dims, layer.groups, mask,
    )
    return grads[0] if problem.direction == "bwd-data" else grads[1]


def relative_error(
    torch: ModuleType, problem: ConvProblem, result: Tensor, image: int | None = None
) -> float:
    """||result - ref|| / ||ref|| over the whole result, or one image of it."""
    want = reference(torch, problem, image)
    got = result if image is None else result[image : image + 1]
    got = got.detach().cpu().to(torch.float64)
    diff = float((got - want).square().sum())
    norm = float(want.square().sum())
    if norm == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return (diff / norm) ** 0.5


def first_call_seconds(
    torch: ModuleType, device: DeviceInfo, fn: Callable[[], Tensor]
) -> tuple[float, Tensor]:
    """Wall time of one call, device work included, and what it returned.

    Host time is what matters here: an algorithm search runs on the host, launching and
    timing candidate kernels.
    """
    sync: Callable[[], Any] = torch.cuda.synchronize if device.type == "cuda" else _nothing
    sync()
    start = time.perf_counter()
    result = fn()
    sync()
    return time.perf_counter() - start, result


def _nothing() -> None:
    return None


def memory_format_name(torch: ModuleType, t: Tensor) -> str:
    """How the library laid out its result: "channels-last", "nchw", "both" or "strided"."""
    last = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    channels_last, contiguous = t.is_contiguous(memory_format=last), t.is_contiguous()
    if channels_last and contiguous:
        return "both"  # sizes of 1 make the two layouts coincide
    if channels_last:
        return "channels-last"
    return "nchw" if contiguous else "strided"


def _check(error: float, tolerance: float, dtype: str, where: str) -> None:
    if not error <= tolerance:
        raise CaseFailed(
            f"wrong result: relative error {error:.3g} exceeds tolerance {tolerance:.3g} "
            f"for {dtype} ({where} checked against a float64 reference)"
        )


# MIOpen's find database, its tuning (performance) database and its compiled-kernel
# cache: on disk, kept across processes and runs.
MIOPEN_DATABASES = ("MIOPEN_USER_DB_PATH", "MIOPEN_CUSTOM_CACHE_DIR")


FIND_MODE = "MIOPEN_FIND_MODE"
# MIOpen's names and numbers for the find mode that benchmarks every solution.
NORMAL_FIND_MODES = ("normal", "1")


def miopen_worker_env(params: Mapping[str, Any], device: DeviceInfo) -> WorkerEnv:
    """On ROCm, each conv worker starts with MIOpen's databases in fresh empty folders:
    otherwise one search run's tuned kernels serve every later case, searched or not,
    and a rerun's search costs nothing. A search worker also starts in the NORMAL find
    mode, in which MIOpen benchmarks rather than answers from its (system) find database.
    What the user sets is theirs: their databases and find mode are kept."""
    if device.platform != "rocm":
        return NONE
    values = {FIND_MODE: "NORMAL"} if params.get("search") else {}
    return WorkerEnv.of(values, fresh_dirs=MIOPEN_DATABASES)


def search_warning(device: DeviceInfo, search: bool, environ: Mapping[str, str]
                   ) -> str | None:
    """A warning when a ROCm search ran outside MIOpen's NORMAL find mode (the user's
    setting, or no worker of accelbench's), else None."""
    if not search or device.platform != "rocm":
        return None
    mode = environ.get(FIND_MODE)
    if mode is not None and mode.strip().lower() in NORMAL_FIND_MODES:
        return None
    said = f"{FIND_MODE}={mode}" if mode is not None else \
        f"{FIND_MODE} unset (MIOpen's default, DYNAMIC_HYBRID)"
    return (f"search in {said} may answer from MIOpen's find database without searching; "
            f"set {FIND_MODE}=NORMAL for a searched result")


def miopen_databases(environ: Mapping[str, str]) -> dict[str, str]:
    """What each MIOpen database held when the case began: "cold" (a fresh folder of
    this worker, empty), "warm" (a fresh folder that earlier cases of this worker wrote
    to), "user's, reused" (a folder the user named) or MIOpen's default folder, which
    earlier runs may have filled."""
    fresh = set(filter(None, environ.get(FRESH_DIRS_VARIABLE, "").split(",")))
    out = {}
    for name in MIOPEN_DATABASES:
        path = environ.get(name)
        if path is None:
            out[name] = "unset: MIOpen's default folder, which earlier runs may have filled"
        elif name in fresh:
            try:
                entries = sum(1 for _ in os.scandir(path))
            except OSError:
                entries = 0
            out[name] = (f"warm: a fresh folder for this worker, holding {entries} entries "
                         "of earlier cases") if entries else "cold: a fresh empty folder"
        else:
            out[name] = f"user's, reused: {path}"
    return out


def search_worker_key(params: Mapping[str, Any]) -> str:
    """Search-on and search-off cases run in separate workers: once a process has chosen
    an algorithm for a problem, either way, PyTorch reuses it whatever the setting."""
    return "conv-search" if params["search"] else "conv-heuristic"


BENCHMARK = Benchmark(
    name="conv",
    family="micro",
    summary="Convolution throughput (FLOP/s) per layer of real networks, fwd and bwd, "
    "with and without algorithm search",
    entry="accelbench.benchmarks.micro.conv:measure",
    sources=("accelbench.benchmarks.micro.conv_shapes", "accelbench.benchmarks.mathmode"),
    params=(
        Param(
            "layer",
            "str",
            "resnet50.layer1.0.conv2",
            help="a named layer NETWORK.MODULE (resnet50, vgg16, densenet121, mobilenet_v2, "
            "resnext50_32x4d, r3d_18) or C:HxW:K:RxS[:STRIDE[:PAD[:GROUPS[:DILATION]]]]",
            check=layer_problem,
        ),
        Param("batch", "int", 32, help="images per call (N)", minimum=1),
        Param(
            "direction",
            "str",
            "fwd",
            help="forward, gradient of the input (bwd-data) or of the weight (bwd-weight)",
            choices=DIRECTIONS,
        ),
        Param("dtype", "str", "fp32", help="element type (fp32 without TF32)",
              choices=CONV_DTYPES),
        Param(
            "layout",
            "str",
            "nchw",
            help="memory layout of input, weight and gradients (NCDHW / NDHWC for 3-D)",
            choices=LAYOUTS,
        ),
        Param(
            "search",
            "bool",
            False,
            help="algorithm search: torch.backends.cudnn.benchmark (MIOpen find on ROCm)",
        ),
    ),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    worker_key=search_worker_key,
    worker_env=miopen_worker_env,
    views=("accelbench.benchmarks.micro.view:sections",),
    typed=ConvParams,
)
