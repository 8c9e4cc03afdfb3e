"""Validation checks run in this process, on the CPU, for real: `run_check(bench, **params)`
plans the case as the runner does and runs it through the worker's own `execute_case`,
so a failed or skipped check becomes the very record a run would store."""

from __future__ import annotations

from typing import Any

from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement
from accelbench.core.registry import Benchmark
from accelbench.core.timing import TimingPolicy
from accelbench.runner.plan import PlannedCase
from accelbench.runner.worker import execute_case

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
QUIET = TimingPolicy(host_interval=0.0, telemetry_interval=0.0)


def run_check(bench: Benchmark, device: DeviceInfo = CPU, **given: Any) -> Measurement:
    params = bench.resolve(given)
    planned = PlannedCase(bench, bench.case(params, device.torch_device), params)
    return execute_case(planned, device, QUIET)


def figures(m: Measurement) -> dict[str, float]:
    return {f.name: f.value for f in m.measured}
