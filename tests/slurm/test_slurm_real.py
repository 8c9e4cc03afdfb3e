"""`accelbench slurm` against a real single-machine Slurm: the test writes a slurm.conf
into a temporary folder, starts Debian's slurmctld and slurmd (as root, with no munge:
auth/none), and submits real jobs that write into a real store.

Skipped where the Slurm binaries are missing, or not root; in CI (CI=true, where
.ci/run installs slurm-wlm) that fails instead."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbench.errors import EXIT_NODES, EXIT_SCHEDULER

pytestmark = pytest.mark.slow

SRC = Path(__file__).parents[2] / "src"
PARTITION = "accel"
START_DEADLINE_S = 90.0
JOB_DEADLINE_S = 400  # the jobs below take well under a minute each on two cores


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: .ci/run installs slurm-wlm and runs as root, so in CI this "
                    "test must run")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PYTHONPATH": str(SRC)}
        self.daemons: list[subprocess.Popen[bytes]] = []

    def write_conf(self) -> None:
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir()
        f = self.folder
        self.conf.write_text("\n".join([
            "ClusterName=accelbench-test",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/none", "CredType=cred/none",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={f / 'state'}", f"SlurmdSpoolDir={f / 'spool'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'slurmctld.log'}", f"SlurmdLogFile={f / 'slurmd.log'}",
            "SelectType=select/cons_tres", "ReturnToService=2", "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=1000 "
            "State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            ""]))

    def start(self) -> None:
        for daemon in ("slurmctld", "slurmd"):
            with (self.folder / f"{daemon}.out").open("wb") as out:
                self.daemons.append(subprocess.Popen([daemon, "-D", "-f", str(self.conf)],
                                                     stdout=out, stderr=subprocess.STDOUT,
                                                     env=self.env))
        deadline = time.monotonic() + START_DEADLINE_S
        state = ""
        while time.monotonic() < deadline:
            for proc in self.daemons:
                if proc.poll() is not None:
                    pytest.fail(f"{proc.args[0]} exited with {proc.returncode}:\n{self.logs()}")
            done = subprocess.run(["sinfo", "-h", "-n", self.node, "-o", "%t"],
                                  capture_output=True, text=True, env=self.env, check=False)
            state = done.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)  # polling the controller, bounded by the deadline
        pytest.fail(f"node {self.node} not idle within {START_DEADLINE_S:g} s (sinfo says "
                    f"{state!r}):\n{self.logs()}")

    def stop(self) -> None:
        for proc in self.daemons:
            proc.terminate()
        for proc in self.daemons:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            path = self.folder / name
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-25:]
                parts.append(f"--- {name} ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def accelbench(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                              text=True, env=self.env, cwd=self.folder,
                              timeout=JOB_DEADLINE_S + 60, check=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    for binary in ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sinfo", "srun"):
        if shutil.which(binary) is None:
            _unavailable(f"{binary} is not installed (Debian's slurm-wlm)")
    if os.geteuid() != 0:
        _unavailable("a throwaway Slurm with SlurmUser=root needs root")
    c = Cluster(tmp_path_factory.mktemp("slurm"))
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
    import json

    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{cluster.logs()}"
    (job,) = json.loads(done.stdout)["jobs"]
    assert (job["state"], job["exit_code"], job["nodes"]) == ("COMPLETED", 0, cluster.node)
    output = Path(job["output"])
    assert output.name == f"accelbench-qualify-{cluster.node}-{job['job_id']}.out"
    assert f"accelbench qualification on {cluster.node}" in output.read_text()
    (run,) = _runs(store)
    assert run.record.host == cluster.node  # the node's name is recorded with the run
    assert [m.case.benchmark for m in run.measurements] == ["launch"]
    assert all(m.status == "ok" for m in run.measurements)

    status = cluster.accelbench("slurm", "status", job["job_id"])
    assert status.returncode == 0 and "COMPLETED" in status.stdout, status.stderr


def test_collectives_job_runs_torchrun_ranks_and_stores_them(cluster, tmp_path):
    store = tmp_path / "results.sqlite"
    done = cluster.accelbench(
        "slurm", "collectives", "--nodes", "1", "--nproc-per-node", "2", "--partition",
        PARTITION, "--rdzv-port", str(_free_port()), "--store", str(store),
        "--output-dir", str(tmp_path / "logs"), "--wait", "--poll-interval", "0.5",
        "--wait-timeout", str(JOB_DEADLINE_S), "--", "--device", "cpu", "-p", "op=all-reduce",
        "-p", "bytes=1024", "--max-time", "0.2", "--no-report")
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.out"))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}\n{cluster.logs()}"
    assert "COMPLETED" in done.stdout
    (run,) = _runs(store)
    assert run.record.host == cluster.node
    (m,) = run.measurements
    assert (m.case.benchmark, m.status) == ("collectives", "ok"), m.reason
    params = dict(m.case.params)
    assert params["world_size"] == 2 and params["backend"] == "gloo"


def test_isolate_job_runs_isolate_on_the_ranks_and_stores_it(cluster, tmp_path):
    store = tmp_path / "results.sqlite"
    done = cluster.accelbench(
        "slurm", "isolate", "--nodes", "1", "--nproc-per-node", "2", "--partition",
        PARTITION, "--rdzv-port", str(_free_port()), "--store", str(store),
        "--output-dir", str(tmp_path / "logs"), "--wait", "--poll-interval", "0.5",
        "--wait-timeout", str(JOB_DEADLINE_S), "--", "--device", "cpu", "--bytes", "16K",
        "--samples", "3", "--no-report")
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.out"))
    # One pair of local ranks: nothing can be named, so isolate exits 0 and the job
    # completes.
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}\n{cluster.logs()}"
    assert "COMPLETED" in done.stdout
    (run,) = _runs(store)
    assert run.record.host == cluster.node
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
