"""`accelbench slurm` across three hosts (network namespaces on one bridge) of a real
Slurm: slurmctld on node0, one slurmd on every host under its own host name, and the
client commands run on node0. The jobs' srun starts one torchrun per node, which meet
through the c10d rendezvous on the allocation's first node over the hosts' eth0, and
write into one SQLite store (the hosts share the file system).

Skipped without root, iproute2 or the Slurm binaries; in CI (CI=true) that fails
instead."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from accelbench.store import Store
from netns import Host, hosts
from slurm_cluster import JOB_DEADLINE_S, PARTITION, Cluster, Node, require_slurm, unavailable

pytestmark = [pytest.mark.multinode, pytest.mark.slow, pytest.mark.server,
              pytest.mark.timeout(1200)]

# The jobs' ranks talk over the hosts' links; the environment goes with the job.
JOB_ENV = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}


def _slurm_node(host: Host) -> Node:
    """A host as Slurm's node: its commands run in its network namespace under its own
    host name, with its hosts file, like Host.command; but `ip netns exec` also mounts a
    sysfs of its own, without /sys/fs/cgroup, where slurmd cannot start its cgroup
    plugin. So the host is entered with nsenter, keeping this machine's mounts, and its
    hosts file is bound over /etc/hosts in a mount namespace of its own."""
    hosts_file = Path("/etc/netns") / host.netns / "hosts"

    def command(argv: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{host.netns}", "unshare", "--mount", "--uts",
                "--", "sh", "-c",
                'mount --bind "$1" /etc/hosts && hostname "$0" && shift && exec "$@"',
                host.name, str(hosts_file), *argv]

    return Node(host.name, host.address, command)


@pytest.fixture(scope="module")
def nodes():
    require_slurm()
    if shutil.which("nsenter") is None:
        unavailable("nsenter is not installed (util-linux)")
    with hosts(3) as made:
        yield made


@pytest.fixture(scope="module")
def cluster(nodes: list[Host], tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(tmp_path_factory.mktemp("slurm-netns"),
                [_slurm_node(h) for h in nodes], env=JOB_ENV)
    c.write_conf()
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _submit(cluster: Cluster, tmp_path: Path, action: str, nodes: str,
            *args: str) -> tuple[dict[str, Any], str]:
    done = cluster.accelbench(
        "slurm", action, "--nodes", nodes, "--nproc-per-node", "1", "--partition",
        PARTITION, "--store", str(tmp_path / "results.sqlite"), "--output-dir",
        str(tmp_path / "logs"), "--wait", "--poll-interval", "0.5", "--wait-timeout",
        str(JOB_DEADLINE_S), "--json", "--", *args)
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.out"))
    context = f"{done.stdout}\n{done.stderr}\n{logs}\n{cluster.logs()}"
    assert done.stdout.strip().startswith("{"), context
    out: dict[str, Any] = json.loads(done.stdout)
    out["returncode"] = done.returncode
    return out, context


def _run(store: Path):
    with Store.open(store, create=False) as s:
        (listed,) = s.list_runs()
        return s.load_run(listed.id)


def test_collectives_across_two_hosts(cluster: Cluster, tmp_path: Path) -> None:
    out, context = _submit(cluster, tmp_path, "collectives", "2", "--device", "cpu",
                           "-p", "op=all-reduce", "-p", "bytes=1024", "--max-time", "0.2",
                           "--no-report")
    assert out["returncode"] == 0 and out["succeeded"], context
    (job,) = out["jobs"]
    assert (job["state"], job["exit_code"], job["nodes"]) == ("COMPLETED", 0, "node[0-1]")
    run = _run(tmp_path / "results.sqlite")
    cluster_of_run = run.fingerprint["cluster"]
    assert cluster_of_run["node_count"] == 2, context
    assert cluster_of_run["node_names"] == ["node0", "node1"]
    assert cluster_of_run["ranks_per_node"] == [1, 1]
    assert [e["GLOO_SOCKET_IFNAME"] for e in cluster_of_run["interconnect"]] == ["eth0"] * 2
    (m,) = run.measurements
    assert (m.case.benchmark, m.status) == ("collectives", "ok"), m.reason
    params = dict(m.case.params)
    assert params["world_size"] == 2 and params["backend"] == "gloo"


def test_the_scaling_suite_across_one_and_two_hosts_makes_a_series(cluster: Cluster,
                                                                   tmp_path: Path) -> None:
    done = cluster.accelbench(
        "slurm", "scaling", "--nodes", "1,2", "--nproc-per-node", "1", "--partition",
        PARTITION, "--store", str(tmp_path / "results.sqlite"), "--output-dir",
        str(tmp_path / "logs"), "--wait", "--poll-interval", "0.5", "--wait-timeout",
        str(JOB_DEADLINE_S), "--json", "--", "--device", "cpu", "--bench", "train-fsdp",
        "-p", "model=llama-tiny", "-p", "config=layers=2", "-p", "seq=16", "-p", "batch=2",
        "-p", "global_batch=0", "-p", "steps_per_window=1", "-p", "parity_steps=2",
        "-p", "profile_steps=1", "--max-time", "0.2", "--no-report")
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.out"))
    context = f"{done.stdout}\n{done.stderr}\n{logs}\n{cluster.logs()}"
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["succeeded"], context
    assert len(out["jobs"]) == 2 and all(j["state"] == "COMPLETED" for j in out["jobs"]), context
    shown = cluster.accelbench("scaling", "--json", "--store", str(tmp_path / "results.sqlite"))
    assert shown.returncode == 0, shown.stderr
    [series] = json.loads(shown.stdout)["series"]
    assert [(p["world_size"], p["nodes"]) for p in series["points"]] == [(1, 1), (2, 2)]
    assert series["points"][1]["efficiency"] is not None


def test_isolate_across_three_hosts_names_the_slowed_one(cluster: Cluster, nodes: list[Host],
                                                         tmp_path: Path) -> None:
    nodes[2].slow()  # the last test of the module: the link stays slow
    out, context = _submit(cluster, tmp_path, "isolate", "3", "--device", "cpu", "--bytes",
                           "16K", "--latency-bytes", "8", "--samples", "5", "--iters", "2",
                           "--warmup", "1", "--no-report")
    # isolate exits 1 on the node that names a node, so the job fails, and so does the
    # wait. The job's exit code is srun's, the highest of its tasks': 1, or 143 where
    # srun's --kill-on-bad-exit ended another node's torchrun (SIGTERM) before it was out.
    assert out["returncode"] == 1 and not out["succeeded"], context
    (job,) = out["jobs"]
    assert (job["state"], job["nodes"]) == ("FAILED", "node[0-2]"), context
    assert job["exit_code"] in (1, 143), context
    run = _run(tmp_path / "results.sqlite")
    (m,) = run.measurements
    assert m.ok, m.reason
    assert m.details["named"] == ["node2"], (m.details["verdict"], context)
    assert sorted(m.details["nodes"]) == ["node0", "node1", "node2"]
    assert run.fingerprint["cluster"]["node_count"] == 3
