"""What is checked with the controller before anything is submitted: the partition
exists, and a node list names nodes that the cluster has, in that partition, able to
run a job. Node lists are Slurm hostlists, expanded by Slurm (`scontrol show
hostnames`), never by a parser of our own."""

from __future__ import annotations

from accelbench.errors import NodesError
from accelbench.slurm.commands import Slurm

# Node states in which a node takes no new job (scontrol(1), NODE STATE).
_UNUSABLE = ("DOWN", "DRAIN", "FAIL", "FUTURE", "NOT_RESPONDING", "POWERED_DOWN")


def check_partition(slurm: Slurm, partition: str) -> dict[str, str]:
    """The partition's record; a SchedulerError (exit 7) if there is none."""
    return slurm.partition(partition)


def check_nodes(slurm: Slurm, hostlist: str, partition: str) -> tuple[str, ...]:
    """Every node a hostlist names, each checked; a NodesError (exit 8) names the
    first one the cluster lacks, that is outside the partition or cannot run jobs."""
    names = slurm.hostnames(hostlist) if hostlist.strip() else ()
    if not names:
        raise NodesError(f"--nodes {hostlist!r} names no node")
    for name in names:
        record = slurm.node(name)
        if record is None:
            raise NodesError(f"node {name!r} (of --nodes {hostlist!r}) is not in this "
                             "cluster; `sinfo -N` lists its nodes")
        partitions = record.get("Partitions", "").split(",")
        if partition not in partitions:
            raise NodesError(f"node {name!r} is not in partition {partition!r} (it is in: "
                             f"{record.get('Partitions') or 'none'})")
        state = record.get("State", "")
        flags = state.replace("*", "+NOT_RESPONDING").split("+")
        bad = [flag for flag in flags if flag.startswith(_UNUSABLE)]
        if bad:
            reason = record.get("Reason", "")
            raise NodesError(f"node {name!r} cannot run jobs: its state is {state}"
                             + (f" ({reason})" if reason else ""))
    return names


def check_node_count(partition_record: dict[str, str], count: int) -> None:
    """A count of nodes the partition can hold."""
    total = partition_record.get("TotalNodes", "")
    if total.isdigit() and count > int(total):
        raise NodesError(f"--nodes {count}: partition {partition_record.get('PartitionName')!r}"
                         f" has {total} node(s)")
