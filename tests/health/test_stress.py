"""The stress's rules on telemetry a stressed GPU would give (through the real NVML and
amdsmi sources, from fakes of the libraries), and a short real stress on this CPU."""

from __future__ import annotations

from typing import Any

import pytest
import stress_traces as traces

from accelbench.analysis.checks import check_result, result_text
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN
from accelbench.benchmarks.health.gpu import EccCount, GpuHealth
from accelbench.benchmarks.health.stress import (
    BENCHMARK,
    StressParams,
    clock_sag,
    judge,
    slowdown_share,
    verdict_scope,
)
from accelbench.core.telemetry import GFX_CLOCK_MHZ, THROTTLE, Series
from accelbench.env.telemetry.amd import SMU_THROTTLE_NAMES
from accelbench.env.telemetry.throttle import AMD_SMI_THROTTLED

pytestmark = pytest.mark.torch_api  # PyTorch's tensors, threads and streams

PARAMS = StressParams(**BENCHMARK.resolve({"max_throttled": 0.1, "max_sag": 0.1}))


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


def _judged(series: Series, sag: float = 0.01) -> dict[str, Any]:
    return {f.subject: f for f in judge(series, None, [], [], sag, PARAMS)}


def test_a_slowdown_beyond_the_share_fails() -> None:
    series = _series([1980.0] * 40, [0] * 30 + [1 << 5] * 10)
    assert slowdown_share(series) == pytest.approx(0.25)
    throttling = _judged(series)["throttling"]
    assert throttling.level == FAIL and throttling.code == "ACCEL_THROTTLE"
    assert throttling.message == "slowdown (SwThermalSlowdown) in 25% of 40 readings"


def test_a_healthy_gpu_at_its_power_limit_passes() -> None:
    """Power cap and sync boost active from the limit on, the clock settled from its boost
    to 11% below it, the throughput steady: DCGM's diagnostic and RVS's GST pass such a
    GPU, and so does the stress."""
    series = traces.nvml_run(traces.at_limit(traces.SW_POWER_CAP | traces.SYNC_BOOST))
    found = _judged(series)
    assert {s: f.level for s, f in found.items()} == {
        "throttling": PASS, "clock": PASS, "ecc": PASS, "throughput": PASS}
    assert found["throttling"].reading["slowdown_share"] == 0.0
    assert found["throttling"].message == (
        "no slowdown in 40 readings; SwPowerCap, SyncBoost active: recorded, not judged")
    first, last, sag = clock_sag(series) or (0.0, 0.0, 0.0)
    assert (first, last) == (1980.0, 1755.0) and sag > 0.1
    assert found["clock"].reading == {"first_mhz": 1980.0, "last_mhz": 1755.0, "sag": sag}


@pytest.mark.parametrize(("name", "bit"), [
    ("HwSlowdown", 0x8), ("SwThermalSlowdown", 0x20), ("HwThermalSlowdown", 0x40),
    ("HwPowerBrakeSlowdown", 0x80),
])
def test_a_hardware_or_thermal_slowdown_under_load_fails(name: str, bit: int) -> None:
    at_limit = traces.at_limit(traces.SW_POWER_CAP | traces.SYNC_BOOST)
    series = traces.nvml_run(traces.with_slowdown(at_limit, bit, range(30, 38)))
    throttling = _judged(series)["throttling"]
    assert throttling.level == FAIL and throttling.code == "ACCEL_THROTTLE"
    assert throttling.reading["slowdown_share"] == pytest.approx(0.2)
    assert throttling.message == (f"slowdown ({name}) in 20% of 40 readings; SwPowerCap, "
                                  "SyncBoost active: recorded, not judged")


def test_an_amd_gpu_at_its_power_limit_passes_and_a_thermal_limit_fails() -> None:
    healthy = traces.amdsmi_run(traces.at_limit(traces.PPT0))
    assert healthy.throttle_names == {0: "PPT0"}
    assert {f.level for f in _judged(healthy).values()} == {PASS}
    hot = traces.amdsmi_run(traces.with_slowdown(traces.at_limit(traces.PPT0),
                                                 traces.TEMP_HOTSPOT, range(28, 38)))
    throttling = _judged(hot)["throttling"]
    assert throttling.level == FAIL and throttling.reading["slowdown_share"] == 0.25


def test_an_amd_throttle_mask_names_only_its_active_bits() -> None:
    """Of the SMU's 34 throttlers, the two this run had active, and no other."""
    masks = traces.with_slowdown(traces.at_limit(traces.PPT0), traces.TEMP_HOTSPOT,
                                 range(28, 38))
    series = traces.amdsmi_run(masks)
    assert series.throttle_names == {0: "PPT0", 36: "TEMP_HOTSPOT"}
    throttling = _judged(series)["throttling"]
    assert throttling.message == ("slowdown (TEMP_HOTSPOT) in 25% of 40 readings; PPT0 "
                                  "active: recorded, not judged")
    assert throttling.reading["slowdowns"] == ["TEMP_HOTSPOT"]
    assert throttling.reading["others"] == ["PPT0"]
    inactive = set(SMU_THROTTLE_NAMES.values()) - {"PPT0", "TEMP_HOTSPOT"}
    assert not any(name in throttling.message for name in inactive)


def test_a_reason_that_does_not_say_why_leaves_throttling_not_judged() -> None:
    """The amd-smi CLI says THROTTLED for the power limit and for heat alike."""
    series = Series(0.5, tuple(0.5 * i for i in range(20)),
                    {THROTTLE: (0.0,) * 10 + (1.0,) * 10}, ("amd-smi",),
                    throttle_names={0: AMD_SMI_THROTTLED})
    found = judge(series, None, [], [], 0.01, PARAMS)
    throttling = {f.subject: f for f in found}["throttling"]
    assert throttling.level == PASS and throttling.message == (
        "not judged: held in 50% of 20 readings by throttled (amd-smi throttle_status), "
        "which does not say why")
    assert verdict_scope(found)["not_judged"] == ["ecc", "throttling"]


def test_a_clock_that_settles_is_recorded_not_judged() -> None:
    series = _series([1980.0] * 30 + [1500.0] * 10, [0] * 40)
    first, last, sag = clock_sag(series) or (0.0, 0.0, 0.0)
    assert (first, last) == (1980.0, 1500.0) and sag == pytest.approx(0.2424, rel=1e-3)
    clock = _judged(series)["clock"]
    assert clock.level == PASS and clock.rule.startswith("recorded, not judged")
    assert clock.message == "GFX clock 1980 MHz in the first fifth, 1500 MHz in the last"


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
    assert set(data["not_judged"]) == {"throttling", "ecc"}
    assert "result" in data["judged"] and "throughput" in data["judged"]
    assert result_text(m) == "pass (load only)"


def test_a_pass_that_judged_the_device_is_a_full_pass() -> None:
    steady = judge(_series([1700.0] * 20, [0] * 20), None, [_gpu(0, 1, 0)], [_gpu(0, 1, 0)],
                   0.02, PARAMS)
    assert verdict_scope(steady) == {
        "judged": ["result", "ecc", "throttling", "throughput"], "not_judged": []}
    no_ecc = judge(_series([1700.0] * 20, [0] * 20), None, [], [], 0.02, PARAMS)
    assert verdict_scope(no_ecc)["verdict_scope"] == "ecc not judged"
    # Clocks alone are a record: with neither throttle reasons nor ECC read, nothing of
    # the device's state was judged.
    clocks_only = judge(_series([1700.0] * 20), None, [], [], 0.02, PARAMS)
    assert verdict_scope(clocks_only)["verdict_scope"] == "load only"
