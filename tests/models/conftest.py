"""Fixtures for the model benchmarks, run for real and briefly on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from model_cases import BRIEF, CPU

from accelbench.core.case import Case
from accelbench.core.context import CaseContext
from accelbench.core.measurement import Measurement
from accelbench.core.registry import Benchmark
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.runner.plan import PlannedCase


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread: tiny models gain nothing from more, and on a busy machine
    OpenMP threads that spin-wait for each other make them many times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def ctx(monkeypatch: pytest.MonkeyPatch) -> CaseContext:
    """The CPU with a short timing budget and no published peak."""
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    return CaseContext(CPU, PerfCounterClock(), BRIEF)


@pytest.fixture
def execute() -> Callable[..., Measurement]:
    """execute(bench, **params): the worker's own path for one case, in this process."""
    from accelbench.runner.worker import execute_case

    def run(bench: Benchmark, policy: TimingPolicy = BRIEF, **given: Any) -> Measurement:
        params = bench.resolve({k: str(v) for k, v in given.items()})
        case = Case.make(bench.name, bench.version, bench.family, params, "cpu")
        return execute_case(PlannedCase(bench, case, params), CPU, policy)

    return run
