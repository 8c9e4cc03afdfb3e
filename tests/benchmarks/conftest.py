"""Shared fixtures for benchmarks run for real, briefly, on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult, Measurement
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from fakes import run_benchmark


@pytest.fixture
def ctx(monkeypatch: pytest.MonkeyPatch) -> CaseContext:
    """The CPU with a short timing budget and no published peak."""
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    cpu = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
    return CaseContext(cpu, PerfCounterClock(), TimingPolicy(max_time=0.2, warmup_time=0.01))


@pytest.fixture
def run_case() -> Callable[..., tuple[CaseResult, Measurement]]:
    """run_case(bench, ctx, **params): resolve the parameters as the runner does, measure,
    and derive the stored record."""

    return run_benchmark
