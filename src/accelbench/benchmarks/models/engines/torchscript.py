"""torchscript: torch.jit.trace, then freeze and optimize_for_inference.

Tracing records one path through the model for the example's shapes; freezing inlines
the weights as constants, and optimize_for_inference folds batch norms into convolutions
and, on CPUs, picks oneDNN layouts. For fp16 and bf16 the whole model and its float
inputs are cast before tracing (a trace does not keep autocast's per-op choices).
TorchScript is deprecated in recent PyTorch; its deprecation warnings are kept out of
the way, and a trace that fails fails the case with the tracer's reason.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

from accelbench.benchmarks.models.engines import TORCHSCRIPT, Job, Prepared
from accelbench.core.measurement import CaseFailed


class TorchScript:
    name = TORCHSCRIPT

    def problem(self, job: Job) -> str | None:
        return None

    def prepare(self, job: Job) -> Prepared:
        torch = job.torch
        module, example = cast_for(job)
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")  # TracerWarning, FutureWarning (deprecated)
                traced = torch.jit.trace(module, example, strict=False, check_trace=False)
                frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))
        except Exception as exc:
            raise CaseFailed(f"torchscript: the trace failed: {type(exc).__name__}: "
                             f"{_first_line(exc)}") from None
        dtype = cast_dtype(job)

        def run(inputs: tuple[Any, ...]) -> Any:
            return frozen(*cast_inputs(job, inputs, dtype))

        return Prepared(run, {"steps": "torch.jit.trace, torch.jit.freeze, "
                                       "torch.jit.optimize_for_inference",
                              "precision_applied": _applied(job)})


def cast_dtype(job: Job) -> Any:
    """The half type the model is cast to for fp16/bf16, or None (fp32, tf32)."""
    return job.precision.torch_dtype(job.torch) if job.precision.dtype in ("fp16", "bf16") \
        else None


def cast_for(job: Job) -> tuple[Any, tuple[Any, ...]]:
    """A copy of the model and the example, cast to the half type when there is one."""
    dtype = cast_dtype(job)
    if dtype is None:
        return job.module, job.example
    return copy.deepcopy(job.module).to(dtype), tuple(cast_inputs(job, job.example, dtype))


def cast_inputs(job: Job, inputs: tuple[Any, ...], dtype: Any) -> list[Any]:
    if dtype is None:
        return list(inputs)
    return [t.to(dtype) if t.is_floating_point() else t for t in inputs]


def _applied(job: Job) -> str:
    if job.precision.dtype in ("fp16", "bf16"):
        return f"whole model and float inputs cast to {job.precision.dtype} before export"
    return job.precision.label


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else "")[:300]


ENGINE = TorchScript()
