"""Test doubles shared by several test modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


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


def run_benchmark(bench: Any, ctx: Any, **given: Any) -> tuple[Any, Any]:
    """Resolve the parameters as the runner does, measure in this process, and derive the
    stored record: (CaseResult, Measurement)."""
    from accelbench.core.measurement import from_result

    params = bench.resolve(given)
    result = bench.load()(ctx, params)
    case = bench.case(params, ctx.device.torch_device)
    return result, from_result(case, result, (), 0.0, 0.0)


def stored_measurement(
    case: Any,
    status: str = "ok",
    *,
    samples: Sequence[float] = (),
    number: int = 1,
    figures: Sequence[Any] = (),
    **fields: Any,
) -> Any:
    """A measurement as a store holds it, with the given figures taken as they are (not
    derived from the samples), for tests of what reads the store."""
    from accelbench.core.measurement import Measurement
    from accelbench.core.timing import Timing

    confidence = fields.get("confidence", 0.95)
    timings = (Timing(tuple(samples), number, 0, "converged", confidence),) if samples else ()
    return Measurement(case, status, timings=timings, time_name="", measured=tuple(figures),
                       **fields)


def check_measurement(
    bench: str, params: dict[str, Any], status: str = "ok", *, error: float | None = None,
    tolerance: float | None = None, reason: str | None = None, warnings: Sequence[str] = (),
    device: str = "cpu",
) -> Any:
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
    case = Case.make(bench, "v1", "validation", params, device)
    verdict = {"ok": "pass", "failed": "fail"}.get(status)
    return Measurement(case, status, reason, measured=tuple(figures), time_name="",
                       warnings=tuple(warnings),
                       details={"verdict": verdict} if verdict else {})
