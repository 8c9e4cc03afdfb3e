"""How many ranks this node can hold, checked before any of them starts.

`--nproc-per-node 64` on a small machine would otherwise start 64 interpreters that each
import torch, until memory runs out and the OOM killer picks among them (and the rest
of the machine). GPU ranks need one device each; CPU ranks one logical core each (more
only time-share, so what they measure is the scheduler) and their memory.
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


def node_resources() -> NodeResources:
    """The cores of this process's affinity mask and the memory available now."""
    import psutil

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return NodeResources(cores, int(psutil.virtual_memory().available))


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
