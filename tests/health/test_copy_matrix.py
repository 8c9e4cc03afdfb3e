"""The copy matrix: the host paths measured for real on this CPU, and the naming of slow
devices and links on matrices a GPU node would give."""

from __future__ import annotations

import os

import pytest
import torch

from accelbench.benchmarks.health import copy_matrix, numa_place, sysfs
from accelbench.benchmarks.health.copy_paths import CopyPath, check_arrived, host_path, pattern
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed
from accelbench.core.timing import PerfCounterClock, TimingPolicy

pytestmark = pytest.mark.torch_api  # PyTorch's tensors, threads and streams

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
BRIEF = TimingPolicy(warmup_time=0.0, max_time=0.05, min_samples=3, max_samples=5)
GB = 1e9


def _path(kind: str, source: str, target: str, gbs: float, placed: str | None = None
          ) -> CopyPath:
    return CopyPath(kind, source, target, int(GB), (1.0 / gbs,) * 3, placed)


def _gpu_node(slow: dict[tuple[str, str], float] | None = None, host: float = 50.0,
              slow_host: str | None = None, gpus: int = 4) -> list[CopyPath]:
    """One-way copies between every pair at 100 GB/s (the pairs in `slow` at their
    figure), and each GPU's host link at `host` GB/s (half that for `slow_host`)."""
    slow = slow or {}
    names = [f"gpu{i}" for i in range(gpus)]
    out = [_path("d2d", a, b, slow.get((a, b), slow.get((b, a), 100.0)))
           for a in names for b in names if a != b]
    for g in names:
        rate = host / 2 if g == slow_host else host
        out += [_path("h2d", "node0", g, rate, "node0"), _path("d2h", g, "node0", rate, "node0")]
    return out


def test_this_cpu_copies_its_own_memory_checked_and_placed() -> None:
    ctx = CaseContext(CPU, PerfCounterClock(), BRIEF)
    cpus = sorted(os.sched_getaffinity(0))
    path = host_path(torch, ctx, cpus, 0, cpus, 0, 1 << 20)
    assert path.kind == "host" and path.source == path.target == "node0"
    assert len(path.seconds) >= 3 and path.bandwidth > 0
    assert path.placed in (None, "node0")  # None where the kernel cannot be asked
    assert os.sched_getaffinity(0) == set(cpus)  # the pinning is undone


def test_pinning_moves_every_thread_and_is_undone() -> None:
    before = os.sched_getaffinity(0)
    with numa_place.pinned([min(before)]):
        assert all(os.sched_getaffinity(t) == {min(before)} for t in numa_place.threads())
    assert os.sched_getaffinity(0) == before


def test_the_kernel_says_where_touched_pages_are() -> None:
    buffer = torch.ones(4 << 20, dtype=torch.uint8)
    nodes = numa_place.page_nodes(buffer.data_ptr(), buffer.numel())
    if nodes is None:
        pytest.skip("move_pages cannot be asked on this kernel or architecture")
    assert nodes and all(n >= 0 for n in nodes)


def test_a_copy_that_loses_bytes_fails_before_it_is_timed() -> None:
    expected = pattern(torch, 4096, "cpu")
    got = expected.clone()
    got[1000:1010] = 255  # the pattern never holds 255
    with pytest.raises(CaseFailed, match=r"wrong data: gpu0 to gpu1: 10 of 4096 bytes .* "
                                         r"first at byte 1000"):
        check_arrived(torch, "gpu0 to gpu1", got, expected)


def test_a_healthy_gpu_node_names_nothing() -> None:
    found = copy_matrix.device_findings(_gpu_node(), {"gpu0": 63 * GB})
    assert all(f.level == PASS for f in found), [f.message for f in found if f.level != PASS]
    share = next(f for f in found if f.subject == "gpu0 h2d")
    assert "79% of its PCIe link" in share.message


def test_a_slow_link_between_two_gpus_is_named() -> None:
    found = copy_matrix.device_findings(_gpu_node({("gpu1", "gpu2"): 40.0}), {})
    failed = [f for f in found if f.level == FAIL]
    assert [f.subject for f in failed] == ["gpu1-gpu2"]
    assert "link gpu1-gpu2: 40.0 GB/s, 2.50x slower than the median 100.0 GB/s" in (
        failed[0].message)


def test_a_gpu_whose_every_path_is_slow_is_named_not_its_links() -> None:
    slow = {("gpu3", g): 30.0 for g in ("gpu0", "gpu1", "gpu2")}
    failed = [f for f in copy_matrix.device_findings(_gpu_node(slow, gpus=5), {})
              if f.level == FAIL]
    assert [f.subject for f in failed] == ["gpu3"]
    assert failed[0].reading["what"] == "device"


def test_a_gpu_with_a_slow_host_link_fails() -> None:
    failed = [f for f in copy_matrix.device_findings(_gpu_node(slow_host="gpu2"), {})
              if f.level == FAIL]
    assert sorted(f.subject for f in failed) == ["gpu2 d2h", "gpu2 h2d"]


def test_memory_not_where_it_was_asked_warns() -> None:
    paths = [_path("host", "node0", "node1", 10.0, placed="node0"),
             _path("host", "node0", "node0", 20.0, placed="node0"),
             _path("host", "node1", "node1", 20.0, placed="node1"),
             _path("host", "node1", "node0", 10.0, placed="node0")]
    found = copy_matrix.host_findings(paths)
    warned = [f for f in found if f.level == WARN]
    assert [f.subject for f in warned] == ["node0->node1"]
    assert warned[0].reading == {"asked": "node1", "placed": "node0"}


def test_a_numa_node_slow_in_its_own_memory_warns() -> None:
    paths = [_path("host", "node0", "node0", 20.0), _path("host", "node1", "node1", 12.0)]
    levels = {f.subject: f.level for f in copy_matrix.host_findings(paths)}
    assert levels == {"node0": PASS, "node1": WARN}


def test_the_copy_matrix_case_runs_on_this_cpu(execute_health) -> None:
    m = execute_health("copy-matrix", bytes="1M")
    assert m.status == "ok", m.reason
    paths = m.details["paths"]
    nodes = {n.node for n in sysfs.numa_nodes() if n.cpus} or {0}
    assert len(paths) == len(nodes) ** 2 and all(p["kind"] == "host" for p in paths)
    figures = {f.name: f.value for f in m.measured}
    assert 0 < figures["min_transfer_rate"] <= figures["median_transfer_rate"]


def test_a_slow_link_through_the_copy_kernel_is_named_beside_the_copy_engines() -> None:
    paths = _gpu_node() + [_path("d2d-kernel", f"gpu{a}", f"gpu{b}",
                                 35.0 if {a, b} == {0, 3} else 90.0)
                           for a in range(4) for b in range(4) if a != b]
    failed = [f for f in copy_matrix.device_findings(paths, {}) if f.level == FAIL]
    assert [f.subject for f in failed] == ["gpu0-gpu3 (copy kernel)"]
    assert "copy-kernel transfer rate" in failed[0].rule
    assert "35.0 GB/s, 2.57x slower than the median 90.0 GB/s" in failed[0].message


def _peers(gpus: int = 4, missing: tuple[str, str] | None = None) -> dict[tuple[str, str], bool]:
    names = [f"gpu{i}" for i in range(gpus)]
    return {(a, b): (a, b) != missing for a in names for b in names if a != b}


def test_gpus_that_cannot_reach_each_others_memory_warn() -> None:
    found = copy_matrix.device_findings(_gpu_node(), {}, _peers(missing=("gpu2", "gpu1")))
    warned = [f for f in found if f.level == WARN]
    assert [f.subject for f in warned] == ["gpu1-gpu2 peer"]
    assert warned[0].reading == {"a_to_b": True, "b_to_a": False}
    assert "staged through host memory" in warned[0].message


def test_peer_access_that_gains_nothing_warns() -> None:
    staged = [_path("d2d-nopeer", "gpu0", "gpu1", 95.0), _path("d2d-nopeer", "gpu1", "gpu0", 20.0)]
    found = copy_matrix.device_findings(_gpu_node() + staged, {}, _peers())
    peer = {f.subject: f for f in found if f.subject.endswith(" peer")}
    assert peer["gpu0->gpu1 peer"].level == WARN
    assert peer["gpu0->gpu1 peer"].message == ("100.0 GB/s with peer access, 95.0 GB/s "
                                               "without (1.05x)")
    assert peer["gpu1->gpu0 peer"].level == PASS
    assert peer["gpu1->gpu0 peer"].reading["gain"] == pytest.approx(5.0)
