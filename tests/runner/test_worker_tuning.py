"""Every case the worker measures carries the GEMM/convolution tuning it ran under."""

from __future__ import annotations

from sample_benches import SAMPLE_REGISTRY

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.timing import TimingPolicy
from accelbench.runner.plan import PlannedCase
from accelbench.runner.worker import execute_case

CPU = DeviceInfo("cpu", None, "cpu", "test CPU")
BRIEF = TimingPolicy(warmup_time=0.01, max_time=0.05, min_samples=3, host_interval=0,
                     telemetry_interval=0)


def _case(name: str, params: dict[str, str]):
    bench = SAMPLE_REGISTRY.get(name)
    resolved = bench.resolve(params)
    case = Case.make(bench.name, bench.version, bench.family, resolved, "cpu")
    return execute_case(PlannedCase(bench, case, resolved), CPU, BRIEF)


def test_a_cpu_case_records_that_tunableop_does_not_apply(monkeypatch) -> None:
    monkeypatch.setenv("PYTORCH_TUNABLEOP_ENABLED", "1")  # asked for, but not on a CPU
    m = _case("ok", {"n": "1000"})
    assert m.ok
    tuning = m.details["tuning"]
    assert tuning["platform"] == "cpu"
    assert tuning["tunableop"]["applies"] is False
    assert "does not apply on CPU" in tuning["tunableop"]["reason"]
    assert "PYTORCH_TUNABLEOP_ENABLED" not in str(tuning)  # settings are kept only where used
