"""`accelbench slurm` against a real single-machine Slurm: the test writes a slurm.conf
into a temporary folder, starts Debian's slurmctld and slurmd (as root, with no munge:
auth/none), and submits real jobs that write into a real store.

Skipped where the Slurm binaries are missing, or not root; in CI (CI=true, where
.ci/run installs slurm-wlm) that fails instead."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_NODES, EXIT_SCHEDULER
from slurm_cluster import (
    JOB_DEADLINE_S,
    PARTITION,
    Cluster,
    free_port,
    require_slurm,
    this_machine,
)

pytestmark = [pytest.mark.slow, pytest.mark.server]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_slurm()
    c = Cluster(tmp_path_factory.mktemp("slurm"), [this_machine()])
    c.write_conf()
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _runs(store: Path):
    from accelbench.store import Store

    with Store.open(store, create=False) as opened:
        return [opened.load_run(r.id) for r in opened.list_runs()]


def test_qualify_runs_on_the_node_and_stores_its_run(cluster, tmp_path):
    store = tmp_path / "results.sqlite"
    done = cluster.accelbench(
        "slurm", "qualify", "--nodes", cluster.node, "--partition", PARTITION,
        "--store", str(store), "--output-dir", str(tmp_path / "logs"), "--wait",
        "--poll-interval", "0.5", "--wait-timeout", str(JOB_DEADLINE_S), "--json", "--",
        "--bench", "launch", "--device", "cpu", "--max-time", "0.2", "--no-report")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{cluster.logs()}"
    (job,) = json.loads(done.stdout)["jobs"]
    assert (job["state"], job["exit_code"], job["nodes"]) == ("COMPLETED", 0, cluster.node)
    output = Path(job["output"])
    assert output.name == f"accelbench-qualify-{cluster.node}-{job['job_id']}.out"
    assert f"accelbench qualification on {cluster.node}" in output.read_text()
    (run,) = _runs(store)
    assert run.record.host == cluster.node  # the node's name is recorded with the run
    # It ran the request the options made, handed to it in the script.
    assert RunRequest.from_dict(run.record.request) == RunRequest(
        benches=("launch",), device="cpu", timing={"max_time": 0.2}, no_report=True)
    assert [m.case.benchmark for m in run.measurements] == ["launch"]
    assert all(m.status == "ok" for m in run.measurements)

    status = cluster.accelbench("slurm", "status", job["job_id"])
    assert status.returncode == 0 and "COMPLETED" in status.stdout, status.stderr


def _across_nodes(cluster, tmp_path, action: str, *args: str):
    """`accelbench slurm ACTION` on one node with 2 CPU ranks, waited for: the store, the
    finished command and the jobs' output."""
    store = tmp_path / "results.sqlite"
    done = cluster.accelbench(
        "slurm", action, "--nodes", "1", "--nproc-per-node", "2", "--partition",
        PARTITION, "--rdzv-port", str(free_port()), "--store", str(store),
        "--output-dir", str(tmp_path / "logs"), "--wait", "--poll-interval", "0.5",
        "--wait-timeout", str(JOB_DEADLINE_S), "--", "--device", "cpu", *args, "--no-report")
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.out"))
    return store, done, logs


def test_collectives_job_runs_torchrun_ranks_and_stores_them(cluster, tmp_path):
    store, done, logs = _across_nodes(cluster, tmp_path, "collectives", "-p", "op=all-reduce",
                                      "-p", "bytes=1024", "--max-time", "0.2")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}\n{cluster.logs()}"
    assert "COMPLETED" in done.stdout
    (run,) = _runs(store)
    assert run.record.host == cluster.node
    assert RunRequest.from_dict(run.record.request) == RunRequest(
        benches=("collectives",), overrides={"op": ("all-reduce",), "bytes": ("1024",)},
        device="cpu", timing={"max_time": 0.2}, no_report=True)
    (m,) = run.measurements
    assert (m.case.benchmark, m.status) == ("collectives", "ok"), m.reason
    params = dict(m.case.params)
    assert params["world_size"] == 2 and params["backend"] == "gloo"


def test_isolate_job_runs_isolate_on_the_ranks_and_stores_it(cluster, tmp_path):
    store, done, logs = _across_nodes(cluster, tmp_path, "isolate", "--bytes", "16K",
                                      "--samples", "3")
    # One pair of local ranks: nothing can be named, so isolate exits 0 and the job
    # completes.
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}\n{cluster.logs()}"
    assert "COMPLETED" in done.stdout
    (run,) = _runs(store)
    assert run.record.host == cluster.node
    assert RunRequest.from_dict(run.record.request).values == {"bytes": ("16K",),
                                                               "samples": (3,)}
    (m,) = run.measurements
    assert (m.case.benchmark, m.status) == ("isolate", "ok"), m.reason


def test_a_partition_that_does_not_exist(cluster, tmp_path):
    done = cluster.accelbench("slurm", "qualify", "--nodes", cluster.node, "--partition",
                              "no-such-partition", "--store", str(tmp_path / "r.sqlite"))
    assert done.returncode == EXIT_SCHEDULER, done.stderr
    assert done.stderr.startswith("accelbench: error: partition 'no-such-partition' does not "
                                  "exist") and done.stderr.count("\n") == 1
    assert not (tmp_path / "r.sqlite").exists()


def test_a_node_the_cluster_lacks(cluster, tmp_path):
    done = cluster.accelbench("slurm", "collectives", "--nodes", f"{cluster.node},nosuch[1-2]",
                              "--partition", PARTITION, "--store", str(tmp_path / "r.sqlite"))
    assert done.returncode == EXIT_NODES, done.stderr
    assert "node 'nosuch1'" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "r.sqlite").exists()
    queue = subprocess.run(["squeue", "-h", "-t", "all", "-n", "accelbench-collectives", "-o",
                            "%i"], capture_output=True, text=True, env=cluster.env, check=True)
    assert len(queue.stdout.split()) <= 1  # the one the test above submitted, no more
