"""The distributed check with rank 1 misbehaving on purpose: its collective counts wrong
elements (a corrupted result on one rank), or it never reaches the barrier (a hung rank).
Each wraps the real check, so everything else is the real one."""

from __future__ import annotations

import time
from typing import Any

from accelbench.benchmarks.collectives import ops
from accelbench.benchmarks.validation import distributed
from accelbench.core.registry import Benchmark, Registry


def rank1_corrupts(ctx: Any, params: distributed.DistributedParams) -> Any:
    real = ops.prepare

    def prepare(*args: Any, **kwargs: Any) -> ops.Prepared:
        prepared = real(*args, **kwargs)
        if ctx.dist.rank != 1:
            return prepared
        return ops.Prepared(prepared.call, lambda: prepared.check() + 5)

    ops.prepare = prepare
    try:
        return distributed.measure(ctx, params)
    finally:
        ops.prepare = real


def rank1_hangs(ctx: Any, params: distributed.DistributedParams) -> Any:
    if ctx.dist.rank == 1:
        time.sleep(3600)
    return distributed.measure(ctx, params)


def _variant(name: str, entry: str, timeout: float) -> Benchmark:
    return Benchmark(name, "validation", f"test: {name}", f"misbehaving_validation:{entry}",
                     distributed.BENCHMARK.params, timeout_s=timeout, distributed=True,
                     min_ranks=2, typed=distributed.DistributedParams)


HANG_TIMEOUT_S = 120.0  # the case's own timeout, far beyond the barrier's

REGISTRY = Registry([
    distributed.BENCHMARK,
    _variant("distributed-rank1-corrupts", "rank1_corrupts", 120.0),
    _variant("distributed-rank1-hangs", "rank1_hangs", HANG_TIMEOUT_S),
], locator="misbehaving_validation:REGISTRY")
