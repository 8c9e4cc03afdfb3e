"""Test doubles shared by several test modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from accelbench.core.case import Case
    from accelbench.core.context import CaseContext
    from accelbench.core.measurement import CaseResult, Figure, Measurement
    from accelbench.core.registry import Benchmark
    from accelbench.env.vendor_tools import ToolRun


class FakeClock:
    """A seeded clock: every call of the timed function 'takes' a drawn duration.

    `cost(i)` gives the nominal duration of the i-th call (0-based), so tests can model
    slow first calls; `noise` is the relative standard deviation of each sample.
    """

    def __init__(
        self,
        cost: Callable[[int], float] | float,
        noise: float = 0.0,
        seed: int = 0,
        overhead: float = 0.0,
    ) -> None:
        self._cost = cost if callable(cost) else (lambda i, c=cost: c)
        self._noise = noise
        self._rng = np.random.default_rng(seed)
        self._overhead = overhead
        self._now = 0.0
        self.calls = 0
        self.blocks: list[int] = []

    def now(self) -> float:
        return self._now

    def time(self, fn: Callable[[], Any], number: int) -> float:
        total = 0.0
        for _ in range(number):
            fn()
            total += self._cost(self.calls)
            self.calls += 1
        if self._noise:
            total *= max(0.01, 1.0 + self._noise * self._rng.standard_normal())
        total += self._overhead
        self._now += total
        self.blocks.append(number)
        return total


def no_vendor_tools(argv: Sequence[str], timeout: float) -> ToolRun:
    """A vendor-tool runner (env.vendor_tools.Runner) on a machine where none of the
    tools is installed."""
    from accelbench.env.vendor_tools import MISSING, ToolRun

    return ToolRun(problem=MISSING)


def run_benchmark(
    bench: Benchmark, ctx: CaseContext, **given: Any
) -> tuple[CaseResult, Measurement]:
    """Resolve the parameters as the runner does, measure in this process, and derive the
    stored record: (CaseResult, Measurement)."""
    from accelbench.core.measurement import from_result

    params = bench.resolve(given)
    result = bench.measure(ctx, params)
    case = bench.case(params, ctx.device.torch_device)
    return result, from_result(case, result, (), 0.0, 0.0)


def stored_measurement(
    case: Case,
    status: str = "ok",
    *,
    samples: Sequence[float] = (),
    number: int = 1,
    figures: Sequence[Figure] = (),
    **fields: Any,
) -> Measurement:
    """A measurement as a store holds it, with the given figures taken as they are (not
    derived from the samples), for tests of what reads the store."""
    from accelbench.core.measurement import Measurement
    from accelbench.core.timing import Timing

    confidence = fields.get("confidence", 0.95)
    timings = (Timing(tuple(samples), number, 0, "converged", confidence),) if samples else ()
    return Measurement(case, status, timings=timings, time_name="", measured=tuple(figures),
                       **fields)


class FakeMathContext:
    """PyTorch's float32 math-mode state (ATen's Context) behind a fake `torch.backends`,
    as aten/src/ATen/Context.cpp keeps and checks it.

    `new_api` gives the per-op precisions of PyTorch 2.9 and later
    (`backends.cuda.matmul.fp32_precision`, `backends.cudnn.conv/rnn.fp32_precision`);
    then reading a legacy flag raises, as PyTorch does, when the legacy state disagrees
    with the new one ("mix of the legacy and new APIs"). `rocm_gate` is PyTorch 2.9's
    ROCm build: unless HIPBLASLT_ALLOW_TF32 is "1" in `environ`, the legacy matmul flag
    reads False and setting it does nothing. `torch` is the fake module to hand over.
    """

    MIXED = "you have used mix of the legacy and new APIs"

    def __init__(self, new_api: bool = True, rocm_gate: bool = False,
                 environ: dict[str, str] | None = None) -> None:
        from types import SimpleNamespace

        self.new_api = new_api
        self.rocm_gate = rocm_gate
        self.environ = {} if environ is None else environ
        self.legacy_matmul_tf32 = False  # float32_matmul_precision != HIGHEST
        self.allow_tf32_cudnn = True
        self.precision = {("cuda", "matmul"): "none", ("cuda", "conv"): "tf32",
                          ("cuda", "rnn"): "tf32", ("cuda", "all"): "none",
                          ("generic", "all"): "none"}
        self.legacy_reads = 0
        matmul, cudnn = _FakeMatmul(self), _FakeCudnn(self)
        self.torch = SimpleNamespace(backends=SimpleNamespace(
            cuda=SimpleNamespace(matmul=matmul), cudnn=cudnn))

    def resolved(self, op: str) -> str:
        value = self.precision[("cuda", op)]
        if value == "none":
            value = self.precision[("cuda", "all")]
        if value == "none":
            value = self.precision[("generic", "all")]
        return value

    def set_precision(self, op: str, value: object) -> None:
        if value not in ("ieee", "tf32", "none"):
            raise RuntimeError(f"backend 'cuda' does not support precision {value!r}")
        self.precision[("cuda", op)] = str(value)

    def gated(self) -> bool:
        return self.rocm_gate and self.environ.get("HIPBLASLT_ALLOW_TF32") != "1"


class _FakePrecision:
    _context: FakeMathContext
    _op: str

    def __init__(self, context: FakeMathContext, op: str) -> None:
        object.__setattr__(self, "_context", context)
        object.__setattr__(self, "_op", op)

    def __getattr__(self, name: str) -> object:
        if name == "fp32_precision" and self._context.new_api:
            return self._context.resolved(self._op)
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name: str, value: object) -> None:
        if name == "fp32_precision" and self._context.new_api:
            self._context.set_precision(self._op, value)
            return
        raise AttributeError(f"Unknown attribute {name}")


class _FakeMatmul(_FakePrecision):
    def __init__(self, context: FakeMathContext) -> None:
        super().__init__(context, "matmul")

    def __getattr__(self, name: str) -> object:
        c = self._context
        if name != "allow_tf32":
            return super().__getattr__(name)
        c.legacy_reads += 1
        if c.gated():
            return False
        new = c.resolved("matmul") == "tf32"
        if c.new_api and c.legacy_matmul_tf32 != new:
            raise RuntimeError("PyTorch is checking whether allow_tf32_new is enabled for "
                               f"cuBlas matmul, ... {FakeMathContext.MIXED} ...")
        return new if c.new_api else c.legacy_matmul_tf32

    def __setattr__(self, name: str, value: object) -> None:
        c = self._context
        if name != "allow_tf32":
            super().__setattr__(name, value)
        elif not c.gated():
            c.legacy_matmul_tf32 = bool(value)
            c.precision[("cuda", "matmul")] = "tf32" if value else "ieee"


class _FakeCudnn:
    _context: FakeMathContext

    def __init__(self, context: FakeMathContext) -> None:
        object.__setattr__(self, "_context", context)
        object.__setattr__(self, "benchmark", False)
        if context.new_api:
            object.__setattr__(self, "conv", _FakePrecision(context, "conv"))
            object.__setattr__(self, "rnn", _FakePrecision(context, "rnn"))

    def __getattr__(self, name: str) -> object:
        c = self._context
        if name != "allow_tf32":
            raise AttributeError(name)
        c.legacy_reads += 1
        if c.new_api:
            rnn, conv = c.resolved("rnn") == "tf32", c.resolved("conv") == "tf32"
            if not rnn == conv == c.allow_tf32_cudnn:
                raise RuntimeError("PyTorch is checking whether allow_tf32 is enabled for "
                                   f"cuDNN without a specific operator name, ... "
                                   f"{FakeMathContext.MIXED} ...")
        return c.allow_tf32_cudnn

    def __setattr__(self, name: str, value: object) -> None:
        c = self._context
        if name == "allow_tf32":
            c.precision[("cuda", "rnn")] = c.precision[("cuda", "conv")] = \
                "tf32" if value else "none"
            c.allow_tf32_cudnn = bool(value)
        else:
            object.__setattr__(self, name, value)


def check_measurement(
    bench: str, params: dict[str, Any], status: str = "ok", *, error: float | None = None,
    tolerance: float | None = None, reason: str | None = None, warnings: Sequence[str] = (),
    device: str = "cpu",
) -> Measurement:
    """A validation check as a store holds it: its verdict's figures (error, tolerance
    and margin) measured, no timing."""
    from accelbench.core.case import Case
    from accelbench.core.measurement import Figure, Measurement

    figures = []
    if error is not None:
        figures.append(Figure("error", error, "", False))
    if tolerance is not None:
        figures.append(Figure("tolerance", tolerance, "", False))
        if error is not None and tolerance > 0:
            figures.append(Figure("margin", 100 * (1 - error / tolerance), "%"))
    case = Case.make(bench, "v1", "validation", params, device, check=True)
    verdict = {"ok": "pass", "failed": "fail"}.get(status)
    return Measurement(case, status, reason, measured=tuple(figures), time_name="",
                       warnings=tuple(warnings),
                       details={"verdict": verdict} if verdict else {})


def device_properties(gcn_arch: str | None = None, integrated: bool | None = None
                      ) -> SimpleNamespace:
    """What torch.cuda.get_device_properties gives, as far as the memory model reads it:
    gcnArchName on ROCm ("gfx90a:sramecc+:xnack-"), is_integrated on PyTorch 2.9 and later;
    an attribute left as None is absent, as on builds that do not have it."""
    found = SimpleNamespace()
    if gcn_arch is not None:
        found.gcnArchName = gcn_arch
    if integrated is not None:
        found.is_integrated = integrated
    return found
