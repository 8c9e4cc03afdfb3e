"""Output parity: an engine's output on the case's seeded batch against eager fp32's.

Both come from the same weights and the same batch on the same device. The figures:

- max_abs: the largest absolute difference of any output element;
- max_rel: max_abs over the largest magnitude of the reference (the error relative to
  the output's scale: element-wise relative errors blow up where the reference is
  near zero, and say nothing there);
- cosine: the cosine similarity of the two outputs as vectors (in float64);
- top1: for classifiers and language models, the share of rows (samples, or tokens of a
  language model) whose highest-scoring class is the same.

An engine passes when max_rel is at most its tolerance, cosine at least its floor, and
top1 at least its floor; the tolerance depends on the engine's kind and the precision
(`tolerance`) and is stored with the figures. The models have random weights, so their
scores lie close together and a small error can swap the top two: top-1 agreement is a
weaker check here than on trained weights, and its floors are set accordingly; the
error and the cosine carry the check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models.engines import EAGER, INT8

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class Tolerance:
    max_rel: float  # at most
    cosine: float  # at least
    top1: float  # at least (for classifier and language-model outputs)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# (kind, dtype) -> tolerance. Kinds: the eager module itself (the same kernels as the
# reference, or autocast's); graph engines, which fuse and reorder (and for fp16/bf16
# cast the whole model, norms and softmax included); int8 recipes, from fp32.
TOLERANCES: Mapping[tuple[str, str], Tolerance] = MappingProxyType({
    ("eager", "fp32"): Tolerance(1e-5, 0.999999, 0.99),
    ("eager", "tf32"): Tolerance(1e-2, 0.9999, 0.95),
    ("eager", "fp16"): Tolerance(2e-2, 0.999, 0.8),
    ("eager", "bf16"): Tolerance(5e-2, 0.995, 0.7),
    ("graph", "fp32"): Tolerance(1e-3, 0.99999, 0.99),
    ("graph", "tf32"): Tolerance(1e-2, 0.9999, 0.95),
    ("graph", "fp16"): Tolerance(5e-2, 0.998, 0.8),
    ("graph", "bf16"): Tolerance(1e-1, 0.99, 0.7),
    ("int8", "fp32"): Tolerance(1.5e-1, 0.99, 0.7),
})


def kind(engine: str) -> str:
    return {EAGER: "eager", INT8: "int8"}.get(engine, "graph")


def tolerance(engine: str, dtype: str) -> Tolerance:
    return TOLERANCES[(kind(engine), dtype)]


@dataclass(frozen=True)
class Parity:
    max_abs: float
    max_rel: float
    cosine: float
    top1: float | None  # None where the output has no classes
    tolerance: Tolerance

    @property
    def failures(self) -> tuple[str, ...]:
        """What is out of tolerance, in words (empty when the engine passes)."""
        tol, out = self.tolerance, []
        if not self.max_rel <= tol.max_rel:  # NaN fails
            out.append(f"max relative error {self.max_rel:.3g} > {tol.max_rel:g}")
        if not self.cosine >= tol.cosine:
            out.append(f"cosine similarity {self.cosine:.6f} < {tol.cosine:g}")
        if self.top1 is not None and not self.top1 >= tol.top1:
            out.append(f"top-1 agreement {self.top1:.1%} < {tol.top1:.0%}")
        return tuple(out)

    @property
    def ok(self) -> bool:
        return not self.failures

    def figures(self) -> str:
        text = (f"max abs error {self.max_abs:.3g}, max relative error {self.max_rel:.3g}, "
                f"cosine {self.cosine:.6f}")
        if self.top1 is not None:
            text += f", top-1 agreement {self.top1:.1%}"
        return text

    def reason(self) -> str:
        """Why the case fails: every figure, and what was out of tolerance."""
        return (f"parity with eager fp32 failed: {'; '.join(self.failures)} "
                f"({self.figures()})")

    def to_dict(self) -> dict[str, Any]:
        return {"max_abs": _finite(self.max_abs), "max_rel": _finite(self.max_rel),
                "cosine": _finite(self.cosine), "top1": self.top1,
                "tolerance": self.tolerance.to_dict(), "ok": self.ok,
                "reference": "eager fp32 on the same device, same weights and batch"}


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)  # stored records are JSON


def measure(torch: ModuleType, reference: Tensor, output: Tensor, tol: Tolerance,
            classes: bool) -> Parity:
    """The parity figures of `output` against `reference` (any shapes of equal size)."""
    ref = reference.detach().to("cpu", torch.float64)
    out = output.detach().to("cpu", torch.float64)
    if ref.shape != out.shape:
        if ref.numel() != out.numel():
            nan = math.nan
            return Parity(math.inf, math.inf, nan, None if not classes else 0.0, tol)
        out = out.reshape(ref.shape)
    diff = (out - ref).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    if not bool(torch.isfinite(out).all()):
        max_abs = math.inf
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    cosine = _cosine(torch, ref.flatten(), out.flatten())
    top1 = None
    if classes:
        width = ref.shape[-1]
        agree = ref.reshape(-1, width).argmax(-1) == out.reshape(-1, width).argmax(-1)
        top1 = float(agree.double().mean())
    return Parity(max_abs, max_rel, cosine, top1, tol)


def _cosine(torch: ModuleType, a: Tensor, b: Tensor) -> float:
    norms = float(a.norm()) * float(b.norm())
    if norms == 0:
        return 1.0 if bool(torch.equal(a, b)) else 0.0
    value = float((a * b).sum()) / norms
    return value if math.isfinite(value) else math.nan
