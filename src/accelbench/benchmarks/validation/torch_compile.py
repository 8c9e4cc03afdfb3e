"""torch.compile against eager: a tiny model (`tiny`) compiled with the default backend
(Inductor: Triton kernels on GPUs, C++ on the CPU, which needs a C compiler) gives the
output and the gradients eager mode gives, on the same inputs and weights.

Compiled code fuses and reorders the arithmetic and keeps fp32 intermediates inside
fused kernels where eager rounds each op's result to the precision, so the two differ
by the rounding of what each element was computed from, not of the element itself: every
tensor is compared with torch.testing's tolerance for the precision relative to its
largest magnitude, times COMPILE_FACTOR (a few units in the last place there; Dynamo's
own `same` check allows 1e-4 in fp32). Compiling with a cold cache takes tens of
seconds on a small CPU; Inductor keeps what it compiled for the next time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.validation.modes import math_mode, require_precision, storage
from accelbench.benchmarks.validation.verdict import (
    TOLERANCE_SCALE,
    compare,
    conclude,
    tensors_verdict,
    tolerance_for,
)
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

COMPILE_DTYPES = ("fp32", "fp16", "bf16")
COMPILE_FACTOR = 4.0
WHY = "compiled code fuses, reorders and rounds intermediates otherwise"


@dataclass(frozen=True)
class CompileParams:
    """The parameters of a compile case (`BENCHMARK.params`)."""

    dtype: str
    tolerance_scale: float


def measure(ctx: CaseContext, params: CompileParams) -> CaseResult:
    dtype = params.dtype
    require_precision(ctx.device, dtype)
    import time

    import torch

    from accelbench.benchmarks.validation.tiny import tiny_input, tiny_model

    device = torch.device(ctx.device.torch_device)
    kind = storage(torch, ctx.device, dtype)
    torch._dynamo.reset()
    try:
        with math_mode(torch, dtype) as mode:
            eager = tiny_model().to(device=device, dtype=kind)
            x = tiny_input(device, kind)
            want = _run(torch, eager, x)
            model = tiny_model().to(device=device, dtype=kind)
            start = time.perf_counter()
            compiled = torch.compile(model)
            got = _run(torch, compiled, x)
            seconds = time.perf_counter() - start
    finally:
        torch._dynamo.reset()
    tolerance = tolerance_for(dtype, params.tolerance_scale, COMPILE_FACTOR, WHY)
    compared = [compare(torch, name, got[name], want[name], tolerance,
                        torch.full_like(want[name], float(want[name].abs().max())),
                        "the largest |expected| of the tensor") for name in want]
    verdict = tensors_verdict(compared, tolerance, f"torch.compile against eager in {dtype}")
    return conclude(
        verdict.adding(Figure("compile_time", seconds, "s", higher_is_better=False)),
        {"backend": "inductor (torch.compile's default)", "math_mode": mode,
         "model": "tiny: linear, GELU, layer norm, linear, softmax"})


def _run(torch: Any, model: Any, x: Any) -> dict[str, Any]:
    """The output, and the gradients of the input and of every weight."""
    leaf = x.detach().clone().requires_grad_()
    out = model(leaf)
    weights = dict(model.named_parameters())
    grads = torch.autograd.grad(out, [leaf, *weights.values()], torch.ones_like(out))
    names = ["output", "grad_input", *(f"grad_{n.removeprefix('_orig_mod.')}"
                                        for n in weights)]
    return dict(zip(names, [out.detach(), *grads], strict=True))


BENCHMARK = Benchmark(
    name="compile",
    family="validation",
    summary="A torch.compile'd tiny model gives eager mode's output and gradients within "
    "tolerance",
    entry="accelbench.benchmarks.validation.torch_compile:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes",
             "accelbench.benchmarks.validation.tiny"),
    params=(
        Param("dtype", "str", "fp32", help="precision of the model and its inputs",
              choices=COMPILE_DTYPES),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=CompileParams,
)
