"""The analysis of recorded-style GPU traces (CUDA and ROCm), against figures worked out
by hand from the timeline in tests/fixtures/traces/make_traces.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from accelbench.profile.analysis import analyze, analyze_file
from accelbench.profile.trace import TraceError, parse, read_json
from accelbench.report.profile import profile_markdown, profile_summary_rows

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"
CUDA = TRACES / "cuda_h100_rank0.pt.trace.json.gz"
ROCM = TRACES / "rocm_mi250x_rank0.pt.trace.json.gz"
US = 1e-6


@pytest.fixture(params=[CUDA, ROCM], ids=["cuda", "rocm"])
def trace_file(request):
    return request.param


def test_the_device_breakdown_adds_up_to_the_window(trace_file):
    a = analyze_file(trace_file)
    assert a["basis"] == "device"
    assert a["platform"] == ("cuda" if trace_file == CUDA else "rocm")
    # Two steps of 100 us; the optimizer kernel of the last one ends at 209 us.
    assert a["window"]["steps"] == 2 and a["window"]["step_numbers"] == [3, 4]
    assert a["window"]["duration_s"] == pytest.approx(209 * US)
    parts = a["breakdown"]["parts_s"]
    # compute: GEMM 40 + add 5 per step, optimizer 10; communication: the all-reduce's
    # 15 us per step not under the GEMM; memory: copy 5 (not under the all-reduce) + fill 2
    # per step; idle: the rest.
    expected = {"compute": 100, "communication": 30, "memory": 14, "idle": 65}
    assert parts == pytest.approx({k: v * US for k, v in expected.items()})
    assert sum(parts.values()) == pytest.approx(a["window"]["duration_s"])
    assert a["breakdown"]["shares"]["compute"] == pytest.approx(100 / 209)
    assert [d["device"] for d in a["devices"]] == [0]


def test_communication_overlap(trace_file):
    overlap = analyze_file(trace_file)["overlap"]
    assert overlap["communication_s"] == pytest.approx(60 * US)
    assert overlap["overlapped_s"] == pytest.approx(30 * US)  # [45, 60) of each step
    assert overlap["exposed_s"] == pytest.approx(30 * US)
    assert overlap["ratio"] == pytest.approx(0.5)


def test_launch_statistics(trace_file):
    launches = analyze_file(trace_file)["launches"]
    assert launches["launches"] == 7 and launches["linked"] == 7
    assert launches["launches_per_step"] == pytest.approx(3.5)
    # ROCm copies run as blit kernels: two more kernels, no more launches.
    assert launches["kernels"] == (7 if trace_file == CUDA else 9)
    overhead = launches["cpu_overhead_s"]  # 6, 8, 3 per step and 3
    assert overhead["mean"] == pytest.approx(37 / 7 * US)
    assert overhead["median"] == pytest.approx(6 * US)
    assert overhead["max"] == pytest.approx(8 * US)
    delay = launches["launch_delay_s"]  # 4, 2, 1 per step and 2
    assert delay["mean"] == pytest.approx(16 / 7 * US)
    assert delay["median"] == pytest.approx(2 * US)
    assert delay["max"] == pytest.approx(4 * US)


def test_launches_are_linked_by_flow_events_without_correlation_ids():
    data = read_json(CUDA)
    for event in data["traceEvents"]:
        event.get("args", {}).pop("correlation", None)
    launches = analyze(parse(data))["launches"]
    assert launches["linked"] == 7
    assert launches["launch_delay_s"]["median"] == pytest.approx(2 * US)


def test_top_kernels_and_operators(trace_file):
    a = analyze_file(trace_file)
    kernels = a["top_kernels"]
    assert [k["category"] for k in kernels] == [
        "compute", "communication", "memory", "compute", "compute", "memory"]
    assert kernels[0]["calls"] == 2 and kernels[0]["time_s"] == pytest.approx(80 * US)
    assert kernels[0]["share"] == pytest.approx(80 / 184)
    assert kernels[1]["name"].startswith("ncclDevKernel")
    operators = {o["name"]: o for o in a["top_operators"]}
    assert operators["aten::mm"]["self_s"] == pytest.approx(40 * US)
    assert operators["aten::mm"]["share"] == pytest.approx(40 / 140)
    # Nested calls: c10d::allreduce_ [30, 48) around record_param_comms [32, 46).
    assert operators["c10d::allreduce_"]["self_s"] == pytest.approx(8 * US)
    assert operators["c10d::allreduce_"]["total_s"] == pytest.approx(36 * US)
    assert operators["c10d::allreduce_"]["category"] == "communication"
    assert operators["aten::zero_"]["self_s"] == pytest.approx(2 * US)
    assert a["top_operators"][0]["name"] == "aten::mm"


def test_memory_peaks(trace_file):
    memory = analyze_file(trace_file)["memory"]
    assert memory["peak_allocated_bytes"] == {"cuda:0": 5 << 20, "cpu": 64 << 10}
    assert memory["peak_reserved_bytes"]["cuda:0"] == 6 << 20


def test_device_annotations_and_spans_are_not_device_activity():
    trace = parse(read_json(CUDA))
    assert {e.cat for e in trace.device} == {"kernel", "gpu_memcpy", "gpu_memset"}
    assert len(trace.steps) == 2  # the gpu_user_annotation copies are not steps


def test_the_summary_and_markdown_say_it_in_words(trace_file):
    a = analyze_file(trace_file)
    rows = dict(profile_summary_rows(a))
    assert rows["Profiled"].startswith("2 steps, 209 µs")
    assert rows["Device time"] == ("compute 47.8%, communication 14.4%, memory 6.7%, "
                                   "idle 31.1%")
    assert "3.5 per step" in rows["Kernel launches"]
    assert "50.0% overlapped with compute" in rows["Communication"]
    assert rows["Memory peak"] == "cuda:0 5.00 MiB, cpu 64.0 KiB"
    text = profile_markdown(a, "Profile of gemm")
    assert text.startswith("### Profile of gemm\n")
    assert "| compute | 100 µs | 47.8% |" in text
    assert "| idle | 65.0 µs | 31.1% |" in text
    assert "| aten::mm | 2 | 40.0 µs | 40.0 µs | 28.6% |" in text
    assert "<" not in text.replace("&lt;", "")  # kernel templates cannot break the table


def test_stored_analyses_of_a_newer_format_or_with_an_error_are_shown_as_such():
    assert "newer" in profile_summary_rows({"format_version": 99})[0][1]
    assert profile_summary_rows({"format_version": 1, "error": "bad"}) == [
        ("Profile", "not analysed: bad")]


def test_a_file_that_is_not_a_trace_is_refused(tmp_path):
    bad = tmp_path / "x.pt.trace.json.gz"
    bad.write_bytes(gzip.compress(b"{not json"))
    with pytest.raises(TraceError, match="not a profiler trace"):
        analyze_file(bad)
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(TraceError, match="no traceEvents"):
        analyze_file(bad)
    with pytest.raises(TraceError, match="cannot read"):
        analyze_file(tmp_path / "missing.json")


def test_the_fixtures_are_what_the_generator_writes(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_traces", TRACES / "make_traces.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    for path in (CUDA, ROCM):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()
