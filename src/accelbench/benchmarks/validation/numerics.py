"""Numerics per precision: each op on the device against float64 on the CPU, on the very
same (already rounded) inputs, so only the device's arithmetic is judged.

What rtol is relative to (see `verdict`), per op, writing abs() for elementwise
absolute values:

- matmul, bmm (torch.matmul, torch.bmm; fp8: torch._scaled_mm): abs(A) @ abs(B);
- addmm (torch.addmm(C, A, B, beta=0.5, alpha=2)): 0.5 abs(C) + 2 abs(A) @ abs(B);
- conv-fwd, conv-bwd-data, conv-bwd-weight (F.conv2d and its autograd backward): the
  same op on abs(x), abs(w), abs(grad);
- sdpa-math, sdpa-flash, sdpa-efficient, sdpa-cudnn (F.scaled_dot_product_attention,
  causal, with that backend forced, forward and backward): P @ abs(V) and the gradients'
  analogues, times 1 + 2 max(abs(Q) @ abs(K)^T / sqrt(D)), since exp turns a score's
  rounding error into a relative error of its probability;
- sum (over rows and in total): the sum of abs(x);
- layer-norm (F.layer_norm with weight and bias):
  (abs(x) + abs(mean) + abs(x - mean)) / std * abs(w) + abs(b);
- softmax, exp, log, tanh, sigmoid, erf: abs(expected), torch.testing's own rule.

Each magnitude is the size of what the result combines, so a rounding error of the
dtype is judged against what it could be, not against a result that cancelled to near
zero. The float64 reference takes another route where one exists (the `@` operator,
aten.convolution, an explicit attention and layer norm).

Tolerances are verdict's per dtype, with one stated widening: fp32 convolutions on a
GPU allow WINOGRAD_FACTOR times as much. cuDNN and MIOpen run fp32 3x3 convolutions
through Winograd algorithms where they are fastest (MIOpen's developers describe
Winograd as trading numerical accuracy for speed, in ROCm/rocm-libraries#3508), and
Winograd's rounding error grows with its tile (Barabasz et al., "Error analysis and
improving the accuracy of Winograd convolution for deep neural networks", ACM TOMS
2020): a correct float32 F(4,3) reaches 1.5 times torch.testing's fp32 tolerance on this
check's own inputs, F(6,3) 2.9 times (tests/validation/test_numerics.py computes both).
On the CPU, where PyTorch runs oneDNN's direct convolution, the check stays strict.

tf32 runs only where it changes something (products and convolutions, TF32 on), fp8
only on matmul (torch._scaled_mm); other pairs are skipped with that reason. A tf32
result on a GPU whose error stays within fp32's tolerance is noted: TF32 did not take
effect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.mathmode import tf32_worker_env
from accelbench.benchmarks.validation.modes import math_mode, require_precision, storage
from accelbench.benchmarks.validation.verdict import (
    TOLERANCE_SCALE,
    compare,
    conclude,
    tensors_verdict,
    tolerance_for,
)
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor

NUMERICS_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
MATRIX_OPS = ("matmul", "bmm", "addmm", "conv-fwd", "conv-bwd-data", "conv-bwd-weight",
              "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn")
OTHER_OPS = ("sum", "softmax", "layer-norm", "exp", "log", "tanh", "sigmoid", "erf")
OPS = MATRIX_OPS + OTHER_OPS

# Problem sizes: small enough for a CPU to check in milliseconds, large enough that a GPU
# runs its real kernels (tensor cores, split reductions).
MATMUL = (256, 256, 512)  # m, n, k
BMM_BATCH = 4
CONV = (4, 32, 28, 64)  # batch, in channels, height = width, out channels; 3x3, padding 1
SDPA = (1, 2, 128, 64)  # batch, heads, sequence, head dim; causal
ROWS = (256, 1024)  # sum, softmax, layer norm
ELEMENTS = 1 << 16
# fp32 convolutions on GPUs: room for the Winograd algorithms of cuDNN and MIOpen (above).
WINOGRAD_FACTOR = 4.0
WINOGRAD_WHY = ("fp32 3x3 convolutions may run through cuDNN's or MIOpen's Winograd "
                "algorithms, whose rounding error grows with the tile (F(6,3): 2.9x)")
LAYER_NORM_EPS = 1e-5
# Inputs of the elementwise functions: where each is well defined and well conditioned.
DOMAINS = {"exp": (-4.0, 4.0), "log": (-4.6, 2.3), "tanh": (-5.0, 5.0),
           "sigmoid": (-8.0, 8.0), "erf": (-3.0, 3.0)}


@dataclass(frozen=True)
class Compared:
    """A result, its float64 reference, and what rtol is relative to (None: |ref|)."""

    name: str
    actual: Tensor
    expected: Tensor
    magnitude: Tensor | None = None
    magnitude_name: str = "|expected|"


def not_checked(op: str, dtype: str) -> str | None:
    """Why `op` is not checked in `dtype` (a skip), or None."""
    if dtype == "tf32" and op not in MATRIX_OPS:
        return (f"tf32 changes only matrix products and convolutions; {op} runs in fp32 "
                "arithmetic, checked under fp32")
    if dtype == "fp8" and op != "matmul":
        return f"fp8 is checked on matmul (torch._scaled_mm); PyTorch has no fp8 {op}"
    return None


@dataclass(frozen=True)
class NumericsParams:
    """The parameters of a numerics case (`BENCHMARK.params`)."""

    op: str
    dtype: str
    tolerance_scale: float


def measure(ctx: CaseContext, params: NumericsParams) -> CaseResult:
    """Run the op on the device, compare each result with float64, conclude."""
    op, dtype = params.op, params.dtype
    reason = not_checked(op, dtype)
    if reason:
        raise CaseSkipped(reason)
    require_precision(ctx.device, dtype)
    import torch

    device = torch.device(ctx.device.torch_device)
    with math_mode(torch, dtype) as mode:
        results = _CHECKS[_family(op)](torch, ctx, device, op, dtype)
    factor, why = tolerance_factor(ctx.device, op, dtype)
    tolerance = tolerance_for(dtype, params.tolerance_scale, factor, why)
    compared = [compare(torch, r.name, r.actual, r.expected, tolerance, r.magnitude,
                        r.magnitude_name) for r in results]
    verdict = tensors_verdict(compared, tolerance, f"{op} in {dtype}")
    details: dict[str, Any] = {"op": op, "math_mode": mode, "reference":
                               "float64 on the CPU, on the same inputs"}
    if dtype == "tf32" and ctx.device.type != "cpu":
        details["tf32_took_effect"] = not _within_fp32(torch, results,
                                                       *tolerance_factor(ctx.device, op,
                                                                         "fp32"))
        if not details["tf32_took_effect"]:
            verdict = replace(verdict, warnings=(
                "tf32: TF32 was allowed, yet every error is within fp32's tolerance: TF32 "
                "rounding did not take effect",))
    return conclude(verdict, details)


def tolerance_factor(device: DeviceInfo, op: str, dtype: str) -> tuple[float, str]:
    """How much more than the dtype's tolerance this check allows, and why (1: none)."""
    if dtype == "fp32" and op.startswith("conv-") and device.platform in ("cuda", "rocm"):
        return WINOGRAD_FACTOR, WINOGRAD_WHY
    return 1.0, ""


def _within_fp32(torch: ModuleType, results: list[Compared], factor: float = 1.0,
                 why: str = "") -> bool:
    fp32 = tolerance_for("fp32", factor=factor, why=why)
    return all(compare(torch, r.name, r.actual, r.expected, fp32, r.magnitude).passed
               for r in results)


def _family(op: str) -> str:
    if op.startswith("conv-"):
        return "conv"
    if op.startswith("sdpa-"):
        return "sdpa"
    if op in DOMAINS:
        return "elementwise"
    return op


def _cpu64(torch: ModuleType, t: Tensor) -> Tensor:
    return t.detach().to("cpu").to(torch.float64)


def _uniform(torch: ModuleType, generator: Any, device: torch.device, dtype: torch.dtype,
             *shape: int, low: float = -1.0, high: float = 1.0) -> Tensor:
    x = torch.rand(*shape, generator=generator, device=device, dtype=torch.float32)
    return (x * (high - low) + low).to(dtype)


def _generator(torch: ModuleType, device: torch.device, seed: int = 0) -> Any:
    return torch.Generator(device=device).manual_seed(seed)


# -- the ops ---------------------------------------------------------------------------


def _products(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
              dtype: str) -> list[Compared]:
    """matmul and bmm through accelbench's GEMM operands (fp8 through torch._scaled_mm)."""
    from accelbench.benchmarks.micro.gemm import make_operands
    from accelbench.core.dtypes import fp8_torch_name

    m, n, k = MATMUL
    batch = BMM_BATCH if op == "bmm" else 1
    ops = make_operands(torch, device, dtype, m, n, k, batch, 0, fp8_torch_name(ctx.device))
    ops.call()
    a, b = _cpu64(torch, ops.a), _cpu64(torch, ops.b)
    want = (a @ b) * ops.scale
    size = (a.abs() @ b.abs()) * ops.scale
    return [Compared("out", ops.out, want, size, "|A| @ |B|")]


def _addmm(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
           dtype: str) -> list[Compared]:
    m, n, k = MATMUL
    kind, gen = storage(torch, ctx.device, dtype), _generator(torch, device)
    a, b = _uniform(torch, gen, device, kind, m, k), _uniform(torch, gen, device, kind, k, n)
    c = _uniform(torch, gen, device, kind, m, n)
    out = torch.addmm(c, a, b, beta=0.5, alpha=2.0)
    a64, b64, c64 = (_cpu64(torch, t) for t in (a, b, c))
    want = 0.5 * c64 + 2.0 * (a64 @ b64)
    size = 0.5 * c64.abs() + 2.0 * (a64.abs() @ b64.abs())
    return [Compared("out", out, want, size, "0.5 |C| + 2 |A| @ |B|")]


def _conv(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
          dtype: str) -> list[Compared]:
    batch, channels, side, out_channels = CONV
    kind, gen = storage(torch, ctx.device, dtype), _generator(torch, device)
    x = _uniform(torch, gen, device, kind, batch, channels, side, side)
    w = _uniform(torch, gen, device, kind, out_channels, channels, 3, 3)
    g = _uniform(torch, gen, device, kind, batch, out_channels, side, side)
    conv2d = torch.nn.functional.conv2d
    if op == "conv-fwd":
        results: tuple[Tensor, ...] = (conv2d(x, w, None, 1, 1),)
    else:
        x.requires_grad_()
        w.requires_grad_()
        results = torch.autograd.grad(conv2d(x, w, None, 1, 1), (x, w), g)
    x64, w64, g64 = (_cpu64(torch, t) for t in (x, w, g))
    want, size = (_conv_reference(torch, op, *inputs)
                  for inputs in ((x64, w64, g64), (x64.abs(), w64.abs(), g64.abs())))
    got = {"conv-fwd": results[0], "conv-bwd-data": results[0], "conv-bwd-weight": results[-1]}
    name = {"conv-fwd": "output", "conv-bwd-data": "grad_input",
            "conv-bwd-weight": "grad_weight"}[op]
    return [Compared(name, got[op], want, size, "the same op on |x|, |w|, |grad|")]


def _conv_reference(torch: ModuleType, op: str, x: Tensor, w: Tensor, g: Tensor) -> Tensor:
    """The float64 result through the generic aten ops, not F.conv2d's route."""
    stride, padding, dilation = [1, 1], [1, 1], [1, 1]
    if op == "conv-fwd":
        out: Tensor = torch.ops.aten.convolution(x, w, None, stride, padding, dilation,
                                                 False, [0, 0], 1)
        return out
    grads = torch.ops.aten.convolution_backward(g, x, w, None, stride, padding, dilation,
                                                False, [0, 0], 1, [True, True, False])
    return grads[0] if op == "conv-bwd-data" else grads[1]


def _sdpa(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
          dtype: str) -> list[Compared]:
    """Forward and backward with one backend forced; a backend PyTorch cannot run here
    is skipped with PyTorch's reasons."""
    from accelbench.benchmarks.micro.attention import backend_context, selected_backend

    batch, heads, seq, dim = SDPA
    backend = op.removeprefix("sdpa-")
    kind = storage(torch, ctx.device, dtype)
    gen = torch.Generator(device=device).manual_seed(0)

    def normal() -> Tensor:
        return torch.randn(batch, heads, seq, dim, generator=gen, device=device,
                           dtype=torch.float32).to(kind)

    q, k, v, g = normal(), normal(), normal(), normal()
    for t in (q, k, v):
        t.requires_grad_()
    with backend_context(torch, backend):
        selected_backend(torch, ctx.device, backend, (q, k, v), True)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        grads = torch.autograd.grad(out, (q, k, v), g)
    wanted, sizes = _attention_reference(torch, q, k, v, g)
    where = "P @ |V| and the gradients' analogues, x (1 + 2 max |S|)"
    return [Compared(name, got, want, size, where) for name, got, want, size in
            zip(("output", "grad_q", "grad_k", "grad_v"), (out, *grads), wanted, sizes,
                strict=True)]


def _attention_reference(torch: ModuleType, q: Tensor, k: Tensor, v: Tensor, g: Tensor
                         ) -> tuple[list[Tensor], list[Tensor]]:
    """The float64 output and gradients of causal attention, and their magnitudes."""
    from accelbench.benchmarks.micro.attention import reference_attention

    leaves = [_cpu64(torch, t).requires_grad_() for t in (q, k, v)]
    g64 = _cpu64(torch, g)
    out = reference_attention(torch, leaves[0], leaves[1], leaves[2], True)
    grads = torch.autograd.grad(out, leaves, g64)
    q64, k64, v64 = (t.detach() for t in leaves)
    scale = 1.0 / math.sqrt(q64.shape[-1])
    seq = q64.shape[-2]
    scores = (q64 @ k64.transpose(-2, -1)) * scale
    masked = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    probs = scores.masked_fill(masked, float("-inf")).softmax(-1)
    # A score's rounding error becomes a relative error of its probability through exp.
    factor = 1.0 + 2.0 * float(((q64.abs() @ k64.abs().transpose(-2, -1)) * scale).max())
    dp = g64.abs() @ v64.abs().transpose(-2, -1)
    ds = probs * (dp + (probs * dp).sum(-1, keepdim=True))
    sizes = [probs @ v64.abs(), ds @ k64.abs() * scale, ds.transpose(-2, -1) @ q64.abs() * scale,
             probs.transpose(-2, -1) @ g64.abs()]
    return [out.detach(), *grads], [s * factor for s in sizes]


def _sum(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
         dtype: str) -> list[Compared]:
    x = _uniform(torch, _generator(torch, device), device, storage(torch, ctx.device, dtype),
                 *ROWS)
    rows, total = torch.sum(x, dim=-1), torch.sum(x)
    x64 = _cpu64(torch, x)
    return [Compared("row sums", rows, x64.sum(-1), x64.abs().sum(-1), "the sum of |x|"),
            Compared("total", total, x64.sum(), x64.abs().sum(), "the sum of |x|")]


def _softmax(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
             dtype: str) -> list[Compared]:
    x = _uniform(torch, _generator(torch, device), device, storage(torch, ctx.device, dtype),
                 *ROWS, low=-4.0, high=4.0)
    return [Compared("output", torch.softmax(x, dim=-1), torch.softmax(_cpu64(torch, x), -1))]


def _layer_norm(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
                dtype: str) -> list[Compared]:
    kind, gen = storage(torch, ctx.device, dtype), _generator(torch, device)
    x = _uniform(torch, gen, device, kind, *ROWS, low=-1.5, high=2.5)  # mean away from 0
    w = _uniform(torch, gen, device, kind, ROWS[1])
    b = _uniform(torch, gen, device, kind, ROWS[1])
    out = torch.nn.functional.layer_norm(x, (ROWS[1],), w, b, LAYER_NORM_EPS)
    x64, w64, b64 = (_cpu64(torch, t) for t in (x, w, b))
    mean = x64.mean(-1, keepdim=True)
    inv_std = 1.0 / (x64.var(-1, unbiased=False, keepdim=True) + LAYER_NORM_EPS).sqrt()
    want = (x64 - mean) * inv_std * w64 + b64
    size = (x64.abs() + mean.abs() + (x64 - mean).abs()) * inv_std * w64.abs() + b64.abs()
    return [Compared("output", out, want, size,
                     "(|x| + |mean| + |x - mean|) / std * |w| + |b|")]


def _elementwise(torch: ModuleType, ctx: CaseContext, device: torch.device, op: str,
                 dtype: str) -> list[Compared]:
    low, high = DOMAINS[op]
    x = _uniform(torch, _generator(torch, device), device, storage(torch, ctx.device, dtype),
                 ELEMENTS, low=low, high=high)
    if op == "log":  # log-uniform inputs from e^-4.6 to e^2.3
        x = torch.exp(x.float()).to(x.dtype)
    fn = getattr(torch, op)
    return [Compared("output", fn(x), fn(_cpu64(torch, x)))]


_CHECKS: dict[str, Callable[[ModuleType, CaseContext, Any, str, str], list[Compared]]] = {
    "matmul": _products, "bmm": _products, "addmm": _addmm, "conv": _conv, "sdpa": _sdpa,
    "sum": _sum, "softmax": _softmax, "layer-norm": _layer_norm, "elementwise": _elementwise,
}


BENCHMARK = Benchmark(
    name="numerics",
    family="validation",
    summary="Numerics per precision against float64 on the same inputs: matmul, bmm, "
    "addmm, convolution (forward, both backward passes), SDPA per backend, sum, softmax, "
    "layer norm, transcendental functions",
    entry="accelbench.benchmarks.validation.numerics:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes"),
    params=(
        Param("op", "str", "matmul", help="the operation checked", choices=OPS),
        Param("dtype", "str", "fp32", help="precision of the inputs and the arithmetic",
              choices=NUMERICS_DTYPES),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=120.0,
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=NumericsParams,
)
