"""How fast the host's CPU runs right now: a fixed reference loop timed beside each case.

A shared host changes speed in ways no counter shows: another tenant's load on the same
physical cores, a shared cache filled by a neighbour, the hypervisor's placement. On a
2-core cloud VM the figures of every CPU case moved together by 8-15% for minutes at a
time, with no steal time and no other process to see. What one run cannot tell from a
change of the code, a reference can: the same fixed work, timed in the measuring process
just before and just after each case. When two runs' cases differ by as much as their
references do, the host changed, not the stack (`analysis.host_speed`).

The work is SHA-256 over a fixed buffer: compiled code with no threads, no allocation and
no dependence on the PyTorch or BLAS build, so its speed is the core's. Its time is the
fastest of a few repeats (the least disturbed). On that VM it tracked the case figures
with a correlation of 0.83 over 39 fresh processes spanning a 10% change of host speed,
and costs about 20 ms.
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

BUFFER_BYTES = 8 << 20
REPEATS = 3
_BUFFER = bytes(range(256)) * (BUFFER_BYTES // 256)


def _description() -> str:
    backend = "OpenSSL" if hashlib.sha256.__module__ == "_hashlib" else "Python"
    return (f"SHA-256 of {BUFFER_BYTES >> 20} MiB ({backend}, Python "
            f"{sys.version_info.major}.{sys.version_info.minor}), fastest of {REPEATS}")


# What the reference is: runs whose references were made otherwise are not compared.
REFERENCE = _description()


def reference_seconds(clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds the reference work takes here and now (the fastest of REPEATS)."""
    best = float("inf")
    for _ in range(REPEATS):
        start = clock()
        hashlib.sha256(_BUFFER).digest()
        best = min(best, clock() - start)
    return best


def speed_of(host: Mapping[str, Any]) -> tuple[str, float] | None:
    """(what the reference is, its speed in 1/s) from one process's host report
    (`HostReport.to_dict()`): the geometric mean of its timings before and after the case;
    None where it timed none (an older record, or a probe that was not asked to)."""
    seconds = [float(s) for s in host.get("reference_s") or () if _positive(s)]
    name = host.get("reference")
    if not seconds or not isinstance(name, str):
        return None
    return name, 1.0 / math.exp(sum(map(math.log, seconds)) / len(seconds))


def speed_sd(speeds: Sequence[float]) -> float | None:
    """The standard deviation of log speed between processes (a share of the speed),
    None with fewer than MIN_SPEEDS: how much the host's own speed moved from one
    measuring process to the next."""
    logs = [math.log(s) for s in speeds if _positive(s)]
    if len(logs) < MIN_SPEEDS:
        return None
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


# Readings a host-speed spread is taken from: fewer say little of the host.
MIN_SPEEDS = 8


def _positive(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
