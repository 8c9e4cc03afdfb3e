"""The benchmark registry: every benchmark accelbench knows, listed explicitly.

Importing this module imports only the declarations; torch is imported inside each
benchmark's measure function, in the worker that runs it.
"""

from __future__ import annotations

from accelbench.benchmarks.collectives import bench as collectives
from accelbench.benchmarks.micro import attention, conv, gemm, launch, memory, unified
from accelbench.benchmarks.models import infer, train
from accelbench.core.registry import Registry

REGISTRY = Registry([
    gemm.BENCHMARK,
    memory.BENCHMARK,
    unified.BENCHMARK,
    launch.BENCHMARK,
    conv.BENCHMARK,
    attention.BENCHMARK,
    collectives.BENCHMARK,
    train.BENCHMARK,
    train.DDP_BENCHMARK,
    infer.BENCHMARK,
])

__all__ = ["REGISTRY"]
