"""Bandwidth (device copy, host-to-device, device-to-host) and launch latency (eager
launches, graph replay) on the GPU, in one run through the runner as `accelbench run`."""

from __future__ import annotations

import pytest
from gpu_runs import run_on_gpu

from accelbench.core.peaks import lookup

pytestmark = pytest.mark.gpu

SIZE_MIB = 256
MOVED = {"copy": 2, "h2d": 1, "d2h": 1}  # buffers each call moves


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = tmp_path_factory.mktemp("memory-launch") / "results.sqlite"
    return run_on_gpu(store, ["memory", "launch"],
                      {"op": "copy,h2d,d2h", "size_mib": str(SIZE_MIB), "pinned": "true,false",
                       "mode": "eager,graph"})


def test_the_run_is_stored_as_measured_on_the_gpu(run, gpu):
    assert run.record.status == "complete", [m.reason for m in run.measurements]
    assert run.record.device == gpu.device.torch_device
    assert run.fingerprint["platform"] == gpu.platform
    assert run.fingerprint["device"]["name"] == gpu.device.name
    assert {m.case.device for m in run.measurements} == {gpu.device.torch_device}


def test_copies_move_what_they_say_at_a_measured_bandwidth(run, gpu):
    memory = [m for m in run.measurements if m.case.benchmark == "memory"]
    # A device copy has no host buffer: `pinned` splits the transfers only.
    cases = {(m.case.param_dict["op"], m.case.param_dict.get("pinned")) for m in memory}
    assert cases == {("copy", None), *((op, pinned) for op in ("h2d", "d2h")
                                       for pinned in (True, False))}
    peaks = lookup(gpu.device)
    for m in memory:
        op, pinned = m.case.param_dict["op"], m.case.param_dict.get("pinned")
        assert m.status == "ok", (op, pinned, m.reason)
        assert m.details["bytes_per_call"] == MOVED[op] * SIZE_MIB << 20
        # Bytes read plus written (STREAM) for the copy; moved once for a transfer.
        bandwidth = m.figure("bandwidth" if op == "copy" else "transfer_rate")
        assert bandwidth.unit == "B/s" and bandwidth.value > 0
        if op == "copy":
            assert bandwidth.peak == (peaks.memory_bandwidth if peaks else None)
        else:  # the link has no published per-device peak
            assert m.details["pinned"] is pinned
            assert bandwidth.peak is None


def test_eager_launches_and_graph_replays_are_timed(run):
    launch = {m.case.param_dict["mode"]: m for m in run.measurements
              if m.case.benchmark == "launch"}
    assert sorted(launch) == ["eager", "graph"]
    timed = {"eager": "back-to-back eager calls", "graph": "graph.replay()"}
    for mode, m in launch.items():
        assert m.status == "ok", (mode, m.reason)
        assert m.details["timed"] == timed[mode]
        latency = m.figure("latency")
        assert latency.unit == "s" and latency.value > 0
        assert m.primary == latency  # a latency is the headline: no rate
