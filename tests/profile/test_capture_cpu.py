"""A tiny model's training step profiled on the CPU through the capture API."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from accelbench.core.timing import PerfCounterClock
from accelbench.profile.analysis import analyze_file
from accelbench.profile.capture import TRACE_SUFFIX, Schedule, profile_steps
from accelbench.profile.categories import PARTS

torch = pytest.importorskip("torch")


def _training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("tb") / "run-1"
    schedule = Schedule(wait=1, warmup=2, active=3, memory=True)
    capture = profile_steps(_training_step(), PerfCounterClock(), "cpu", schedule, out,
                            worker_name="worker0")
    return out, capture


def test_the_trace_is_written_where_tensorboard_looks_for_it(captured):
    out, capture = captured
    (path,) = capture.trace_paths
    assert path.parent == out
    assert re.fullmatch(r"worker0\.\d+" + re.escape(TRACE_SUFFIX), path.name)
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert data["traceEvents"]


def test_the_trace_holds_the_operators_and_only_the_active_steps(captured):
    _, capture = captured
    data = json.loads(gzip.decompress(capture.trace_paths[0].read_bytes()))
    names = {e.get("name") for e in data["traceEvents"] if e.get("cat") == "cpu_op"}
    assert {"aten::addmm", "aten::relu"} <= names  # forward
    assert any("Backward" in n for n in names)  # backward
    steps = sorted(e["name"] for e in data["traceEvents"]
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    # wait=1 and warmup=2: steps 0 to 2 ran but are not in the trace.
    assert steps == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]
    assert len(capture.step_seconds) == 3 and all(s > 0 for s in capture.step_seconds)


def test_the_cpu_breakdown_adds_up_to_the_profiled_steps(captured):
    _, capture = captured
    analysis = analyze_file(capture.trace_paths[0])
    assert analysis["basis"] == "cpu" and analysis["platform"] == "cpu"
    window = analysis["window"]
    assert window["steps"] == 3 and window["step_numbers"] == [3, 4, 5]
    breakdown = analysis["breakdown"]
    parts = breakdown["parts_s"]
    assert set(parts) == set(PARTS) and all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(window["duration_s"], rel=1e-9)
    assert sum(breakdown["shares"].values()) == pytest.approx(1.0)
    # The window holds the three steps (the profiler's own gaps between them vary with
    # the machine's load, so only the lower bound is exact).
    assert window["duration_s"] >= 3 * window["step_s"]["mean"] * (1 - 1e-9)
    assert parts["compute"] > 0
    assert analysis["launches"] is None and analysis["top_kernels"] == []
    top = {o["name"] for o in analysis["top_operators"]}
    assert top & {"aten::addmm", "aten::mm"}
    assert sum(o["share"] for o in analysis["top_operators"]) <= 1.0 + 1e-9
    assert analysis["memory"]["peak_allocated_bytes"]["cpu"] > 0
