"""Matrix multiply throughput, checked against a float64 reference before it is timed.

B is laid out column-major (the k x n transposed view of an n x k weight), the layout
`nn.Linear` hands to BLAS and the one `torch._scaled_mm` requires, so every dtype runs
the same problem. A fast result only counts if it is right: the same code path first
runs on a small case checked in full, then the full-size output is checked on a sampled
block; a relative error above the dtype's tolerance fails the case.

fp32 and tf32 set the matmul precision for the case and read it back (see
benchmarks.mathmode): a tf32 case whose TF32 is not in effect is skipped rather than
timed as fp32 against the TF32 peak. fp8 runs `torch._scaled_mm` with `use_fast_accum`
as `fast_accum` says (on by default, the usual forward-pass setting).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.mathmode import MathMode, math_mode, tf32_worker_env
from accelbench.benchmarks.micro.shapes import parse_shape, shape_problem
from accelbench.core.context import CaseContext
from accelbench.core.dtypes import DTYPES, fp8_torch_name, unsupported_reason
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor
    from torch import dtype as TorchDtype

GEMM_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")

# Largest accepted ||C - Cref|| / ||Cref|| against a float64 product of the same
# (already rounded) inputs: accumulation and output rounding only, with headroom.
TOLERANCE = {
    "fp64": 1e-12,
    "fp32": 1e-5,
    "tf32": 5e-3,  # inputs rounded to a 10-bit mantissa inside the matrix unit
    "fp16": 5e-3,
    "bf16": 2e-2,
    "fp8": 0.1,
    "int8": 0.0,  # int32 accumulation is exact
}

CHECK_MAX_DIM = 256  # the small case: min(dim, 256) per dimension, checked in full
CHECK_SAMPLE = 16  # rows and columns of the full-size output checked


@dataclass
class Operands:
    """Inputs and output of one GEMM, and the call that computes it into `out`."""

    a: Tensor  # (batch,) m x k
    b: Tensor  # (batch,) k x n, column-major
    out: Tensor  # (batch,) m x n
    call: Callable[[], Any]
    scale: float = 1.0  # product of the per-tensor fp8 scales


@dataclass(frozen=True)
class GemmParams:
    """The parameters of a GEMM case (`BENCHMARK.params`)."""

    shape: str
    dtype: str
    batch: int
    fast_accum: bool | None = None


def measure(ctx: CaseContext, params: GemmParams) -> CaseResult:
    """Refuse unsupported cases, check the result, then time the bare multiply."""
    import torch

    dtype, batch = params.dtype, params.batch
    m, n, k = parse_shape(params.shape)
    lacking = unsupported_reason(ctx.device, dtype)
    if lacking:  # a precision the device lacks: the case does not apply here
        raise CaseSkipped(lacking)
    reason = layout_problem(dtype, m, n, k, batch)
    if reason:
        raise CaseFailed(reason)
    device = torch.device(ctx.device.torch_device)
    fp8_name = fp8_torch_name(ctx.device)
    fast_accum = True if params.fast_accum is None else params.fast_accum  # given for fp8 only
    tolerance = TOLERANCE[dtype]

    with _precision(torch, dtype, ctx.device.platform) as mode:
        skip = mode.problem() if mode is not None else None
        if skip:
            raise CaseSkipped(skip)
        small_dims = (min(m, CHECK_MAX_DIM), min(n, CHECK_MAX_DIM), min(k, CHECK_MAX_DIM))
        small = make_operands(torch, device, dtype, *small_dims, min(batch, 2), 1, fp8_name,
                              fast_accum)
        small.call()
        small_error = relative_error(
            torch, small, torch.arange(small_dims[0]), torch.arange(small_dims[1])
        )
        _check(small_error, tolerance, dtype, "x".join(map(str, small_dims)))
        del small

        ops = make_operands(torch, device, dtype, m, n, k, batch, 0, fp8_name, fast_accum)
        ops.call()
        generator = torch.Generator().manual_seed(2)
        rows = torch.randperm(m, generator=generator)[:CHECK_SAMPLE]
        cols = torch.randperm(n, generator=generator)[:CHECK_SAMPLE]
        full_error = relative_error(torch, ops, rows, cols)
        _check(full_error, tolerance, dtype, f"{m}x{n}x{k}")

        timing = ctx.time(ops.call)

    flop = 2 * m * n * k * batch
    details: dict[str, Any] = {
        "m": m,
        "n": n,
        "k": k,
        "batch": batch,
        "flop_per_call": flop,
        "flop_formula": "2*m*n*k*batch",
        "op": _op_name(dtype, batch),
        "b_layout": "column-major (k x n view of an n x k weight, as nn.Linear)",
        "check_rel_error_small": small_error,
        "check_rel_error_full": full_error,
        "check_tolerance": tolerance,
        "check": (
            f"small case (min(dim, {CHECK_MAX_DIM})) in full and a {CHECK_SAMPLE}x{CHECK_SAMPLE} "
            "sampled block of the full-size output, against a float64 CPU reference"
        ),
    }
    if mode is not None:
        details.update(mode.details(("matmul",)))
    if dtype == "fp8":
        details.update(fp8_format=fp8_name, fp8_output="bfloat16", fp8_scaling="per-tensor",
                       fp8_fast_accum=fast_accum)
        if ctx.device.platform == "rocm":
            details["fp8_fast_accum_effect"] = (
                "none: PyTorch hands use_fast_accum to cuBLASLt only, not to hipBLASLt")
    return CaseResult(
        timing=timing,
        # Integer multiplies are operations, not floating-point ones (TOPS in datasheets).
        rates=(Rate("throughput", flop, "OP/s" if dtype == "int8" else "FLOP/s",
                    ctx.peak_flops(dtype)),),
        details=details,
    )


def layout_problem(dtype: str, m: int, n: int, k: int, batch: int) -> str | None:
    """Why the int8/fp8 kernels cannot take this shape, or None."""
    kernel = {"int8": "torch._int_mm", "fp8": "torch._scaled_mm"}.get(dtype)
    if kernel and batch > 1:
        return f"batched {dtype} GEMM is not measured: {kernel} takes 2-D matrices; use batch=1"
    if dtype == "int8" and (m <= 16 or n % 8 or k % 8):
        return (
            "int8 GEMM (torch._int_mm) needs m > 16 and n, k multiples of 8; "
            f"got m={m}, n={n}, k={k}"
        )
    if dtype == "fp8" and (n % 16 or k % 16):
        return f"fp8 GEMM (torch._scaled_mm) needs n and k multiples of 16; got n={n}, k={k}"
    return None


def _precision(torch: ModuleType, dtype: str, platform: str
               ) -> contextlib.AbstractContextManager[MathMode | None]:
    """TF32 on for tf32 and off for fp32 (restored after the case); other dtypes leave
    the float32 matmul precision alone."""
    if dtype not in ("fp32", "tf32"):
        return contextlib.nullcontext()
    return math_mode(torch, dtype == "tf32", ("matmul",), platform)


def make_operands(
    torch: ModuleType,
    device: torch.device,
    dtype: str,
    m: int,
    n: int,
    k: int,
    batch: int,
    seed: int,
    fp8_name: str = "float8_e4m3fn",
    fast_accum: bool = True,
) -> Operands:
    """Seeded inputs on the device, the output buffer, and the call writing into it.

    Float inputs are uniform in [-1, 1), so |C| <= k stays far inside fp16's range;
    int8 inputs lie in [-8, 8); fp8 inputs are scaled per tensor to fill e4m3's range,
    and `fast_accum` is `torch._scaled_mm`'s use_fast_accum.
    """
    generator = torch.Generator(device=device).manual_seed(seed)
    lead = (batch,) if batch > 1 else ()

    def uniform(*shape: int, storage: TorchDtype) -> Tensor:
        x = torch.rand(*lead, *shape, generator=generator, device=device, dtype=storage)
        return x.mul_(2).sub_(1)

    if dtype == "int8":
        a = torch.randint(-8, 8, (m, k), generator=generator, device=device, dtype=torch.int8)
        w = torch.randint(-8, 8, (n, k), generator=generator, device=device, dtype=torch.int8)
        out = torch.empty(m, n, device=device, dtype=torch.int32)
        b = w.t()
        return Operands(a, b, out, functools.partial(torch._int_mm, a, b, out=out))
    if dtype == "fp8":
        fp8 = getattr(torch, fp8_name)
        limit = torch.finfo(fp8).max
        a_hp, w_hp = uniform(m, k, storage=torch.float32), uniform(n, k, storage=torch.float32)
        scale_a = (a_hp.abs().amax() / limit).float()
        scale_b = (w_hp.abs().amax() / limit).float()
        a = (a_hp / scale_a).to(fp8)
        b = (w_hp / scale_b).to(fp8).t()
        out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        call = functools.partial(
            torch._scaled_mm, a, b, scale_a, scale_b, out_dtype=torch.bfloat16,
            use_fast_accum=fast_accum, out=out,
        )
        return Operands(a, b, out, call, scale=scale_a.item() * scale_b.item())
    storage = getattr(torch, DTYPES[dtype].torch_name)
    a = uniform(m, k, storage=storage)
    b = uniform(n, k, storage=storage).transpose(-1, -2)
    out = torch.empty(*lead, m, n, device=device, dtype=storage)
    if batch > 1:
        return Operands(a, b, out, functools.partial(torch.bmm, a, b, out=out))
    return Operands(a, b, out, functools.partial(torch.matmul, a, b, out=out))


def relative_error(torch: ModuleType, ops: Operands, rows: Tensor, cols: Tensor) -> float:
    """||C - Cref|| / ||Cref|| on the block (rows, cols) of the first and last batch.

    The reference is the float64 product, on the CPU, of the very inputs the device
    multiplied, so only the device's arithmetic is judged, not the input rounding.
    """
    if ops.out.dim() == 3:
        count = ops.out.shape[0]
        pairs = [(ops.a[i], ops.b[i], ops.out[i]) for i in sorted({0, count - 1})]
    else:
        pairs = [(ops.a, ops.b, ops.out)]
    diff = norm = 0.0
    for a, b, out in pairs:
        want = (_pick(torch, a, rows=rows) @ _pick(torch, b, cols=cols)) * ops.scale
        got = _pick(torch, out, rows=rows, cols=cols)
        diff += float((got - want).square().sum())
        norm += float(want.square().sum())
    if norm == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return (diff / norm) ** 0.5


def _pick(torch: ModuleType, x: Tensor, rows: Tensor | None = None,
          cols: Tensor | None = None) -> Tensor:
    """Select rows and columns of a matrix on its device; return them as CPU float64.

    fp8 tensors travel as raw bytes: indexing kernels need not support fp8.
    """
    raw = x.dtype.is_floating_point and x.element_size() == 1
    picked = x.view(torch.uint8) if raw else x
    if rows is not None:
        picked = picked.index_select(0, rows.to(x.device))
    if cols is not None:
        picked = picked.index_select(1, cols.to(x.device))
    picked = picked.cpu()
    return (picked.view(x.dtype) if raw else picked).to(torch.float64)


def _check(error: float, tolerance: float, dtype: str, where: str) -> None:
    if not error <= tolerance:
        raise CaseFailed(
            f"wrong result: relative error {error:.3g} exceeds tolerance {tolerance:.3g} "
            f"for {dtype} ({where} checked against a float64 reference)"
        )


def _op_name(dtype: str, batch: int) -> str:
    if dtype == "int8":
        return "torch._int_mm"
    if dtype == "fp8":
        return "torch._scaled_mm"
    return "torch.bmm" if batch > 1 else "torch.matmul"


BENCHMARK = Benchmark(
    name="gemm",
    family="micro",
    summary="Matrix multiply throughput (FLOP/s) per dtype, checked against float64 first",
    entry="accelbench.benchmarks.micro.gemm:measure",
    sources=("accelbench.benchmarks.micro.shapes", "accelbench.benchmarks.mathmode"),
    params=(
        Param(
            "shape",
            "str",
            "4096",
            help="N (square), MxNxK, or a named model shape such as llama-7b.gate-up",
            check=shape_problem,
        ),
        Param("dtype", "str", "fp32", help="element type of the multiply", choices=GEMM_DTYPES),
        Param("batch", "int", 1, help="independent GEMMs per call (torch.bmm when > 1)", minimum=1),
        Param(
            "fast_accum",
            "bool",
            True,
            help="fp8 only: torch._scaled_mm's use_fast_accum (cuBLASLt's fast accumulation; "
            "PyTorch does not pass it to hipBLASLt)",
            only_when=("dtype", ("fp8",)),
        ),
    ),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.micro.view:sections",),
    typed=GemmParams,
)
