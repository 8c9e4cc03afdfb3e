"""`accelbench isolate` across three hosts (network namespaces on one bridge), one Gloo
rank each under torchrun's c10d rendezvous: node2's link is slowed with a token bucket,
and node2 must be the node named. The slowed link (1 Mbit/s) is a hundred times slower
than the others or more, which holds on a loaded machine; the messages are small, so the
test spends seconds, not minutes, in the slowed link."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.store import Store
from netns import hosts

pytestmark = [pytest.mark.multinode, pytest.mark.slow]

PORT = 29500


def test_isolate_names_the_node_whose_link_is_slowed(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    with hosts(3) as nodes:
        nodes[2].slow()
        head = nodes[0].address
        env = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
        procs = []
        try:
            for rank, host in enumerate(nodes):
                argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "3",
                        "--nproc-per-node", "1", "--node-rank", str(rank),
                        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{head}:{PORT}",
                        "--rdzv-id", "isolate-test", "-m", "accelbench", "isolate",
                        "--device", "cpu", "--bytes", "16K", "--latency-bytes", "8",
                        "--samples", "3", "--iters", "1", "--warmup", "1",
                        "--store", str(store), "--no-report", "--json"]
                procs.append(host.popen(argv, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE))
            outputs = [p.communicate(timeout=300) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
    printed = [out for out, _ in outputs if out.strip().startswith("{")]
    errors = "\n".join(err[-2000:] for _, err in outputs)
    assert len(printed) == 1, errors  # rank 0 alone stores and prints
    out = json.loads(printed[0])
    assert out["named"] == ["node2"], (out["verdicts"], errors)
    with Store.open(store, create=False) as s:
        (m,) = s.load_run(out["run_id"]).measurements
    assert m.ok, m.reason
    assert sorted(m.details["nodes"]) == ["node0", "node1", "node2"]
    assert len(m.details["pairs"]) == 3 and m.details["rounds"] == 3
    assert {p["kind"] for p in m.details["pairs"]} == {"node"}
    (fabric,) = out["verdicts"][0]["fabrics"]
    named = [n for n in fabric["named"] if n["name"] == "node2"]
    assert {n["metric"] for n in named} >= {"busbw", "p2p_bw"}
    assert all(n["slow_pairs"] == n["pairs"] == 2 for n in named if n["metric"] != "latency")
    # Sure of it: the last three passes, and most passes, named node2 (and only node2).
    verdict = out["verdicts"][0]
    assert verdict["conclusive"] and m.details["conclusive"]
    passes = verdict["settled"]["passes"]
    assert passes[-3:] == [["node2"]] * 3 and len(passes) == m.details["passes"]
    assert any("named in" in line and "passes" in line for line in verdict["lines"])
    # Rank 0's exit code says a node was named; torchrun passes it on.
    assert sorted(p.returncode for p in procs)[-1] == 1
