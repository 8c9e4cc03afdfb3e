"""compile and compile-max-autotune: torch.compile with inductor.

`compile` is inductor's default mode. `compile-max-autotune` asks inductor to benchmark
its kernel choices (Triton templates and GEMM backends on GPUs, C++ templates on CPUs)
and to use CUDA/HIP graphs: the fused-kernel path that AITemplate's engine offered. The
compilation happens on the first call; it is timed apart from the steady state.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.benchmarks.models.engines import COMPILE, MAX_AUTOTUNE, Job, Prepared
from accelbench.benchmarks.models.engines.eager import autocast_runner


@dataclass(frozen=True)
class Compiled:
    name: str
    mode: str | None  # torch.compile's mode

    def problem(self, job: Job) -> str | None:
        return None

    def prepare(self, job: Job) -> Prepared:
        torch = job.torch
        compiled = torch.compile(job.module, mode=self.mode, dynamic=False)
        details = {"backend": "inductor", "mode": self.mode or "default", "dynamic": False}
        return Prepared(autocast_runner(job, compiled), details, lazy=True,
                        cleanup=torch._dynamo.reset)


COMPILE_ENGINE = Compiled(COMPILE, None)
MAX_AUTOTUNE_ENGINE = Compiled(MAX_AUTOTUNE, "max-autotune")
