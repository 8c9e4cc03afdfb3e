"""The worker samples telemetry beside each case and marks the timed part in it."""

from __future__ import annotations

import pytest
from sample_benches import SAMPLE_REGISTRY

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.telemetry import Series
from accelbench.core.timing import TimingPolicy
from accelbench.env.telemetry import vendor_index
from accelbench.runner.plan import PlannedCase
from accelbench.runner.worker import execute_case

CPU = DeviceInfo("cpu", None, "cpu", "test CPU")
BRIEF = TimingPolicy(warmup_time=0.01, max_time=0.2, min_samples=3, host_interval=0)


def _ok_case(policy: TimingPolicy):
    bench = SAMPLE_REGISTRY.get("ok")
    params = bench.resolve({"n": "1000"})
    case = Case.make(bench.name, bench.version, bench.family, params, "cpu")
    return execute_case(PlannedCase(bench, case, params), CPU, policy)


def test_each_case_carries_its_series_with_the_timed_part_marked() -> None:
    import dataclasses

    m = _ok_case(dataclasses.replace(BRIEF, telemetry_interval=0.01))
    assert m.ok and len(m.telemetry) == 1
    series = Series.from_dict(m.telemetry[0])
    assert "host" in series.sources and len(series.t) >= 2
    assert series.window is not None and 0 <= series.window[0] < series.window[1]
    assert series.window[1] <= series.t[-1] + series.interval_s
    # RAPL is read where the host has it; where not (a VM), the reason is recorded.
    assert "rapl" in series.sources or "rapl" in series.missing


def test_no_telemetry_when_the_policy_asks_for_none() -> None:
    import dataclasses

    m = _ok_case(dataclasses.replace(BRIEF, telemetry_interval=0))
    assert m.ok and m.telemetry == () and m.energy is None


@pytest.mark.parametrize(("env", "index", "expected"), [
    ({}, 1, 1),
    ({"CUDA_VISIBLE_DEVICES": "4,5,6"}, 1, 5),
    ({"HIP_VISIBLE_DEVICES": "2"}, 0, 2),
    ({"CUDA_VISIBLE_DEVICES": "GPU-8a3c,GPU-77aa"}, 1, 1),  # UUIDs: left as they are
    ({"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1"}, 0, 3),  # HIP within ROCR
])
def test_the_vendor_index_follows_the_visible_devices(env, index, expected) -> None:
    assert vendor_index(index, env) == expected
    assert vendor_index(None, env) is None


def test_a_telemetry_library_that_fails_to_open_costs_nothing_but_its_readings(monkeypatch):
    """The sampling process opens the sources: one that raises there leaves a series
    that says why (serve, the child's loop, run here on strings)."""
    import io
    import json

    import accelbench.env.telemetry.sources as sources
    from accelbench.env.telemetry.remote import serve

    def broken(*args, **kwargs):
        raise OSError("libamd_smi.so: cannot open shared object file")

    monkeypatch.setattr(sources, "open_sources", broken)
    asked = json.dumps({"device_type": "cuda", "device_index": 0, "interval_s": 0.01,
                        "include": None, "missing": {}})
    out = io.StringIO()
    assert serve(io.StringIO(asked + "\n" + '{"stop": true}\n'), out) == 0
    started, answer = (json.loads(line) for line in out.getvalue().splitlines())
    assert "libamd_smi.so" in started["started"]["telemetry"]
    series = Series.from_dict(answer["series"])
    assert "libamd_smi.so" in series.missing["telemetry"] and series.sources == ()


def test_the_readings_are_taken_by_a_process_of_their_own(monkeypatch) -> None:
    import dataclasses

    from accelbench.env.telemetry import remote

    started = []
    real = remote.RemoteSampler.start

    def spy(self):
        sampler = real(self)
        started.append(self._proc.pid if self._proc else None)
        return sampler

    monkeypatch.setattr(remote.RemoteSampler, "start", spy)
    m = _ok_case(dataclasses.replace(BRIEF, telemetry_interval=0.01))
    assert m.ok and len(started) == 1 and started[0] is not None
    series = Series.from_dict(m.telemetry[0])
    assert "host" in series.sources and remote.IN_PROCESS not in series.missing


def test_a_vendor_library_failing_its_own_way_costs_only_itself(tmp_path) -> None:
    from accelbench.env.telemetry import open_sources

    def importer(name):
        raise RuntimeError(f"{name}: driver/library version mismatch")

    def runner(*args, **kwargs):
        raise FileNotFoundError("amd-smi")

    sources, missing = open_sources("cuda", 0, importer=importer, runner=runner,
                                    sysfs=tmp_path, procfs=tmp_path)
    assert [s.name for s in sources] == ["host"]
    assert "version mismatch" in missing["nvml"] and "version mismatch" in missing["amdsmi"]
