"""Serving cases run for real and briefly on the CPU, in this process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement
from accelbench.core.registry import Benchmark
from accelbench.core.timing import TimingPolicy

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
BRIEF = TimingPolicy(max_time=0.05, warmup_time=0.0, min_samples=3, min_warmup_calls=1)


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def execute() -> Callable[..., Measurement]:
    from accelbench.runner.plan import PlannedCase
    from accelbench.runner.worker import execute_case

    def run(bench: Benchmark, **given: Any) -> Measurement:
        params = bench.resolve({k: str(v) for k, v in given.items()})
        case = Case.make(bench.name, bench.version, bench.family, params, "cpu")
        return execute_case(PlannedCase(bench, case, params), CPU, BRIEF)

    return run
