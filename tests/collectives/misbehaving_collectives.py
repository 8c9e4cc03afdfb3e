"""The collectives benchmark with rank 1 misbehaving on purpose, to test how the runner
ends such cases: rank 1 dies, is killed or hangs in the middle of timing, or counts wrong elements.

Each wraps the real measure function and changes only rank 1's operation, so the label,
the parameters and everything up to the misbehaviour are the real benchmark's.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.collectives import ops
from accelbench.benchmarks.collectives.declaration import BENCHMARK
from accelbench.core.registry import Benchmark, Registry

if TYPE_CHECKING:
    from accelbench.core.context import CaseContext
    from accelbench.core.measurement import CaseResult

CALLS_BEFORE_TROUBLE = 3  # the correctness check, then two warm-up calls


def _on_rank1(ctx: CaseContext, params: ops.CollectivesParams,
              change: Callable[[ops.Prepared], ops.Prepared]) -> CaseResult:
    real = ops.prepare

    def prepare(*args: Any, **kwargs: Any) -> ops.Prepared:
        prepared = real(*args, **kwargs)
        on_rank1 = ctx.dist is not None and ctx.dist.rank == 1
        return change(prepared) if on_rank1 else prepared

    ops.prepare = prepare
    try:
        return ops.measure(ctx, params)
    finally:
        ops.prepare = real


def _after(calls: int, trouble: Callable[[], Any], fn: Callable[[], Any]) -> Callable[[], Any]:
    count = 0

    def call() -> Any:
        nonlocal count
        count += 1
        if count > calls:
            trouble()
        return fn()

    return call


def rank1_dies(ctx: CaseContext, params: ops.CollectivesParams) -> CaseResult:
    return _on_rank1(ctx, params, lambda p: ops.Prepared(
        _after(CALLS_BEFORE_TROUBLE, lambda: os._exit(3), p.call), p.check))


def rank1_is_killed(ctx: CaseContext, params: ops.CollectivesParams) -> CaseResult:
    return _on_rank1(ctx, params, lambda p: ops.Prepared(
        _after(CALLS_BEFORE_TROUBLE, lambda: os.kill(os.getpid(), signal.SIGKILL), p.call),
        p.check))


def rank1_hangs(ctx: CaseContext, params: ops.CollectivesParams) -> CaseResult:
    return _on_rank1(ctx, params, lambda p: ops.Prepared(
        _after(CALLS_BEFORE_TROUBLE, lambda: time.sleep(3600), p.call), p.check))


def rank1_miscounts(ctx: CaseContext, params: ops.CollectivesParams) -> CaseResult:
    return _on_rank1(ctx, params, lambda p: ops.Prepared(p.call, lambda: p.check() + 5))


def _variant(name: str, fn: Callable[..., Any], timeout: float) -> Benchmark:
    return Benchmark(name, "collective", f"test: collectives, {name}",
                     f"misbehaving_collectives:{fn.__name__}", BENCHMARK.params,
                     timeout_s=timeout, distributed=True, typed=ops.CollectivesParams)


HANG_TIMEOUT_S = 8.0

REGISTRY = Registry([
    BENCHMARK,
    _variant("collectives-rank1-miscounts", rank1_miscounts, 60.0),
    _variant("collectives-rank1-dies", rank1_dies, 60.0),
    _variant("collectives-rank1-is-killed", rank1_is_killed, 60.0),
    _variant("collectives-rank1-hangs", rank1_hangs, HANG_TIMEOUT_S),
], locator="misbehaving_collectives:REGISTRY")
