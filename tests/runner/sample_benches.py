"""Benchmarks that misbehave on purpose, to test that the runner survives them."""

import os
import time

from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark, Registry


def ok(ctx, params):
    data = list(range(params["n"]))
    timing = ctx.time(lambda: sum(data))
    return CaseResult(timing, rates=(Rate("throughput", float(params["n"]), "item/s"),),
                      details={"n": params["n"]})


def fails(ctx, params):
    raise CaseFailed("wrong result: deliberately")


def errors(ctx, params):
    raise RuntimeError("boom\nsecond line")


def out_of_memory(ctx, params):
    import torch

    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def skips(ctx, params):
    raise CaseSkipped("not on this device")


def crashes(ctx, params):
    os.abort()


def hangs(ctx, params):
    time.sleep(3600)


def _decl(name, fn, timeout=60.0, params=()):
    return Benchmark(name, "validation", f"test: {name}", f"sample_benches:{fn.__name__}",
                     params, timeout_s=timeout)


SAMPLE_REGISTRY = Registry([
    _decl("ok", ok, params=(Param("n", "int", 1000, minimum=1),)),
    _decl("fails", fails),
    _decl("errors", errors),
    _decl("oom", out_of_memory),
    _decl("skips", skips),
    _decl("crashes", crashes),
    _decl("hangs", hangs, timeout=3.0),
])
