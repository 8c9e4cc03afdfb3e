"""The `micro` family: one primitive each (matrix multiply, memory traffic, host and
unified memory, kernel launch, convolution, attention)."""

from accelbench.benchmarks.micro import attention, conv, gemm, launch, memory, unified
from accelbench.core.family import Family

FAMILY = Family(__package__, (gemm.BENCHMARK, memory.BENCHMARK, unified.BENCHMARK,
                              launch.BENCHMARK, conv.BENCHMARK, attention.BENCHMARK),
                summary="one primitive each: GEMM, memory, launch, convolution, attention")
