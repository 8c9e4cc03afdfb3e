"""The gate check with a figure that never returns, as a hung GPU's would: the real
check's code, the GEMM's measurement replaced by a sleep, under a short deadline (a few
times what the other figure takes in a fresh worker, start-up included)."""

import dataclasses
import time

from accelbench.benchmarks.qualify import declaration
from accelbench.core.registry import Registry


def hangs(ctx, params):
    from accelbench.benchmarks.qualify import figures

    def never_returns(*args, **kwargs):
        time.sleep(3600)

    if params.figure == "gemm-fp32":
        figures.measure = never_returns
    return declaration.measure(ctx, params)


HUNG = dataclasses.replace(declaration.BENCHMARK, entry="qualify_hang:hangs", timeout_s=20.0,
                           extra_time=None, check=True)
HANG_REGISTRY = Registry([HUNG], locator="qualify_hang:HANG_REGISTRY")
