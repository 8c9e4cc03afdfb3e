"""The benchmark registry: every benchmark accelbench knows, listed explicitly.

Importing this module imports only the declarations; torch is imported inside each
benchmark's measure function, in the worker that runs it.
"""

from __future__ import annotations

from accelbench.benchmarks.collectives import declaration as collectives
from accelbench.benchmarks.health import copy_matrix, stress
from accelbench.benchmarks.health import declaration as health
from accelbench.benchmarks.isolate import declaration as isolate
from accelbench.benchmarks.micro import attention, conv, gemm, launch, memory, unified
from accelbench.benchmarks.models import generate, infer, infer_engine, train
from accelbench.benchmarks.scale import declaration as scale
from accelbench.benchmarks.serving import bench as serve
from accelbench.benchmarks.validation import (
    amp,
    audio,
    burn,
    determinism,
    distributed,
    export,
    memtest,
    numerics,
    recsys,
    text,
    torch_compile,
    vision,
)
from accelbench.core.registry import Registry

REGISTRY = Registry([
    gemm.BENCHMARK,
    memory.BENCHMARK,
    unified.BENCHMARK,
    launch.BENCHMARK,
    conv.BENCHMARK,
    attention.BENCHMARK,
    collectives.BENCHMARK,
    isolate.BENCHMARK,
    train.BENCHMARK,
    train.DDP_BENCHMARK,
    # Training at scale: FSDP2, tensor and pipeline parallelism, a 2-D mesh.
    *scale.BENCHMARKS,
    infer.BENCHMARK,
    infer_engine.BENCHMARK,
    generate.BENCHMARK,
    serve.BENCHMARK,
    # Validation checks (`accelbench validate`): pass, fail or skip, with the error found.
    numerics.BENCHMARK,
    amp.BENCHMARK,
    determinism.BENCHMARK,
    torch_compile.BENCHMARK,
    export.EXPORT,
    export.ONNX,
    vision.BENCHMARK,
    audio.BENCHMARK,
    text.BENCHMARK,
    recsys.BENCHMARK,
    memtest.BENCHMARK,
    burn.BENCHMARK,
    distributed.BENCHMARK,
    # Node health (`accelbench health`, `validate --level`): readings judged by rules.
    health.BENCHMARK,
    copy_matrix.BENCHMARK,
    stress.BENCHMARK,
])

__all__ = ["REGISTRY"]
