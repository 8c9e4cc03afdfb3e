"""Determinism: with deterministic algorithms requested, the same seeded computation run
twice gives bit-identical results.

torch.use_deterministic_algorithms(True), cudnn.deterministic and no cuDNN benchmark are
in force while the check runs (and restored after). On CUDA cuBLAS needs the workspace
setting PyTorch's reproducibility notes ask for (CUBLAS_WORKSPACE_CONFIG :4096:8 or
:16:8), and it reads it when it creates a handle: setting it inside a case would come
after any handle the worker already made (an earlier case, in a worker that runs many)
while PyTorch's own test of the variable, which reads it afresh, would pass. So a CUDA
determinism worker starts with :4096:8 in its environment (`cublas_worker_env`), the
check never sets it itself, and a value that is not deterministic (the user's own,
which is kept) skips the check with the reason. The ops are
those whose fast paths accumulate in an order that can vary from run to run on a GPU:
products, convolution gradients, index_add, embedding-bag gradients, attention and its
gradients. An op that PyTorch has no deterministic implementation of here is skipped
with PyTorch's own words (max-unpool has none on any device).

Results are compared bit by bit: the error is the number of elements that differ.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.validation.modes import math_mode, require_precision, storage
from accelbench.benchmarks.validation.verdict import conclude, exact_verdict
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult, CaseSkipped, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark
from accelbench.core.worker_env import NONE, WorkerEnv

if TYPE_CHECKING:
    import torch
    from torch import Tensor

DETERMINISM_OPS = ("matmul", "conv", "index-add", "embedding-bag", "sdpa", "max-unpool")
DETERMINISM_DTYPES = ("fp32", "fp16", "bf16")
CUBLAS_CONFIG = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")
_NO_DETERMINISTIC = "does not have a deterministic implementation"


@dataclass(frozen=True)
class DeterminismParams:
    """The parameters of a determinism case (`BENCHMARK.params`)."""

    op: str
    dtype: str


def measure(ctx: CaseContext, params: DeterminismParams) -> CaseResult:
    op, dtype = params.op, params.dtype
    require_precision(ctx.device, dtype)
    reason = cublas_config_problem(ctx.device, os.environ)
    if reason:
        raise CaseSkipped(reason)
    import torch

    device = torch.device(ctx.device.torch_device)
    kind = storage(torch, ctx.device, dtype)
    compute = _OPS[op]
    with deterministic(torch) as settings, math_mode(torch, dtype):
        try:
            first = compute(torch, device, kind)
            second = compute(torch, device, kind)
        except RuntimeError as exc:
            if _NO_DETERMINISTIC not in str(exc):
                raise
            raise CaseSkipped(f"PyTorch has no deterministic implementation of {op} on "
                              f"{ctx.device.type}: {pytorch_reason(exc)}") from None
    differing, total, largest = 0, 0, 0.0
    for (_, a), (_, b) in zip(first, second, strict=True):
        wrong = int((_bits(torch, a) != _bits(torch, b)).sum())
        differing += wrong
        total += a.numel()
        if wrong:
            largest = max(largest, float((a.double() - b.double()).abs().max()))
    names = ", ".join(name for name, _ in first)
    verdict = exact_verdict(
        differing, "elements",
        f"not deterministic: {op} in {dtype} gave {differing} of {total} elements different "
        f"the second time ({names}; largest difference {largest:.3g}), with deterministic "
        "algorithms requested", extra=(Figure("elements", float(total), "elements"),))
    return conclude(verdict, {"op": op, "compared": names, "settings": settings,
                              "comparison": "bit for bit, two runs from the same seed"})


def pytorch_reason(exc: BaseException) -> str:
    """PyTorch's sentence saying which operation has no deterministic implementation."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    end = text.find("True)'.")
    return text[:end + len("True)'.")] if end >= 0 else text[:300]


def cublas_worker_env(params: Mapping[str, Any], device: DeviceInfo) -> WorkerEnv:
    """A CUDA determinism worker starts with cuBLAS's deterministic workspace setting,
    before anything in it can create a cuBLAS handle; the user's own value is kept."""
    if device.platform != "cuda":
        return NONE
    return WorkerEnv.of({CUBLAS_CONFIG: CUBLAS_DETERMINISTIC[0]})


def cublas_config_problem(device: DeviceInfo, environ: Mapping[str, str]) -> str | None:
    """Why a CUDA check cannot expect deterministic cuBLAS results here, or None."""
    value = environ.get(CUBLAS_CONFIG)
    if device.platform != "cuda" or value in CUBLAS_DETERMINISTIC:
        return None
    said = "unset" if value is None else repr(value)
    return (f"{CUBLAS_CONFIG} is {said} in this worker, not one of the deterministic "
            f"settings {' or '.join(CUBLAS_DETERMINISTIC)}: cuBLAS reads it when it creates "
            "a handle, so it must be in the worker's environment from its start (accelbench "
            f"starts determinism workers with {CUBLAS_DETERMINISTIC[0]} unless the variable "
            "is already set)")


@contextlib.contextmanager
def deterministic(torch: ModuleType) -> Iterator[dict[str, Any]]:
    """Deterministic algorithms, cuDNN's deterministic mode and no cuDNN search; all
    restored after. The cuBLAS workspace setting is recorded, never set here: cuBLAS
    may have read it already (see `cublas_worker_env`)."""
    cudnn = torch.backends.cudnn
    previous = (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
                cudnn.deterministic, cudnn.benchmark)
    torch.use_deterministic_algorithms(True)
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield {"use_deterministic_algorithms": True, "cudnn.deterministic": True,
               "cudnn.benchmark": False, CUBLAS_CONFIG: os.environ.get(CUBLAS_CONFIG)}
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        cudnn.deterministic, cudnn.benchmark = previous[2], previous[3]


def _bits(torch: ModuleType, t: Tensor) -> Tensor:
    """The tensor's bits as integers of its width, so -0.0, 0.0 and NaNs compare exactly."""
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.detach().contiguous().view(ints[t.element_size()])


def _inputs(torch: ModuleType, device: torch.device) -> Any:
    return torch.Generator(device=device).manual_seed(0)


def _normal(torch: ModuleType, gen: Any, device: torch.device, kind: torch.dtype,
            *shape: int) -> Tensor:
    return torch.randn(*shape, generator=gen, device=device).to(kind)


Computed = list[tuple[str, "Tensor"]]


def _matmul(torch: ModuleType, device: torch.device, kind: torch.dtype) -> Computed:
    gen = _inputs(torch, device)
    a, b = (_normal(torch, gen, device, kind, 512, 2048) for _ in range(2))
    return [("a @ b^T", torch.matmul(a, b.t()))]


def _conv(torch: ModuleType, device: torch.device, kind: torch.dtype) -> Computed:
    gen = _inputs(torch, device)
    x = _normal(torch, gen, device, kind, 8, 32, 28, 28).requires_grad_()
    w = _normal(torch, gen, device, kind, 64, 32, 3, 3).requires_grad_()
    out = torch.nn.functional.conv2d(x, w, None, 1, 1)
    gx, gw = torch.autograd.grad(out, (x, w), torch.ones_like(out))
    return [("output", out.detach()), ("grad_input", gx), ("grad_weight", gw)]


def _index_add(torch: ModuleType, device: torch.device, kind: torch.dtype) -> Computed:
    gen = _inputs(torch, device)
    index = torch.randint(0, 256, (65536,), generator=gen, device=device)
    source = _normal(torch, gen, device, kind, 65536, 64)
    out = torch.zeros(256, 64, device=device, dtype=kind).index_add_(0, index, source)
    return [("index_add", out)]


def _embedding_bag(torch: ModuleType, device: torch.device, kind: torch.dtype) -> Computed:
    gen = _inputs(torch, device)
    weight = _normal(torch, gen, device, kind, 512, 64).requires_grad_()
    ids = torch.randint(0, 512, (16384,), generator=gen, device=device)
    offsets = torch.arange(0, 16384, 16, device=device)
    out = torch.nn.functional.embedding_bag(ids, weight, offsets, mode="sum")
    (grad,) = torch.autograd.grad(out, (weight,), torch.ones_like(out))
    return [("output", out.detach()), ("grad_weight", grad)]


def _sdpa(torch: ModuleType, device: torch.device, kind: torch.dtype) -> Computed:
    gen = _inputs(torch, device)
    q, k, v = (_normal(torch, gen, device, kind, 2, 4, 256, 64).requires_grad_()
               for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    return [("output", out.detach()), *zip(("grad_q", "grad_k", "grad_v"), grads,
                                           strict=True)]


def _max_unpool(torch: ModuleType, device: torch.device, kind: torch.dtype) -> Computed:
    gen = _inputs(torch, device)
    x = _normal(torch, gen, device, kind, 4, 8, 32, 32)
    pooled, indices = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    return [("max_unpool2d", torch.nn.functional.max_unpool2d(pooled, indices, 2))]


_OPS: dict[str, Callable[[ModuleType, Any, Any], Computed]] = {
    "matmul": _matmul, "conv": _conv, "index-add": _index_add,
    "embedding-bag": _embedding_bag, "sdpa": _sdpa, "max-unpool": _max_unpool,
}


BENCHMARK = Benchmark(
    name="determinism",
    family="validation",
    summary="With deterministic algorithms requested, the same seeded computation twice "
    "gives bit-identical results (skipped with PyTorch's reason where it has no "
    "deterministic implementation)",
    entry="accelbench.benchmarks.validation.determinism:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes"),
    params=(
        Param("op", "str", "matmul", help="the computation run twice",
              choices=DETERMINISM_OPS),
        Param("dtype", "str", "fp32", help="precision of the computation",
              choices=DETERMINISM_DTYPES),
    ),
    devices=("cpu", "cuda"),
    timeout_s=120.0,
    worker_env=cublas_worker_env,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=DeterminismParams,
)
