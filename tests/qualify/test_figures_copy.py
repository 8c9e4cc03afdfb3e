"""The host-link figures' copies on a faked two-socket GPU node (fake_gpu_torch): each GPU's
pinned memory on its own nearest NUMA node, both host ends checked."""

from __future__ import annotations

from accelbench.benchmarks.qualify import figures_copy
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from fake_gpu_torch import installed

H100 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA H100 80GB HBM3",
                  arch="sm_90", memory_bytes=80 << 30)
BRIEF = TimingPolicy(warmup_time=0.0, max_time=0.02, min_samples=3, max_samples=3)
NODES = {0: (0, 1), 1: (2, 3)}
NBYTES = 4096


def test_each_gpu_s_host_link_both_ways_uses_memory_on_its_own_node(monkeypatch) -> None:
    torch = installed(monkeypatch, 2, NODES)
    ctx = CaseContext(H100, PerfCounterClock(), BRIEF)
    first = figures_copy.both_ways(torch, ctx, NODES[0], 0, NBYTES)
    second = figures_copy.both_ways(torch, ctx, NODES[1], 1, NBYTES)
    assert (first[1:], second[1:]) == ((2 * NBYTES, "node0"), (2 * NBYTES, "node1"))
    gpu1 = [end for c in torch.cuda.copies if 1 in (c.source.index, c.target.index)
            for end in c.host]
    assert gpu1 and all(node == 1 for _, node in gpu1)  # both ends: read and written
    assert {address for address, _ in gpu1} <= set(torch.nodes.asked)
    assert not torch.cuda.registered
