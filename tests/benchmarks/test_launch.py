"""The launch latency benchmark, run for real on the CPU."""

from __future__ import annotations

import math

import pytest

from accelbench.benchmarks.micro import launch
from accelbench.core.case import Case
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseSkipped, from_result
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.errors import UserError

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")


@pytest.fixture
def ctx() -> CaseContext:
    return CaseContext(CPU, PerfCounterClock(), TimingPolicy(max_time=0.2, warmup_time=0.01))


def test_eager_launch_gives_a_latency(ctx: CaseContext) -> None:
    bench = launch.BENCHMARK
    params = bench.resolve({})
    result = bench.measure(ctx, params)
    assert result.rates == () and result.time_name == "latency"
    measurement = from_result(
        Case.make(bench.name, bench.version, bench.family, params, "cpu"), result, (), 0.0, 0.0
    )
    latency = measurement.primary
    assert latency is not None and result.timing is not None
    assert latency.name == "latency" and latency.unit == "s" and not latency.higher_is_better
    assert math.isfinite(latency.value) and 0 < latency.value < 0.01
    assert result.timing.number > 1  # a call this cheap is timed in blocks


def test_graph_replay_is_skipped_on_a_cpu(ctx: CaseContext) -> None:
    with pytest.raises(CaseSkipped, match="CUDA or HIP graphs"):
        launch.BENCHMARK.measure(ctx, launch.BENCHMARK.resolve({"mode": "graph"}))


def test_unknown_mode_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not one of: eager, graph"):
        launch.BENCHMARK.resolve({"mode": "lazy"})
