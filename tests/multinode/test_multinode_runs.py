"""Real multi-node jobs over TCP: a torchrun per host (tests/netns.py), joined by c10d's
rendezvous on node0, Gloo ranks on the CPU, `-m accelbench` on every rank. Rank 0 writes
the store, a SQLite file every namespace sees (they share the file system).

Then a node dies (SIGKILL of its torchrun and ranks) and a node hangs (SIGSTOP) during a
case: the other node's ranks end, and the run is stored as failed, with what was measured
before, the case in flight naming the lost node, and the cases left marked not run. Each
is coordinated on the store: the node is stopped once the two quick cases are stored,
while the third runs (its samples are a hundred million calls each, which no machine
finishes).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from accelbench.store import Store
from netns import Host, hosts

if TYPE_CHECKING:
    from accelbench.store.records import StoredRun

pytestmark = [pytest.mark.multinode, pytest.mark.slow, pytest.mark.timeout(900)]

SRC = str(Path(__file__).resolve().parents[2] / "src")
# Generous for a loaded 2-core machine: every rank imports torch and joins the group.
JOB_LIMIT_S = 600
QUICK = ["--max-time", "0.05", "--no-telemetry", "--no-report"]
ALL_REDUCE = ["--bench", "collectives", "-p", "op=all-reduce", "-p", "bytes=1K",
              "-p", "warmup=1", "-p", "iters=5"]
LINKS = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"}


class Job:
    def __init__(self, nodes: Sequence[Host], processes: list[subprocess.Popen[str]],
                 logs: list[Path], store: Path) -> None:
        self.nodes = nodes
        self.processes = processes
        self.logs = logs
        self.store = store

    def wait(self, node: int, limit: float = JOB_LIMIT_S) -> int:
        return self.processes[node].wait(timeout=limit)

    def output(self, node: int) -> str:
        return self.logs[node].read_text(errors="replace")

    def tree(self, node: int) -> list[psutil.Process]:
        """The node's torchrun and its ranks (and the wrappers that started them)."""
        top = psutil.Process(self.processes[node].pid)
        return [top, *top.children(recursive=True)]

    def signal(self, node: int, sig: int) -> None:
        for p in self.tree(node):
            with suppress(psutil.NoSuchProcess):
                p.send_signal(sig)


@contextmanager
def job(tmp_path: Path, count: int, ranks: int, argv: Sequence[str],
        env: Mapping[int, Mapping[str, str]] | None = None, name: str = "") -> Iterator[Job]:
    """`accelbench ARGV` under torchrun on `count` hosts of `ranks` ranks each (`name`
    keeps the logs of several jobs of one test apart; they share the store)."""
    store = tmp_path / "results.sqlite"
    port = 29500 + os.getpid() % 1000
    with hosts(count) as nodes:
        processes, logs = [], []
        for i, node in enumerate(nodes):
            command = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={count}",
                       f"--nproc-per-node={ranks}", f"--node-rank={i}",
                       "--rdzv-backend=c10d", f"--rdzv-endpoint={nodes[0].address}:{port}",
                       f"--rdzv-id=accelbench-{tmp_path.name}", "-m", "accelbench", *argv,
                       "--store", str(store)]
            log = tmp_path / f"{name}{node.name}.log"
            out = tmp_path / f"{name}{node.name}.out"
            variables = {**LINKS, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1",
                         **((env or {}).get(i, {}))}
            with log.open("w") as err, out.open("w") as stdout:
                processes.append(node.popen(command, env=variables, stdout=stdout,
                                            stderr=err, stdin=subprocess.DEVNULL))
            logs.append(log)
        running = Job(nodes, processes, logs, store)
        try:
            yield running
        finally:
            for i, p in enumerate(processes):
                if p.poll() is None:
                    running.signal(i, signal.SIGCONT)
                    running.signal(i, signal.SIGKILL)
                    p.wait(timeout=60)


def _stored(path: Path) -> StoredRun:
    with Store.open(path, create=False) as store:
        return store.load_run("latest")


def _json_out(tmp_path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((tmp_path / "node0.out").read_text())
    return out


def _cluster(path: Path) -> dict[str, Any]:
    cluster: dict[str, Any] = _stored(path).fingerprint["cluster"]
    return cluster


def _wait_for_measurements(job: Job, count: int) -> None:
    """Until `count` cases are stored (the job keeps running), or the job ended."""
    end = time.monotonic() + JOB_LIMIT_S
    while time.monotonic() < end:
        if job.processes[0].poll() is not None:
            pytest.fail(f"the job ended before case {count} was stored:\n{job.output(0)}")
        if job.store.exists():
            try:
                if len(_stored(job.store).measurements) >= count:
                    return
            except Exception:  # not begun yet
                pass
        time.sleep(0.2)
    pytest.fail("no case was stored in time")


def test_collectives_on_two_nodes_of_two_ranks_store_the_nodes_and_their_links(tmp_path):
    with job(tmp_path, 2, 2, ["run", *ALL_REDUCE, *QUICK, "--json"],
             env={1: {"NCCL_IB_HCA": "mlx5_1"}}) as running:
        assert running.wait(0) == 0, running.output(0)
        assert running.wait(1) == 0, running.output(1)
    out = _json_out(tmp_path)
    [m] = out["measurements"]
    assert m["status"] == "ok", m["reason"]
    assert m["details"]["dist"]["world_size"] == 4
    assert m["details"]["dist"]["nodes"] == 2
    cluster = _cluster(running.store)
    assert cluster["node_count"] == 2
    assert cluster["node_names"] == ["node0", "node1"]
    assert cluster["ranks_per_node"] == [2, 2]
    assert cluster["node_ranks"] == [[0, 1], [2, 3]]
    first, second = cluster["interconnect"]
    for settings in (first, second):
        assert settings["GLOO_SOCKET_IFNAME"] == "eth0"
        assert settings["NCCL_SOCKET_IFNAME"] == "eth0"
    assert "NCCL_IB_HCA" not in first and second["NCCL_IB_HCA"] == "mlx5_1"
    assert _stored(running.store).record.host == "node0"

    shown = subprocess.run([sys.executable, "-m", "accelbench", "show", "--env", "--store",
                            str(running.store)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"},
                           check=False, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "2: node0 (ranks 0-1), node1 (ranks 2-3)" in shown.stdout
    lines = {line.split("│")[1].strip(): line.split("│")[2].strip()
             for line in shown.stdout.splitlines() if line.count("│") == 3}
    for setting in ("GLOO_SOCKET_IFNAME=eth0", "NCCL_SOCKET_IFNAME=eth0"):
        assert setting in lines["Interconnect (every node)"]
    assert lines["Interconnect (node0)"] == "NCCL_IB_HCA=(unset)"
    assert lines["Interconnect (node1)"] == "NCCL_IB_HCA=mlx5_1"


def test_collectives_on_three_nodes_of_one_rank(tmp_path):
    with job(tmp_path, 3, 1, ["run", *ALL_REDUCE, *QUICK, "--json"]) as running:
        codes = [running.wait(i) for i in range(3)]
        assert codes == [0, 0, 0], running.output(0)
    [m] = _json_out(tmp_path)["measurements"]
    assert m["status"] == "ok", m["reason"]
    assert m["details"]["dist"]["world_size"] == 3
    cluster = _cluster(running.store)
    assert cluster["node_names"] == ["node0", "node1", "node2"]
    assert (cluster["node_count"], cluster["ranks_per_node"]) == (3, [1, 1, 1])


def test_data_parallel_training_across_two_nodes(tmp_path):
    argv = ["run", "--bench", "train-ddp", "--dtype", "fp32", "-p", "model=bert-tiny",
            "-p", "batch=4", "-p", "seq=16", "-p", "steps_per_window=2", *QUICK, "--json"]
    with job(tmp_path, 2, 1, argv) as running:
        assert running.wait(0) == 0, running.output(0)
        assert running.wait(1) == 0, running.output(1)
    [m] = _json_out(tmp_path)["measurements"]
    assert (m["case"]["benchmark"], m["status"]) == ("train-ddp", "ok"), m["reason"]
    assert m["details"]["dist"]["world_size"] == 2
    cluster = _cluster(running.store)
    assert (cluster["node_names"], cluster["ranks_per_node"]) == (["node0", "node1"], [1, 1])
    assert all(s["GLOO_SOCKET_IFNAME"] == "eth0" for s in cluster["interconnect"])


def test_fsdp_scales_across_one_two_and_three_nodes_and_the_efficiency_is_tabled(tmp_path):
    argv = ["run", "-p", "model=llama-tiny", "-p", "seq=16",
            "-p", "batch=2", "-p", "steps_per_window=1", "-p", "parity_steps=2",
            "-p", "profile_steps=1", *QUICK]
    # On three nodes, isolate measures the links beside the training case in the same run.
    links = ["-p", "budget=10", "-p", "bytes=64K", "-p", "samples=3"]
    for count in (1, 2, 3):
        benches = ["--bench", "train-fsdp", *(["isolate", *links] if count == 3 else [])]
        with job(tmp_path, count, 1, [*argv, *benches], name=f"{count}-") as running:
            codes = [running.wait(i) for i in range(count)]
            assert codes == [0] * count, running.output(0)
    stored = _stored(tmp_path / "results.sqlite")
    by_bench = {m.case.benchmark: m for m in stored.measurements}
    assert by_bench["train-fsdp"].details["nodes"] == 3
    assert by_bench["isolate"].status == "ok", by_bench["isolate"].reason
    env = {**os.environ, "PYTHONPATH": SRC}
    chart = tmp_path / "scaling.png"
    shown = subprocess.run([sys.executable, "-m", "accelbench", "scaling", "--json", "--chart",
                            str(chart), "--store", str(tmp_path / "results.sqlite")],
                           capture_output=True, text=True, env=env, check=False, timeout=120)
    assert shown.returncode == 0, shown.stderr
    [series] = json.loads(shown.stdout)["series"]
    points = series["points"]
    assert [(p["world_size"], p["nodes"]) for p in points] == [(1, 1), (2, 2), (3, 3)]
    assert points[0]["efficiency"] == 1.0
    for point in points[1:]:
        # its value is the host's: a baseline measured while other work ran can make it
        # pass 1 by any amount, so only its being a figure is checked
        assert 0 < point["efficiency"] < math.inf, point
        low, high = point["efficiency_ci"]
        assert low <= point["efficiency"] <= high
    # Three nodes can be told apart: a node slow in compute is named; and isolate, run
    # beside it, named a link or node, or said it named none.
    three = points[2]
    assert three["isolated"] or any("isolate in the same run named no" in n
                                    for n in three["notes"]), three
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_distributed_check_across_two_nodes(tmp_path):
    argv = ["validate", "--check", "distributed", "--no-telemetry", "--no-report", "--json"]
    with job(tmp_path, 2, 1, argv) as running:
        assert running.wait(0) == 0, running.output(0)
        assert running.wait(1) == 0, running.output(1)
    out = _json_out(tmp_path)
    assert out["status"] == "complete"
    measurements = out["measurements"]
    assert measurements and all(m["status"] == "ok" for m in measurements)
    cluster = _cluster(running.store)
    assert (cluster["node_names"], cluster["ranks_per_node"]) == (["node0", "node1"], [1, 1])


LONG_SECOND_CASE = ["run", "--bench", "collectives", "-p", "op=all-reduce", "-p", "bytes=1K",
                    "-p", "warmup=1", "-p", "iters=5,100000000", "-p", "reduce=sum,max",
                    *QUICK]


def _assert_lost_node1(store: Path, ranks: str, how: str) -> None:
    run = _stored(store)
    assert run.record.status == "failed"
    quick, quick_max, lost, left = run.measurements
    for m in (quick, quick_max):  # measured before: kept
        assert m.status == "ok", m.reason
        assert m.case.param_dict["iters"] == 5
    assert lost.status == "failed" and lost.reason is not None
    assert lost.case.param_dict["iters"] == 100000000
    assert lost.reason.startswith(f"node1 ({ranks}) stopped answering ({how}"), lost.reason
    assert lost.details["lost_nodes"] == ["node1"]
    assert left.status == "failed"  # the broken group could not run it
    assert left.reason == f"not run: {lost.reason}"


def test_a_node_that_dies_fails_its_case_and_the_run_is_stored(tmp_path):
    with job(tmp_path, 2, 2, LONG_SECOND_CASE) as running:
        _wait_for_measurements(running, 2)
        running.signal(1, signal.SIGKILL)
        assert running.wait(0) != 0
    # Seen by whichever rank's collective failed first: its own words.
    _assert_lost_node1(running.store, "ranks 2, 3", "rank ")


# Each case's limit: the two quick cases take well under a second once the job is up.
HANG_TIMEOUT_S = 15


def test_a_node_that_hangs_fails_its_case_within_the_timeout(tmp_path):
    with job(tmp_path, 2, 1, [*LONG_SECOND_CASE, "--timeout", str(HANG_TIMEOUT_S)]) as running:
        _wait_for_measurements(running, 2)
        running.signal(1, signal.SIGSTOP)
        # Within the case's limit, the probe of the ranks and the storing (the limit is
        # generous for a loaded machine; without the watchdog the job waits far longer).
        assert running.wait(0, limit=HANG_TIMEOUT_S + 120) != 0
    _assert_lost_node1(running.store, "rank 1", f"timed out after {HANG_TIMEOUT_S} s")
