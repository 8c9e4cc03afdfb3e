"""The stress's rules on telemetry a stressed GPU would give, and a short real stress on
this CPU."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.analysis.checks import check_result, result_text
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN
from accelbench.benchmarks.health.gpu import EccCount, GpuHealth
from accelbench.benchmarks.health.stress import (
    BENCHMARK,
    StressParams,
    clock_sag,
    judge,
    throttled_share,
    verdict_scope,
)
from accelbench.core.telemetry import GFX_CLOCK_MHZ, THROTTLE, Series

pytestmark = pytest.mark.torch_api  # PyTorch's tensors, threads and streams

PARAMS = StressParams(**BENCHMARK.resolve(
    {"max_throttled": 0.1, "max_clock_sag": 0.1, "max_sag": 0.1}))


def _series(clocks: list[float], throttle: list[int] | None = None) -> Series:
    channels: dict[str, tuple[float | None, ...]] = {GFX_CLOCK_MHZ: tuple(clocks)}
    if throttle is not None:
        channels[THROTTLE] = tuple(float(v) for v in throttle)
    return Series(0.5, tuple(0.5 * i for i in range(len(clocks))), channels, ("nvml",),
                  throttle_names={2: "SwPowerCap", 5: "SwThermalSlowdown"})


def _gpu(index: int, corrected: int, uncorrectable: int) -> GpuHealth:
    return GpuHealth(index, "nvidia", ecc=(
        EccCount("total", "volatile", corrected, uncorrectable),
        EccCount("total", "aggregate", corrected + 100, uncorrectable + 2)))


def _levels(found: list[Any]) -> dict[str, str]:
    return {f.subject: f.level for f in found}


def test_a_steady_stress_passes() -> None:
    series = _series([1980.0] * 40, [0] * 40)
    before, after = [_gpu(0, 3, 0)], [_gpu(0, 3, 0)]
    found = judge(series, None, before, after, 0.02, PARAMS)
    assert _levels(found) == {"throttling": PASS, "clock": PASS, "gpu0": PASS,
                              "throughput": PASS}


def test_throttling_beyond_the_share_fails() -> None:
    series = _series([1980.0] * 40, [0] * 30 + [1 << 5] * 10)
    assert throttled_share(series) == pytest.approx(0.25)
    [throttling] = [f for f in judge(series, None, [], [], 0.0, PARAMS)
                    if f.subject == "throttling"]
    assert throttling.level == FAIL and "throttled in 25% of 40 readings" in throttling.message


def test_a_clock_that_sags_fails() -> None:
    series = _series([1980.0] * 30 + [1500.0] * 10, [0] * 40)
    first, last, sag = clock_sag(series) or (0.0, 0.0, 0.0)
    assert (first, last) == (1980.0, 1500.0) and sag == pytest.approx(0.2424, rel=1e-3)
    assert _levels(judge(series, None, [], [], 0.0, PARAMS))["clock"] == FAIL


def test_ecc_that_rises_under_stress_fails_or_warns() -> None:
    before = [_gpu(0, 3, 0), _gpu(1, 0, 0)]
    after = [_gpu(0, 9, 0), _gpu(1, 0, 1)]
    found = {f.subject: f for f in judge(None, "no source", before, after, 0.0, PARAMS)}
    assert found["gpu0"].level == WARN and found["gpu0"].reading["corrected"] == 6
    assert found["gpu1"].level == FAIL and found["gpu1"].reading["uncorrectable"] == 1


def test_what_was_not_read_is_said_not_judged() -> None:
    found = {f.subject: f for f in judge(None, "nvml: not installed", [], [], 0.3, PARAMS)}
    assert found["throttling"].level == PASS and "nvml: not installed" in (
        found["throttling"].message)
    assert found["ecc"].message.startswith("not judged")
    assert found["throughput"].level == WARN  # a 30% fall


def test_a_short_stress_runs_on_this_cpu(execute_health) -> None:
    m = execute_health("stress", seconds=1.5, size=128, copy_bytes=1 << 20, max_sag=0.99)
    assert m.status == "ok", m.reason
    figures = {f.name: f.value for f in m.measured}
    assert figures["throughput_first"] > 0 and figures["copy_bandwidth"] > 0
    assert figures["failed"] == 0
    subjects = {f["subject"] for f in m.details["findings"]}
    assert {"throttling", "clock", "throughput", "ecc"} <= subjects
    assert m.details["calls"] > 0 and m.details["copied_bytes"] > 0
    # On the CPU nothing reads throttling, clocks or ECC: the pass is of the load alone,
    # and says so in a table, while the machine-readable verdict stays "pass".
    result = check_result(m)
    assert result.shown == "pass (load only)" and result.verdict == "pass"
    data = result.to_dict()
    assert data["verdict"] == "pass" and data["scope"] == "load only"
    assert set(data["not_judged"]) == {"throttling", "clock", "ecc"}
    assert "result" in data["judged"] and "throughput" in data["judged"]
    assert result_text(m) == "pass (load only)"


def test_a_pass_that_judged_the_device_is_a_full_pass() -> None:
    steady = judge(_series([1700.0] * 20, [0] * 20), None, [_gpu(0, 1, 0)], [_gpu(0, 1, 0)],
                   0.02, PARAMS)
    assert verdict_scope(steady) == {
        "judged": ["result", "clock", "ecc", "throttling", "throughput"], "not_judged": []}
    no_ecc = judge(_series([1700.0] * 20, [0] * 20), None, [], [], 0.02, PARAMS)
    assert verdict_scope(no_ecc)["verdict_scope"] == "ecc not judged"
