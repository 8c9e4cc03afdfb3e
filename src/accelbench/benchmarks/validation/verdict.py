"""What a validation check concludes, and how: tolerances, comparisons, verdicts.

A check compares what the stack computed with a reference (float64 on the CPU on the
same inputs, an exact expectation, or a limit it states) and concludes:

- pass: the case is ok; its figures are measured figures (no timing);
- fail: the case failed with the reason, and keeps the same figures;
- skip: the case is skipped with the reason (a library that is not installed, a
  precision the device lacks, a backend PyTorch cannot run here).

The figures, first in every check: `error` (what the check found), `tolerance` (what it
allows there) and `margin`, how far inside the tolerance the error is, in %: 100 with no
error at all, 0 at the tolerance, below 0 outside it. A check that allows no error
(determinism, the memory test) has no margin. Checks add their own figures after these.

Tolerances are torch.testing's defaults per dtype (`_DTYPE_PRECISIONS` in
torch/testing/_comparison.py) unless a check states otherwise: an element passes when
|actual - expected| <= atol + rtol * magnitude. For an elementwise result the magnitude
is |expected|, torch.testing's own rule. A result that combines many values states its
magnitude: the same computation on the absolute values of what it combines (|A| @ |B|
for a product, the sum of |x| for a sum), the size a rounding error of that
computation grows with; without it a product whose terms cancel would be held to a
precision no arithmetic of its dtype reaches. `tolerance_scale` multiplies both rtol
and atol.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.core.measurement import CaseFailed, CaseResult, Figure
from accelbench.core.params import Param

if TYPE_CHECKING:
    from torch import Tensor

PASS = "pass"
FAIL = "fail"

# torch.testing's (rtol, atol) per dtype: torch/testing/_comparison.py, _DTYPE_PRECISIONS.
TORCH_TESTING = {
    "fp64": (1e-7, 1e-7),
    "fp32": (1.3e-6, 1e-5),
    "fp16": (1e-3, 1e-5),
    "bf16": (1.6e-2, 1e-5),
}
# Precisions torch.testing has no entry for, with the tolerance stated and why.
STATED = {
    "tf32": (5e-3, 1e-5, "stated for tf32: the precision PyTorch's own TF32 tests allow "
                         "(tf32_on_and_off(0.005))"),
    "fp8": (1.6e-2, 1e-5, "stated for fp8: torch.testing's bfloat16 default, the dtype of "
                          "the output; the fp8 inputs are the reference's inputs too"),
}


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be a positive number"


TOLERANCE_SCALE = Param(
    "tolerance_scale", "float", 1.0,
    help="multiply the check's tolerances by this positive number (2 allows twice the error)",
    check=_positive, quiet_default=True,
)


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    basis: str  # where the numbers come from
    scale: float = 1.0  # tolerance_scale, already applied to rtol and atol

    def to_dict(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "basis": self.basis,
                "tolerance_scale": self.scale}

    @property
    def text(self) -> str:
        scaled = f", x{self.scale:g}" if self.scale != 1 else ""
        return f"rtol {self.rtol:.3g}, atol {self.atol:.3g}{scaled}"


def tolerance_for(dtype: str, scale: float = 1.0, factor: float = 1.0,
                  why: str = "") -> Tolerance:
    """torch.testing's default for `dtype` (or the stated one for tf32 and fp8), times
    `factor` where a check states one (with `why`), times the user's `scale`."""
    if dtype in TORCH_TESTING:
        rtol, atol = TORCH_TESTING[dtype]
        basis = f"torch.testing default for {dtype}"
    elif dtype in STATED:
        rtol, atol, basis = STATED[dtype]
    else:
        raise ValueError(f"no tolerance for {dtype}")
    if factor != 1:
        basis += f", x{factor:g}: {why}" if why else f", x{factor:g}"
    return Tolerance(rtol * factor * scale, atol * factor * scale, basis, scale)


@dataclass(frozen=True)
class Closeness:
    """One result compared element by element with its reference."""

    name: str
    elements: int
    outside: int  # elements past their allowance, non-finite ones included
    nonfinite: int  # non-finite results where the reference is finite
    max_error: float  # the largest |actual - expected| of the finite results
    worst_error: float  # |actual - expected| of the element nearest to or furthest past
    worst_allowed: float  # its allowance
    used: float  # worst_error / worst_allowed; inf with a non-finite result
    magnitude: str = "|expected|"

    @property
    def passed(self) -> bool:
        return self.outside == 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "elements": self.elements, "outside": self.outside,
                "nonfinite": self.nonfinite, "max_error": _finite(self.max_error),
                "worst_error": _finite(self.worst_error),
                "worst_allowed": _finite(self.worst_allowed),
                "tolerance_used": _finite(self.used), "magnitude": self.magnitude}


def compare(torch: ModuleType, name: str, actual: Tensor, expected: Tensor,
            tolerance: Tolerance, magnitude: Tensor | None = None,
            magnitude_name: str = "|expected|") -> Closeness:
    """`actual` against `expected` with torch.testing's rule, on the CPU in float64;
    `magnitude` (default |expected|) is what rtol is relative to."""
    got = actual.detach().to("cpu").to(torch.float64)
    want = expected.detach().to("cpu").to(torch.float64)
    if got.shape != want.shape:
        raise CaseFailed(f"{name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    size = want.abs() if magnitude is None else magnitude.detach().to("cpu").to(
        torch.float64).abs()
    allowed = tolerance.atol + tolerance.rtol * size
    finite = torch.isfinite(want)
    # As torch.testing: equal non-finite values match; a non-finite result where the
    # reference is finite never does.
    nonfinite = finite & ~torch.isfinite(got)
    odd = ~finite & (got != want) & ~(torch.isnan(got) & torch.isnan(want))
    diff = torch.where(finite & ~nonfinite, (got - want).abs(), torch.zeros_like(want))
    ratio = diff / allowed
    outside = int(((ratio > 1) | nonfinite | odd).sum())
    count = int(want.numel())
    if count == 0:
        return Closeness(name, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, magnitude_name)
    worst = int(ratio.flatten().argmax())
    used = float(ratio.flatten()[worst])
    if int(nonfinite.sum()) or int(odd.sum()):
        used = math.inf
    return Closeness(name, count, outside, int(nonfinite.sum()) + int(odd.sum()),
                     float(diff.max()), float(diff.flatten()[worst]),
                     float(allowed.flatten()[worst]), used, magnitude_name)


@dataclass(frozen=True)
class Verdict:
    """What a check concludes: `problem` is None when it passed."""

    error: float | None
    tolerance: float | None
    unit: str = ""
    problem: str | None = None
    extra: tuple[Figure, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.problem is None

    @property
    def margin(self) -> float | None:
        """How far inside the tolerance the error is, in %; None without a finite one."""
        if self.error is None or not self.tolerance or not math.isfinite(self.error):
            return None
        return 100.0 * (1.0 - self.error / self.tolerance)

    def figures(self) -> tuple[Figure, ...]:
        out = []
        if self.error is not None and math.isfinite(self.error):
            out.append(Figure("error", self.error, self.unit, higher_is_better=False))
        if self.tolerance is not None and math.isfinite(self.tolerance):
            out.append(Figure("tolerance", self.tolerance, self.unit, higher_is_better=False))
        margin = self.margin
        if margin is not None and math.isfinite(margin):
            out.append(Figure("margin", margin, "%"))
        return (*out, *(f for f in self.extra if math.isfinite(f.value)))

    def adding(self, *figures: Figure) -> Verdict:
        """This verdict with more figures of the check's own after the others."""
        return Verdict(self.error, self.tolerance, self.unit, self.problem,
                       (*self.extra, *figures), self.details, self.warnings)

    def but(self, problem: str | None) -> Verdict:
        """This verdict, failed for `problem` (unless it failed already, or it is None)."""
        if problem is None or self.problem is not None:
            return self
        return Verdict(self.error, self.tolerance, self.unit, problem, self.extra,
                       self.details, self.warnings)


def tensors_verdict(results: Sequence[Closeness], tolerance: Tolerance, what: str,
                    unit: str = "") -> Verdict:
    """The verdict of comparisons made with one tolerance: the worst element of all of
    them decides the figures; every result past its tolerance is named."""
    worst = max(results, key=lambda c: c.used)
    problems = []
    for c in results:
        if c.nonfinite:
            problems.append(f"{c.nonfinite} of {c.elements} values of {c.name} are not "
                            "finite where the reference is")
        elif c.outside:
            problems.append(
                f"{c.outside} of {c.elements} elements of {c.name} outside the tolerance "
                f"({tolerance.text} of {c.magnitude}); worst error {c.worst_error:.3g} where "
                f"{c.worst_allowed:.3g} is allowed")
    problem = f"wrong result: {what}: {'; '.join(problems)}" if problems else None
    error = worst.worst_error if math.isfinite(worst.used) else None
    details = {"tolerance": tolerance.to_dict(), "compared": [c.to_dict() for c in results]}
    return Verdict(error, worst.worst_allowed, unit, problem, details=details)


def exact_verdict(wrong: int, unit: str, problem: str | None,
                  extra: Sequence[Figure] = ()) -> Verdict:
    """A check that allows nothing wrong: `wrong` counts what was (in `unit`)."""
    return Verdict(float(wrong), 0.0, unit, problem if wrong else None, tuple(extra))


def limit_verdict(value: float, limit: float, unit: str, problem: str) -> Verdict:
    """A number that must stay at or below a limit the check states."""
    failed = not (math.isfinite(value) and value <= limit)
    return Verdict(value if math.isfinite(value) else None, limit, unit,
                   problem if failed else None)


def conclude(verdict: Verdict, details: dict[str, Any] | None = None) -> CaseResult:
    """The case's result when the check passed; CaseFailed with the same figures and
    details when it did not."""
    merged = {**verdict.details, **(details or {}),
              "verdict": PASS if verdict.passed else FAIL}
    if not verdict.passed:
        assert verdict.problem is not None
        raise CaseFailed(verdict.problem, figures=verdict.figures(), details=merged)
    return CaseResult(None, figures=verdict.figures(), details=merged,
                      time_name="", warnings=verdict.warnings)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
