"""The copy matrix's GPU paths on a faked GPU node (fake_gpu_torch): host memory lands on
the NUMA node asked, each end of a host copy is checked, and the copies all at once run
on streams of their own."""

from __future__ import annotations

from accelbench.benchmarks.health import copy_matrix, copy_paths, sysfs
from accelbench.benchmarks.health.findings import WARN
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from fake_gpu_torch import FakeTorch, installed

MI300X = DeviceInfo(type="cuda", index=0, platform="rocm", name="AMD Instinct MI300X",
                    arch="gfx942", memory_bytes=192 << 30)
CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
BRIEF = TimingPolicy(warmup_time=0.0, max_time=0.02, min_samples=3, max_samples=3)
NODES = {0: (0, 1), 1: (2, 3)}  # two sockets: the CPUs of each NUMA node
NBYTES = 4096


def _ctx(device: DeviceInfo = MI300X) -> CaseContext:
    return CaseContext(device, PerfCounterClock(), BRIEF)


def _host_ends(torch: FakeTorch) -> list[tuple[int, int | None]]:
    """Every host buffer a copy to or from a GPU read or wrote: (address, node)."""
    return [end for c in torch.cuda.copies if c.stream is not None for end in c.host]


def _timed_ends(torch: FakeTorch) -> set[int]:
    """The host buffers of the copy timed last: the path's own copy."""
    return {address for address, _ in torch.cuda.copies[-1].host}


def test_each_numa_node_s_pinned_memory_is_its_own_and_measured(monkeypatch) -> None:
    torch = installed(monkeypatch, 1, NODES)
    numa = [sysfs.NumaNode(n, cpus, None, None, ()) for n, cpus in NODES.items()]
    paths, _, _ = copy_matrix._device_matrix(torch, _ctx(), numa, NBYTES)
    placed = {(p.kind, p.source if p.kind == "h2d" else p.target): p.placed for p in paths}
    assert placed == {("h2d", "node0"): "node0", ("d2h", "node0"): "node0",
                      ("h2d", "node1"): "node1", ("d2h", "node1"): "node1"}
    found = copy_matrix.device_findings(paths, {})
    assert not [f.message for f in found if f.code == "ACCEL_NUMA_PLACEMENT"]
    # The GPU copied from and into each node's own memory, not one node's twice.
    assert {node for _, node in _host_ends(torch)} == {0, 1}
    assert not torch.cuda.registered  # every registration undone


def test_both_ends_of_a_host_copy_are_checked_and_a_misplaced_destination_warns(
        monkeypatch) -> None:
    torch = installed(monkeypatch, 1, NODES)
    d2h = copy_paths.host_device_path(torch, _ctx(), 1, NODES[1], 0, False, NBYTES)
    written = [end for c in torch.cuda.copies if c.source.type == "cuda"
               and c.target.type == "cpu" for end in c.host]
    assert written and all(node == 1 for _, node in written)  # the GPU wrote into node1
    assert d2h.placed == "node1"
    assert _timed_ends(torch) <= set(torch.nodes.asked)

    cpu = installed(monkeypatch, 0, NODES)
    copy_paths.host_path(cpu, _ctx(CPU), NODES[0], 0, NODES[1], 1, NBYTES)
    assert len(_timed_ends(cpu)) == 2 and _timed_ends(cpu) <= set(cpu.nodes.asked)

    full = installed(monkeypatch, 1, NODES, full=[1])  # node1's pages spill to node0
    d2h = copy_paths.host_device_path(full, _ctx(), 1, NODES[1], 0, False, NBYTES)
    [warned] = [f for f in copy_matrix.device_findings([d2h], {}) if f.level == WARN]
    assert warned.subject == "gpu0->node1" and warned.code == "ACCEL_NUMA_PLACEMENT"
    assert warned.reading == {"asked": "node1", "placed": "node0"}
    assert "destination" in warned.message


def test_all_at_once_every_pair_copies_on_streams_of_its_own(monkeypatch) -> None:
    torch = installed(monkeypatch, 4, NODES)
    path = copy_paths.all_to_all(torch, _ctx(), range(4), NBYTES)
    assert path.kind == "all" and path.nbytes == 12 * NBYTES
    copies = torch.cuda.copies
    pairs = {c.pair for c in copies}
    assert pairs == {(a, b) for a in range(4) for b in range(4) if a != b}
    # PyTorch runs a copy on its source's current stream, with a barrier on its
    # destination's: a stream shared by two pairs would run their copies one by one.
    lanes = {c.pair: (c.stream, c.barrier) for c in copies}
    assert all(lanes[c.pair] == (c.stream, c.barrier) for c in copies)
    streams = [s for lane in lanes.values() for s in lane]
    assert len({id(s) for s in streams}) == 24
    assert not any(s is None or s.default for s in streams)
    # Each pair's streams first wait for the data made on the devices' current streams.
    for (a, b), (stream, barrier) in lanes.items():
        assert stream is not None and barrier is not None
        assert torch.cuda.defaults[a] in stream.waited
        assert torch.cuda.defaults[b] in barrier.waited


def test_both_ways_each_copy_waits_for_its_data_on_streams_of_its_own(monkeypatch) -> None:
    torch = installed(monkeypatch, 2, NODES)
    copy_paths.both_ways(torch, _ctx(), 0, 1, NBYTES)
    lanes = {c.pair: (c.stream, c.barrier) for c in torch.cuda.copies}
    assert set(lanes) == {(0, 1), (1, 0)}
    for (a, b), (stream, barrier) in lanes.items():
        assert stream is not None and barrier is not None
        assert torch.cuda.defaults[a] in stream.waited  # the bytes it copies, made
        assert torch.cuda.defaults[b] in barrier.waited
