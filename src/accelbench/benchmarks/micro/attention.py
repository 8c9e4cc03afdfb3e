"""Attention throughput: `scaled_dot_product_attention`, forward or forward and backward.

The backend is a parameter: `auto` lets PyTorch choose, `flash`, `efficient`, `cudnn` and
`math` force one through `torch.nn.attention.sdpa_kernel`. On ROCm the flash and
memory-efficient backends are AOTriton kernels, or composable_kernel (CK) ones when CK is
preferred (`torch.backends.cuda.preferred_rocm_fa_library`, TORCH_ROCM_FA_PREFER_CK); on
the CPU PyTorch has a flash kernel and the math path. The backend PyTorch actually
selects is asked of PyTorch's own dispatcher (`torch._fused_sdp_choice`) and recorded
with the implementing library. A forced backend that cannot run the case on this device
skips the case with PyTorch's reasons, which it gives as warnings.

FLOP per call, counting the two matrix multiplies (QK^T and PV) and nothing else:
  forward, non-causal:  4 * B * H * S^2 * D
  forward, causal:      4 * B * H * D * S * (S + 1) / 2  (only the unmasked pairs count)
  forward + backward:   3.5 * forward  (backward = 2.5 * forward: dV, dP, dQ, dK and the
                        recomputed QK^T are five multiplies against the forward's two)
The convention is the one FlashAttention's benchmarks use; softmax and masking are not
counted, and a backend that computes the masked half anyway gets no credit for it.

An fp32 case runs its matmuls in fp32, set and read back through `benchmarks.mathmode`
and recorded: the math backend's products go through cuBLAS/hipBLASLt, which use TF32
when PyTorch allows it, and TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (set in NVIDIA's
containers) makes that PyTorch's default. A case whose TF32 cannot be switched off is
skipped with the reason.

The fp32 tolerance is the same on every platform. It is not widened for ROCm's AOTriton
kernels: no source accelbench could cite states how far AOTriton's fp32 attention is
from an fp32 computation, so a larger error there is reported as a failed check with the
error measured, not absorbed into the tolerance.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.mathmode import MathMode, math_mode
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.dtypes import DTYPES, unsupported_reason
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor

ATTENTION_DTYPES = ("fp16", "bf16", "fp32")  # fp32 for CPUs and reference runs
BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")
PASSES = ("fwd", "fwd-bwd")
HEAD_DIMS = (32, 64, 80, 96, 128, 256)

# torch.nn.attention.SDPBackend member of each forced backend.
SDP_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}

# ||out - ref|| / ||ref|| against float64 on the same rounded inputs; gradients get twice.
TOLERANCE = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2}
GRAD_FACTOR = 2.0

CHECK_SEQ = 256  # the small case: batch 1, up to 2 heads, min(seq, CHECK_SEQ) tokens
CHECK_ROWS = 16  # query rows of the full-size output checked, in the first and last head
MEMORY_HEADROOM = 0.9

BACKWARD_FACTOR = 2.5
FLOP_FORMULAS = {
    ("fwd", False): "4 * B * H * S^2 * D",
    ("fwd", True): "4 * B * H * D * S * (S + 1) / 2",
    ("fwd-bwd", False): "3.5 * 4 * B * H * S^2 * D",
    ("fwd-bwd", True): "3.5 * 4 * B * H * D * S * (S + 1) / 2",
}

_UNAVAILABLE = ("No available kernel", "No viable backend")
ROCM_ENV_PREFIXES = ("TORCH_ROCM_", "AOTRITON_")


def attention_flop(batch: int, heads: int, seq: int, head_dim: int, causal: bool,
                   pass_: str) -> float:
    """FLOP of one call; see the module docstring for the convention."""
    pairs = seq * (seq + 1) / 2 if causal else seq * seq
    forward = 4 * batch * heads * head_dim * pairs
    return forward * (1 + BACKWARD_FACTOR) if pass_ == "fwd-bwd" else forward


def memory_estimate(batch: int, heads: int, seq: int, head_dim: int, element_bytes: int,
                    pass_: str, materialized: bool) -> int:
    """Bytes the case needs, roughly: Q, K, V and the output (and their gradients plus the
    log-sum-exp for fwd-bwd); the S x S scores and probabilities when `materialized`
    (the math backend)."""
    token = batch * heads * seq * head_dim * element_bytes
    total = 4 * token
    if pass_ == "fwd-bwd":
        total += 4 * token + batch * heads * seq * 4
    if materialized:
        total += batch * heads * seq * seq * element_bytes * (3 if pass_ == "fwd-bwd" else 2)
    return total


@dataclass(frozen=True)
class AttentionParams:
    """The parameters of an attention case (`BENCHMARK.params`; `pass` is `pass_`)."""

    batch: int
    heads: int
    seq: int
    head_dim: int
    causal: bool
    dtype: str
    backend: str
    pass_: str


def measure(ctx: CaseContext, params: AttentionParams) -> CaseResult:
    """Refuse what cannot run, check the result, then time the bare attention call."""
    import torch

    batch, heads, seq, head_dim = params.batch, params.heads, params.seq, params.head_dim
    dtype, backend, causal, pass_ = params.dtype, params.backend, params.causal, params.pass_
    reason = unsupported_reason(ctx.device, dtype)
    if reason:  # a precision the device lacks: the case does not apply here
        raise CaseSkipped(reason)
    element_bytes = DTYPES[dtype].bytes
    _check_memory(ctx.device, memory_estimate(batch, heads, seq, head_dim, element_bytes,
                                              pass_, materialized=backend == "math"))
    device = torch.device(ctx.device.torch_device)
    storage = getattr(torch, DTYPES[dtype].torch_name)
    tolerance = TOLERANCE[dtype]
    backward = pass_ == "fwd-bwd"

    with fp32_matmuls(torch, dtype, ctx.device.platform) as mode, \
            backend_context(torch, backend):
        skip = mode.problem("matmul") if mode is not None else None
        if skip:
            raise CaseSkipped(skip)
        small_heads, small_seq = min(heads, 2), min(seq, CHECK_SEQ)
        small = make_inputs(torch, device, storage, 1, small_heads, small_seq, head_dim,
                            backward, seed=1)
        # A forced backend that cannot run here skips the case before anything runs.
        selected_backend(torch, ctx.device, backend, small[:3], causal)
        errors = check_small(torch, small, causal, backward)
        for name, error in errors.items():
            limit = tolerance * (GRAD_FACTOR if name != "out" else 1.0)
            _check(error, limit, dtype, f"{name} of batch 1, {small_heads} heads, "
                   f"{small_seq} tokens")
        del small

        q, k, v, grad_out = make_inputs(torch, device, storage, batch, heads, seq, head_dim,
                                        backward, seed=0)
        used = selected_backend(torch, ctx.device, backend, (q, k, v), causal)  # full size
        if used == "math" and backend != "math":
            _check_memory(ctx.device, memory_estimate(batch, heads, seq, head_dim,
                                                      element_bytes, pass_, materialized=True))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        out = sdpa(q, k, v, is_causal=causal)  # with grad enabled, as the timed call
        full_error = sampled_error(torch, q, k, v, out, causal)
        _check(full_error, tolerance, dtype, f"{CHECK_ROWS} sampled rows of the full output")
        del out

        call: Callable[[], Any]
        if backward:
            def call() -> tuple[Tensor, ...]:
                return torch.autograd.grad(sdpa(q, k, v, is_causal=causal), (q, k, v), grad_out)
        else:
            call = functools.partial(sdpa, q, k, v, is_causal=causal)
        timing = ctx.time(call)

    flop = attention_flop(batch, heads, seq, head_dim, causal, pass_)
    details: dict[str, Any] = {
        "batch": batch,
        "heads": heads,
        "seq": seq,
        "head_dim": head_dim,
        "causal": causal,
        "pass": pass_,
        "layout": "B x H x S x D (contiguous)",
        "flop_per_call": flop,
        "flop_formula": FLOP_FORMULAS[(pass_, causal)],
        "flop_convention": (
            "the QK^T and PV matrix multiplies only; causal counts the S*(S+1)/2 unmasked "
            f"pairs; backward = {BACKWARD_FACTOR} x forward (five multiplies with the "
            "recomputed QK^T)"
        ),
        "op": "torch.nn.functional.scaled_dot_product_attention"
        + (" + torch.autograd.grad(q, k, v)" if backward else ""),
        "backend_requested": backend,
        "check_rel_errors_small": errors,
        "check_rel_error_full": full_error,
        "check_tolerance": tolerance,
        "check_tolerance_grads": tolerance * GRAD_FACTOR,
        "check": (
            f"batch 1, {small_heads} heads, {small_seq} tokens in full (output"
            + (" and gradients" if backward else "")
            + f") and {CHECK_ROWS} sampled query rows of the first and last head of the "
            "full output, against a float64 CPU reference"
        ),
        **backend_settings(ctx.device, used, _rocm_fa_preference(torch),
                           _ck_available(torch), os.environ, sdp_flags(torch)),
    }
    if mode is not None:
        details.update(mode.details(("matmul",)))
    flash_impl = _flash_impl(torch)
    if flash_impl:
        details["flash_impl"] = flash_impl
    return CaseResult(
        timing=timing,
        rates=(Rate("throughput", flop, "FLOP/s", ctx.peak_flops(dtype)),),
        details=details,
    )


def _check_memory(device: DeviceInfo, needed: int) -> None:
    memory = device.memory_bytes
    if memory and needed > MEMORY_HEADROOM * memory:
        raise CaseSkipped(
            f"needs about {needed / 2**30:.1f} GiB; the device has {memory / 2**30:.1f} GiB"
        )


@contextmanager
def fp32_matmuls(torch: ModuleType, dtype: str, platform: str) -> Iterator[MathMode | None]:
    """For fp32, TF32 off for matmuls for the case, read back (the MathMode), and the
    state found put back after; nothing for the half types."""
    if dtype != "fp32":
        yield None
        return
    with math_mode(torch, False, ("matmul",), platform) as mode:
        yield mode


@contextmanager
def backend_context(torch: ModuleType, backend: str) -> Iterator[None]:
    """Force one SDPA backend for the case (`auto`: PyTorch's own choice)."""
    if backend == "auto":
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(getattr(SDPBackend, SDP_BACKENDS[backend])):
        yield


def selected_backend(
    torch: ModuleType, device: DeviceInfo, backend: str, qkv: tuple[Tensor, ...], causal: bool
) -> str | None:
    """The backend PyTorch selects for these tensors under the flags in force, or None
    when this PyTorch cannot say. A forced backend that cannot run raises CaseSkipped
    with PyTorch's reasons."""
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return None if backend == "auto" else backend
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = int(choose(*qkv, None, 0.0, causal))
        except RuntimeError as exc:
            if backend == "auto" or not any(s in str(exc) for s in _UNAVAILABLE):
                raise
            reasons = [_strip(str(w.message)) for w in caught] or [_strip(str(exc))]
            raise CaseSkipped(unavailable_reason(device, backend, reasons)) from None
    return backend_name(torch, code)


def unavailable_reason(device: DeviceInfo, backend: str, reasons: list[str]) -> str:
    """One line: which backend, where, and PyTorch's reasons."""
    where = f"{device.name} ({device.arch or device.platform})"
    text = f"the {backend} attention backend cannot run this case on {where}: "
    text += " ".join(r if r[-1:] in ".:" else f"{r}." for r in dict.fromkeys(reasons) if r)
    if device.platform == "cpu" and backend in ("efficient", "cudnn"):
        text += " PyTorch has only the flash and math backends on the CPU."
    return text[:600]


def _strip(message: str) -> str:
    return message.split(" (Triggered internally at", 1)[0].strip()


def backend_name(torch: ModuleType, code: int) -> str | None:
    """accelbench's name of a torch.nn.attention.SDPBackend value."""
    from torch.nn.attention import SDPBackend

    for name, member in SDP_BACKENDS.items():
        if int(getattr(SDPBackend, member)) == code:
            return name
    return None


def backend_library(platform: str, backend: str | None, rocm_fa_library: str | None) -> str:
    """The library that implements `backend` on this platform."""
    if backend is None:
        return "unknown (this PyTorch does not report its choice)"
    if backend == "math":
        blas = {"rocm": "rocBLAS/hipBLASLt", "cuda": "cuBLAS"}.get(platform, "BLAS")
        return f"PyTorch math: unfused matmul + softmax ({blas})"
    if platform == "rocm":
        if backend in ("flash", "efficient"):
            if rocm_fa_library == "ck":
                return "composable_kernel (CK), preferred; AOTriton where CK lacks the operation"
            return "AOTriton"
        return f"{backend} (not expected on ROCm)"
    if platform == "cuda":
        return {
            "flash": "FlashAttention-2 kernels built into PyTorch",
            "efficient": "memory-efficient attention (xFormers CUTLASS kernels)",
            "cudnn": "cuDNN fused attention",
        }[backend]
    if platform == "cpu" and backend == "flash":
        return "PyTorch's CPU flash-attention kernel"
    return backend


def backend_settings(
    device: DeviceInfo,
    used: str | None,
    rocm_fa_library: str | None,
    ck_available: bool | None,
    environ: Mapping[str, str],
    flags: Mapping[str, bool],
) -> dict[str, Any]:
    """What to store with a result about the attention backend: a pure function of its
    inputs, so the ROCm recording is tested with faked devices."""
    out: dict[str, Any] = {
        "backend_used": used,
        "backend_library": backend_library(device.platform, used, rocm_fa_library),
        "sdp_enabled": dict(flags),
    }
    if device.platform == "rocm":
        out["rocm_fa_library"] = {
            None: "unknown",
            "default": "default (AOTriton)",
        }.get(rocm_fa_library, rocm_fa_library)
        out["ck_sdpa_available"] = ck_available
        out["rocm_attention_env"] = {
            name: environ[name] for name in sorted(environ) if name.startswith(ROCM_ENV_PREFIXES)
        }
    return out


def sdp_flags(torch: ModuleType) -> dict[str, bool]:
    """PyTorch's global SDPA backend switches, as they are outside any forcing."""
    cuda = torch.backends.cuda
    flags = {
        "flash": cuda.flash_sdp_enabled,
        "efficient": cuda.mem_efficient_sdp_enabled,
        "math": cuda.math_sdp_enabled,
        "cudnn": getattr(cuda, "cudnn_sdp_enabled", None),
    }
    return {name: bool(fn()) for name, fn in flags.items() if fn is not None}


def _rocm_fa_preference(torch: ModuleType) -> str | None:
    """"default", "aotriton" or "ck" on builds that know the setting, else None."""
    if not torch.version.hip:
        return None
    prefer = getattr(torch.backends.cuda, "preferred_rocm_fa_library", None)
    if prefer is None:
        return None
    try:
        value = prefer()
    except (RuntimeError, AttributeError):
        return None
    return str(value).rsplit(".", 1)[-1].lower()


def _flash_impl(torch: ModuleType) -> str | None:
    """An alternative flash implementation activated in PyTorch (such as FA3), if any."""
    current = getattr(torch.nn.attention, "current_flash_attention_impl", None)
    try:
        return None if current is None else current()
    except RuntimeError:
        return None


def _ck_available(torch: ModuleType) -> bool | None:
    check = getattr(torch.backends.cuda, "is_ck_sdpa_available", None)
    if check is None or not torch.version.hip:
        return None
    try:
        return bool(check())
    except RuntimeError:
        return None


def make_inputs(
    torch: ModuleType, device: torch.device, storage: torch.dtype, batch: int, heads: int,
    seq: int, head_dim: int, backward: bool, seed: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Seeded standard-normal Q, K, V (B x H x S x D) and, for backward, the output
    gradient."""
    generator = torch.Generator(device=device).manual_seed(seed)

    def normal() -> Tensor:
        return torch.randn(batch, heads, seq, head_dim, generator=generator, device=device,
                           dtype=storage)

    q, k, v = normal(), normal(), normal()
    grad_out = normal() if backward else None
    if backward:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v, grad_out


def reference_attention(torch: ModuleType, q: Tensor, k: Tensor, v: Tensor, causal: bool,
                        rows: Tensor | None = None) -> Tensor:
    """softmax(Q K^T / sqrt(D) + causal mask) V in float64 on the CPU, for all query
    rows or the given ones; differentiable when the inputs are float64 leaves."""
    q, k, v = (t.cpu().to(torch.float64) for t in (q, k, v))
    seq = k.shape[-2]
    positions = torch.arange(q.shape[-2]) if rows is None else rows
    if rows is not None:
        q = q[..., rows, :]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        masked = torch.arange(seq)[None, :] > positions[:, None]
        scores = scores.masked_fill(masked, float("-inf"))
    return scores.softmax(-1) @ v


def check_small(torch: ModuleType, inputs: tuple[Tensor, Tensor, Tensor, Tensor | None],
                causal: bool, backward: bool) -> dict[str, float]:
    """Relative errors of the output (and of dQ, dK, dV) against float64 autograd."""
    q, k, v, grad_out = inputs
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out = sdpa(q, k, v, is_causal=causal)
    errors = {}
    if not backward:
        want = reference_attention(torch, q.detach(), k.detach(), v.detach(), causal)
        errors["out"] = _rel(torch, out, want)
        return errors
    assert grad_out is not None  # made whenever the backward pass is
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    leaves = [t.detach().cpu().to(torch.float64).requires_grad_() for t in (q, k, v)]
    want = reference_attention(torch, leaves[0], leaves[1], leaves[2], causal)
    want_grads = torch.autograd.grad(want, leaves, grad_out.cpu().to(torch.float64))
    errors["out"] = _rel(torch, out, want)
    for name, got, ref in zip(("dq", "dk", "dv"), grads, want_grads, strict=True):
        errors[name] = _rel(torch, got, ref)
    return errors


def sampled_error(torch: ModuleType, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
                  causal: bool) -> float:
    """Relative error of CHECK_ROWS random query rows in the first and last (batch, head)."""
    seq = q.shape[-2]
    rows = torch.randperm(seq, generator=torch.Generator().manual_seed(2))[:CHECK_ROWS]
    diff = norm = 0.0
    for b, h in sorted({(0, 0), (q.shape[0] - 1, q.shape[1] - 1)}):
        want = reference_attention(
            torch, q[b, h].detach(), k[b, h].detach(), v[b, h].detach(), causal, rows
        )
        got = out[b, h].detach().index_select(0, rows.to(out.device)).cpu().to(torch.float64)
        diff += float((got - want).square().sum())
        norm += float(want.square().sum())
    return (diff / norm) ** 0.5 if norm else (0.0 if diff == 0.0 else float("inf"))


def _rel(torch: ModuleType, got: Tensor, want: Tensor) -> float:
    got = got.detach().cpu().to(torch.float64)
    norm = float(want.detach().square().sum())
    diff = float((got - want.detach()).square().sum())
    return (diff / norm) ** 0.5 if norm else (0.0 if diff == 0.0 else float("inf"))


def _check(error: float, tolerance: float, dtype: str, where: str) -> None:
    if not error <= tolerance:
        raise CaseFailed(
            f"wrong result: relative error {error:.3g} exceeds tolerance {tolerance:.3g} "
            f"for {dtype} ({where} checked against a float64 reference)"
        )


BENCHMARK = Benchmark(
    name="attention",
    family="micro",
    summary="scaled_dot_product_attention throughput (FLOP/s) per backend, fwd or fwd+bwd",
    entry="accelbench.benchmarks.micro.attention:measure",
    sources=("accelbench.benchmarks.mathmode",),
    params=(
        Param("batch", "int", 4, help="sequences per call (B)", minimum=1),
        Param("heads", "int", 16, help="attention heads (H)", minimum=1),
        Param("seq", "int", 2048, help="sequence length (S), queries and keys",
              minimum=16, maximum=131072),
        Param("head_dim", "int", 128, help="dimension of each head (D)", choices=HEAD_DIMS),
        Param("causal", "bool", True, help="causal (lower-triangular) mask"),
        Param("dtype", "str", "bf16", help="element type of Q, K, V", choices=ATTENTION_DTYPES),
        Param(
            "backend",
            "str",
            "auto",
            help="auto (PyTorch's choice) or force flash, efficient (memory-efficient), "
            "cudnn or math; AOTriton/CK on ROCm",
            choices=BACKENDS,
        ),
        Param("pass", "str", "fwd", help="forward only, or forward and backward",
              choices=PASSES),
    ),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    views=("accelbench.benchmarks.micro.view:sections",),
    typed=AttentionParams,
)
