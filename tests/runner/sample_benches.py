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


def hangs_announced(ctx, params):
    """Hangs, having first created the file $SAMPLE_HANG_FILE: a test can act on the hang
    itself, not on a guess of when it begins."""
    with open(os.environ["SAMPLE_HANG_FILE"], "w"):
        pass
    time.sleep(3600)


def pid(ctx, params):
    timing = ctx.time(lambda: None)
    return CaseResult(timing, details={"pid": os.getpid()})


def mode_key(params):
    return params["mode"]


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
    _decl("hangs_announced", hangs_announced, timeout=600.0),
    _decl("pid", pid),
    Benchmark("keyed_pid", "validation", "test: separate workers per mode",
              "sample_benches:pid", (Param("mode", "str", "a"),), worker_key=mode_key),
], locator="sample_benches:SAMPLE_REGISTRY")


def dist_sum(ctx, params):
    """An all-reduce whose exact result is known, then timed."""
    import torch
    import torch.distributed as dist

    world = ctx.dist.world_size
    check = torch.full((4,), float(ctx.dist.rank + 1))
    dist.all_reduce(check)
    if check[0].item() != world * (world + 1) / 2:
        raise CaseFailed(f"wrong sum {check[0].item()}")
    data = torch.ones(params["n"])
    timing = ctx.time(lambda: dist.all_reduce(data))
    return CaseResult(timing, rates=(Rate("bandwidth", 4.0 * params["n"], "B/s"),),
                      details={"world": world})


def dist_rank1_dies(ctx, params):
    import torch.distributed as dist

    if ctx.dist.rank == 1:
        os._exit(3)
    dist.barrier()


def dist_rank1_hangs(ctx, params):
    import torch.distributed as dist

    if ctx.dist.rank == 1:
        time.sleep(3600)
    dist.barrier()


def dist_rank1_fails(ctx, params):
    if ctx.dist.rank == 1:
        raise CaseFailed("only rank 1 saw this")
    return ok(ctx, {"n": 10})


def _dist(name, fn, timeout=60.0, params=()):
    return Benchmark(name, "collective", f"test: {name}", f"sample_benches:{fn.__name__}",
                     params, timeout_s=timeout, distributed=True)


DIST_REGISTRY = Registry([
    _decl("ok", ok, params=(Param("n", "int", 1000, minimum=1),)),
    _dist("dist_sum", dist_sum, params=(Param("n", "int", 1024, minimum=1),)),
    _dist("dist_dies", dist_rank1_dies),
    _dist("dist_hangs", dist_rank1_hangs, timeout=8.0),
    _dist("dist_fails", dist_rank1_fails),
], locator="sample_benches:DIST_REGISTRY")


def environ_probe(ctx, params):
    """Reports the environment the worker started with, and what its fresh folder held."""
    from accelbench.core.worker_env import FRESH_DIRS_VARIABLE

    folder = os.environ.get("SAMPLE_FRESH")
    timing = ctx.time(lambda: None)
    return CaseResult(timing, details={
        "pid": os.getpid(),
        "value": os.environ.get("SAMPLE_VALUE"),
        "folder": folder,
        "folder_entries": sorted(os.listdir(folder)) if folder else None,
        "fresh": os.environ.get(FRESH_DIRS_VARIABLE),
    })


def probe_env(params, device):
    from accelbench.core.worker_env import WorkerEnv

    return WorkerEnv.of({"SAMPLE_VALUE": params["value"]}, fresh_dirs=("SAMPLE_FRESH",))


ENV_REGISTRY = Registry([
    Benchmark("environ_probe", "validation", "test: worker environment",
              "sample_benches:environ_probe", (Param("value", "str", "a"),),
              worker_env=probe_env),
    _decl("pid", pid),
], locator="sample_benches:ENV_REGISTRY")
