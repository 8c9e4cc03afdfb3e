"""The benchmark registry: every benchmark accelbench knows, listed explicitly.

Importing this module imports only the declarations; torch is imported inside each
benchmark's measure function, in the worker that runs it.
"""

from __future__ import annotations

from accelbench.benchmarks.micro import gemm, launch, memory
from accelbench.core.registry import Registry

REGISTRY = Registry([gemm.BENCHMARK, memory.BENCHMARK, launch.BENCHMARK])

__all__ = ["REGISTRY"]
