"""Unified memory on the GPU, in one run through the runner beside the memory benchmark's
device copy (D2D): the scale kernel on device, zero-copy host and managed memory, the
first GPU touch of managed memory and the hand-off through each kind (the quick suite's
slice at 256 MiB)."""

from __future__ import annotations

import math

import pytest
from gpu_runs import run_on_gpu

from accelbench.core.peaks import lookup

pytestmark = pytest.mark.gpu

SIZE_MIB = 256
BYTES = SIZE_MIB << 20


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = tmp_path_factory.mktemp("unified-memory") / "results.sqlite"
    return run_on_gpu(store, ["memory", "unified-memory"], {"size_mib": str(SIZE_MIB)})


def _unified(run):
    return {(m.case.param_dict["op"], m.case.param_dict.get("memory", "managed")): m
            for m in run.measurements if m.case.benchmark == "unified-memory"}


def _integrated(gpu) -> bool:
    """What PyTorch says of the device, or its product (an MI300A is an APU)."""
    import torch

    from accelbench.core.product import shares_host_memory

    props = torch.cuda.get_device_properties(gpu.device.index or 0)
    return bool(getattr(props, "is_integrated", False)) or bool(shares_host_memory(gpu.device))


def _peak(gpu) -> float | None:
    peaks = lookup(gpu.device)
    return peaks.memory_bandwidth if peaks else None


def _link_peak(m, *, both_ways: bool) -> float | None:
    """The host link's peak as the case recorded the link: None where sysfs showed none."""
    link = m.details.get("host_link")
    if link is None:
        return None
    assert "host link" in m.details["peak_of"]
    return float(link["per_direction_bytes"]) * (2 if both_ways else 1)


def test_every_case_of_the_slice_ran_or_says_why_managed_memory_cannot(run):
    cases = _unified(run)
    assert sorted(cases) == sorted(
        [("bandwidth", kind) for kind in ("device", "host", "managed")]
        + [("first-touch", "managed")]
        + [("handoff", kind) for kind in ("device", "host", "managed")])
    for (op, kind), m in cases.items():
        if kind == "managed" and m.status == "skipped":
            assert "cannot use managed memory" in (m.reason or ""), (op, m.reason)
            continue
        assert m.status == "ok", (op, kind, m.reason)


def test_zero_copy_and_resident_bandwidth_beside_device_memory_and_the_d2d_copy(run, gpu):
    cases = _unified(run)
    device_peak = _peak(gpu)
    apu = _integrated(gpu)
    for kind in ("device", "host", "managed"):
        m = cases[("bandwidth", kind)]
        if not m.ok:
            continue
        assert m.details["bytes_per_call"] == 2 * BYTES
        assert m.details["integrated"] is apu
        bandwidth = m.figure("bandwidth")
        assert bandwidth.unit == "B/s" and math.isfinite(bandwidth.value) and bandwidth.value > 0
        # managed memory runs in device memory only where it migrates (not on ROCm
        # without XNACK, where it stays host-resident and crosses the link)
        in_device = kind == "device" or (
            kind == "managed" and m.details["managed_memory"] == "migrates")
        # elsewhere the bytes cross the host link: a share of its peak, both ways together,
        # where sysfs shows the link (recorded as `host_link`), else no peak
        expected = device_peak if (apu or in_device) else _link_peak(m, both_ways=True)
        assert bandwidth.peak == pytest.approx(expected) if expected else \
            bandwidth.peak is None, (kind, m.details.get("peak_of"))
        allocated = m.details["allocated_with"]
        if kind == "device":
            assert allocated.startswith("torch.empty")
        else:
            assert allocated.startswith(("hip", "cuda")), allocated
            assert "libamdhip64" in m.details["runtime_library"] or \
                "libcudart" in m.details["runtime_library"]
    copy = next(m for m in run.measurements if m.case.benchmark == "memory"
                and m.case.param_dict["op"] == "copy")
    assert copy.ok and copy.figure("bandwidth").value > 0


def test_the_first_gpu_touch_of_managed_memory_is_a_transfer_rate_and_a_time(run, gpu):
    m = _unified(run)[("first-touch", "managed")]
    if not m.ok:
        pytest.skip(m.reason or "managed memory is not available")
    assert m.details["bytes_per_call"] == BYTES
    assert m.figure("transfer_rate").value > 0 and m.figure("time").value > 0
    # across the link on a discrete GPU, one way (a share of the link's peak where sysfs
    # shows it); a share of the one memory on an APU
    expected = _peak(gpu) if _integrated(gpu) else _link_peak(m, both_ways=False)
    peak = m.figure("transfer_rate").peak
    assert peak == pytest.approx(expected) if expected else peak is None, \
        m.details.get("peak_of")
    assert m.details["allocated_with"].endswith("MemAttachGlobal)")


def test_the_handoff_through_each_kind_is_a_latency(run):
    cases = _unified(run)
    for kind in ("device", "host", "managed"):
        m = cases[("handoff", kind)]
        if not m.ok:
            continue
        latency = m.figure("latency")
        assert m.primary == latency
        assert latency.unit == "s" and math.isfinite(latency.value) and latency.value > 0
        assert "size_mib" not in m.case.param_dict


def test_the_fingerprint_says_whether_the_gpu_is_an_apu(run, gpu):
    model = run.fingerprint["memory_model"]
    assert model["integrated"] is _integrated(gpu)
    if gpu.platform == "rocm":
        assert model["xnack"] in (True, False, None) and model["xnack_by"]
    else:
        assert "xnack" not in model
