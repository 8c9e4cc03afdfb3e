"""A throwaway Slurm for tests: a slurm.conf written into a temporary folder, Debian's
slurmctld and one slurmd per node, as root, with no munge (auth/none).

A node is a name, an address and how a command is run there: on this machine as it is
(one node, the machine's own name), or inside a network-namespace host (tests/netns.py),
where each slurmd sees its own host name and address. Every node keeps its own spool,
pid and log files (Slurm's %n: the node's name), so several slurmd share one folder.

`require_slurm()` skips a test where the Slurm binaries are missing, or not root; in CI
(CI=true, where .ci/run installs slurm-wlm) that fails instead."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
PARTITION = "accel"
START_DEADLINE_S = 90.0
JOB_DEADLINE_S = 400  # a test job takes well under a minute on two cores
BINARIES = ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sinfo", "srun")


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: .ci/run installs slurm-wlm and runs as root, so in CI this "
                    "test must run")
    pytest.skip(reason)


def require_slurm() -> None:
    for binary in BINARIES:
        if shutil.which(binary) is None:
            unavailable(f"{binary} is not installed (Debian's slurm-wlm)")
    if os.geteuid() != 0:
        unavailable("a throwaway Slurm with SlurmUser=root needs root")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _here(argv: Sequence[str]) -> list[str]:
    return list(argv)


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    command: Callable[[Sequence[str]], list[str]] = _here  # argv, as run on this node


def this_machine() -> Node:
    return Node(socket.gethostname().split(".")[0], "127.0.0.1")


class Cluster:
    """slurmctld on the first node, a slurmd on every node; the client commands run on
    the first node."""

    def __init__(self, folder: Path, nodes: Sequence[Node],
                 env: Mapping[str, str] | None = None) -> None:
        self.folder = folder
        self.nodes = tuple(nodes)
        self.head = self.nodes[0]
        self.node = self.head.name
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PYTHONPATH": str(SRC),
                    **(env or {})}
        self.daemons: list[subprocess.Popen[bytes]] = []

    def write_conf(self) -> None:
        f = self.folder
        (f / "state").mkdir()
        for node in self.nodes:
            (f / "spool" / node.name).mkdir(parents=True)
        self.conf.write_text("\n".join([
            "ClusterName=accelbench-test",
            f"SlurmctldHost={self.head.name}({self.head.address})",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/none", "CredType=cred/none",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={f / 'state'}", f"SlurmdSpoolDir={f / 'spool' / '%n'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={f / 'slurmctld.log'}", f"SlurmdLogFile={f / 'slurmd-%n.log'}",
            "SelectType=select/cons_tres", "ReturnToService=2", "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            *(f"NodeName={node.name} NodeAddr={node.address} CPUs={os.cpu_count()} "
              "RealMemory=1000 State=UNKNOWN" for node in self.nodes),
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            ""]))

    def _daemon(self, node: Node, argv: Sequence[str], out_name: str) -> None:
        with (self.folder / out_name).open("wb") as out:
            self.daemons.append(subprocess.Popen(node.command(argv), stdout=out,
                                                 stderr=subprocess.STDOUT, env=self.env))

    def start(self) -> None:
        self._daemon(self.head, ["slurmctld", "-D", "-f", str(self.conf)], "slurmctld.out")
        for node in self.nodes:
            self._daemon(node, ["slurmd", "-D", "-f", str(self.conf), "-N", node.name],
                         f"slurmd-{node.name}.out")
        deadline = time.monotonic() + START_DEADLINE_S
        states: dict[str, str] = {}
        wanted = {node.name: "idle" for node in self.nodes}
        while time.monotonic() < deadline:
            for proc in self.daemons:
                if proc.poll() is not None:
                    pytest.fail(f"{proc.args!r} exited with {proc.returncode}:\n{self.logs()}")
            done = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=60)
            states = dict(line.split() for line in done.stdout.splitlines()
                          if len(line.split()) == 2)
            if states == wanted:
                return
            time.sleep(0.5)  # polling the controller, bounded by the deadline
        pytest.fail(f"nodes not idle within {START_DEADLINE_S:g} s (sinfo says {states!r}):"
                    f"\n{self.logs()}")

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
        names = ["slurmctld.out", "slurmctld.log"]
        for node in self.nodes:
            names += [f"slurmd-{node.name}.out", f"slurmd-{node.name}.log"]
        parts = []
        for name in names:
            path = self.folder / name
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-25:]
                parts.append(f"--- {name} ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def run(self, argv: Sequence[str], timeout: float,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """A command on the first node, with this cluster's SLURM_CONF."""
        return subprocess.run(self.head.command(argv), capture_output=True, text=True,
                              env=self.env, cwd=cwd, timeout=timeout, check=False)

    def accelbench(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`accelbench ARGS` on the first node, in the cluster's folder."""
        return self.run([sys.executable, "-m", "accelbench", *args],
                        timeout=JOB_DEADLINE_S + 60, cwd=self.folder)
