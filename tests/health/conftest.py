"""Running a health case the way the worker runs it, in this process, on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.measurement import Measurement


@pytest.fixture
def execute_health() -> Callable[..., Measurement]:
    from accelbench.core.case import Case
    from accelbench.core.device import DeviceInfo
    from accelbench.core.timing import TimingPolicy
    from accelbench.runner.plan import PlannedCase
    from accelbench.runner.worker import execute_case

    cpu = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
    policy = TimingPolicy(warmup_time=0.0, max_time=0.05, min_samples=3, max_samples=5,
                          telemetry_interval=0.0)

    def run(name: str, **given: Any) -> Measurement:
        bench = REGISTRY.get(name)
        params = bench.resolve({k: str(v) for k, v in given.items()})
        case = Case.make(bench.name, bench.version, bench.family, params, "cpu")
        return execute_case(PlannedCase(bench, case, params), cpu, policy)

    return run
