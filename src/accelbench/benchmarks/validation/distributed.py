"""Every collective's result on every rank of a torch.distributed job, and a barrier with
a timeout, so a dead or hung rank ends the check with its name instead of a hang.

Each case is one operation: all ranks first meet at a monitored barrier (Gloo's
monitored_barrier, on the default group with Gloo, else on a Gloo group made for it
once), which names the ranks that did not arrive within `barrier_timeout` seconds; then
they run the collectives benchmark's own correctness check (`benchmarks.collectives.ops`:
known small integers whose result is exact in every dtype, wrong elements counted on
each rank), sum the wrong elements over the ranks and meet at the barrier again. Any
wrong element fails the check, with the ranks that saw them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from accelbench.benchmarks.collectives import ops
from accelbench.benchmarks.validation.verdict import conclude, exact_verdict
from accelbench.core.context import CaseContext, DistInfo
from accelbench.core.dtypes import DTYPES
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

CHECK_BYTES = 1 << 16
# The element types of the collectives that are also precisions accelbench names.
CHECK_DTYPES = tuple(name for name in ops.DTYPE_NAMES if name in DTYPES)
_MONITOR: dict[str, Any] = {}  # the Gloo group of this process's job, made once


@dataclass(frozen=True)
class DistributedParams:
    """The parameters of a distributed case (`BENCHMARK.params`)."""

    op: str
    dtype: str
    bytes: int
    barrier_timeout: float


def measure(ctx: CaseContext, params: DistributedParams) -> CaseResult:
    op, dtype, timeout = params.op, params.dtype, params.barrier_timeout
    info = ctx.dist
    world = info.world_size if info is not None else 1
    backend = info.backend if info is not None else "none"
    reason = ops.unsupported(op, backend, dtype, "sum", "auto", world)
    if reason or info is None:
        raise CaseSkipped(reason or ops.NEEDS_RANKS)
    import torch
    import torch.distributed as dist

    barrier(dist, info, timeout, "before")
    etype = ops.ELEMENT_TYPES[dtype]
    count = ops.element_count(op, params.bytes, etype.bytes, world)
    if op != "barrier" and count == 0:
        raise CaseSkipped(f"{params.bytes} B holds no whole {dtype} element per rank at "
                          f"{world} ranks")
    device = torch.device(ctx.device.torch_device)
    prepared = ops.prepare(torch, dist, op, count, info.rank, world, dtype, "sum",
                           ops.in_place(op, "auto"), device, backend)
    mine = prepared.check()
    counts: list[Any] = [None] * world
    dist.all_gather_object(counts, mine)
    barrier(dist, info, timeout, "after")
    wrong = sum(int(c) for c in counts)
    ranks = [rank for rank, c in enumerate(counts) if c]
    size = count * etype.bytes
    label = f"{op} of {size} B {dtype}"
    verdict = exact_verdict(
        wrong, "elements",
        f"wrong result: {wrong} wrong elements in {label} on rank"
        f"{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} of {world}",
        extra=(Figure("ranks", float(world), "ranks"),))
    return conclude(verdict, {"op": op, "torch_call": f"torch.distributed.{ops.TORCH_CALLS[op]}",
                              "bytes": size, "wrong_per_rank": [int(c) for c in counts],
                              "world_size": world, "backend": backend,
                              "library": ops.library(torch, backend),
                              "barrier_timeout_s": timeout})


def barrier(dist: ModuleType, info: DistInfo, timeout_s: float, when: str) -> None:
    """Every rank meets within `timeout_s`; else the check fails naming who did not."""
    group = _monitor_group(dist, info)
    try:
        dist.monitored_barrier(group=group, timeout=dt.timedelta(seconds=timeout_s),
                               wait_all_ranks=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaseFailed(f"barrier {when} the check: not every rank arrived within "
                         f"{timeout_s:g} s: {first[:300]}") from None


def _monitor_group(dist: ModuleType, info: DistInfo) -> Any:
    """monitored_barrier needs a Gloo group: the default one with Gloo, else one made
    for it (once per process, by every rank at the same point)."""
    if info.backend == "gloo":
        return None
    if "group" not in _MONITOR:
        _MONITOR["group"] = dist.new_group(backend="gloo")
    return _MONITOR["group"]


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be a positive number of seconds"


BENCHMARK = Benchmark(
    name="distributed",
    family="validation",
    summary="Every collective's result on every rank of a torchrun job (the collectives' "
    "known-data check), between barriers with a timeout that name a missing rank",
    entry="accelbench.benchmarks.validation.distributed:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.collectives.ops"),
    params=(
        Param("op", "str", "all-reduce", help="the collective checked", choices=ops.OPS),
        Param("dtype", "str", "fp32", help="element type", choices=CHECK_DTYPES),
        Param("bytes", "int", CHECK_BYTES, help="size of the operation (as the collectives "
              "benchmark counts it)", minimum=1, quiet_default=True),
        Param("barrier_timeout", "float", 30.0, help="seconds every rank has to reach the "
              "barriers around the check", check=_positive, quiet_default=True),
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    distributed=True,
    min_ranks=2,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=DistributedParams,
)
