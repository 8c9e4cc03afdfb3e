"""What this node offers a run: how many ranks it can hold, checked before any of them
starts, and how many CPU threads a CPU case runs on by default.

`--nproc-per-node 64` on a small machine would otherwise start 64 interpreters that each
import torch, until memory runs out and the OOM killer picks among them (and the rest
of the machine). GPU ranks need one device each; CPU ranks one logical core each (more
only time-share, so what they measure is the scheduler) and their memory.

A CPU case's thread count is part of its identity (`PlannedCase.with_threads`), so the
default is a fixed function of the CPU set this process may run on, never of the load at
that moment: the same command on the same machine plans the same cases whether the host
is busy or idle (a busy host is reported beside each case as contention instead).

The default leaves one of those CPUs to the harness and the system (`default_threads`):
a CPU kernel's threads meet at barriers, so one thread that loses its core to the
supervisor, a telemetry reading or a neighbour stalls them all. On a 2-core VM, GEMMs on
both cores ran 3 to 40 times slower whenever other work woke up, while on one core,
beside the same work, they moved by a few percent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from accelbench.errors import UserError

GIB = 1024**3
# Resident memory of one rank, with margin. Measured with torch 2.14 on a CPU node: an
# idle Gloo rank that has imported torch, joined its group and run one all-reduce has a
# VmRSS of 510 MiB (280 MiB of it anonymous, the rest mostly torch's shared libraries);
# the collectives sweep adds its buffers. Twice the idle figure, rounded.
RANK_MEMORY_BYTES = 1 * GIB


@dataclass(frozen=True)
class NodeResources:
    """What the node offers this process's ranks."""

    cores: int  # logical cores this process may run on
    available_memory: int  # bytes


def usable_cpus() -> int:
    """The logical CPUs this process may run on: its affinity set where the system has
    one (taskset, a container's or Slurm's cpuset), else every CPU of the host."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def default_threads(cpus: int) -> int:
    """The CPU threads a run's CPU cases share by default: all but one of the `cpus` this
    process may use (see the module docstring), and at least one."""
    return max(1, cpus - 1)


def split_threads(threads: int, ranks: int = 1) -> int:
    """`threads` shared between the `ranks` processes of a case: each gets its whole
    share, and at least one."""
    return max(1, threads // max(1, ranks))


def threads_source(requested: int | None, cpus: int, split: str | None = None) -> str:
    """How a run's CPU thread count was chosen, in words for its stored record:
    `--threads 4`, or `default: 7 of the 8 CPUs this process may use (one left to the
    harness)`; `split` says between which ranks the count was shared, where it was."""
    if requested is not None:
        chosen = f"--threads {requested}"
    elif cpus > 1:
        chosen = (f"default: {default_threads(cpus)} of the {cpus} CPUs this process may use "
                  "(one left to the harness)")
    else:
        chosen = "default: the 1 CPU this process may use"
    return f"{chosen}, split between {split}" if split else chosen


def node_resources() -> NodeResources:
    """The cores of this process's affinity mask and the memory available now."""
    import psutil

    return NodeResources(usable_cpus(), int(psutil.virtual_memory().available))


def check_ranks(ranks: int, device_type: str, device_count: int, oversubscribe: bool = False,
                resources: NodeResources | None = None, first: int = 0) -> str | None:
    """Refuse (UserError) a rank count this node cannot hold, with the reason; with
    `oversubscribe`, CPU limits become a warning, returned. GPU ranks need a device
    each whatever is asked (a rank without one cannot start): rank r uses GPU
    `first + r`, `first` being the index --device names."""
    if ranks <= 1:
        return None
    if device_type != "cpu":
        if first + ranks > device_count:
            start = f" from {device_type}:{first}" if first else ""
            raise UserError(f"{ranks} ranks need {ranks} GPUs (one each){start}; this node "
                            f"has {device_count}: lower --nproc-per-node")
        return None
    node = resources or node_resources()
    problems = []
    if ranks > node.cores:
        cores = f"{node.cores} logical core" + ("s" if node.cores != 1 else "")
        problems.append(f"this node has {cores} for them (one each at most, "
                        "or they time-share and measure the scheduler)")
    needed = ranks * RANK_MEMORY_BYTES
    if needed > node.available_memory:
        problems.append(f"they need about {needed / GIB:.0f} GiB "
                        f"({RANK_MEMORY_BYTES / GIB:g} GiB each) and "
                        f"{node.available_memory / GIB:.1f} GiB is available")
    if not problems:
        return None
    reason = f"{ranks} CPU ranks: {'; '.join(problems)}"
    if oversubscribe:
        return f"{reason}; starting them anyway (--oversubscribe)"
    raise UserError(f"{reason}: lower --nproc-per-node, or add --oversubscribe to start "
                    "them anyway")
