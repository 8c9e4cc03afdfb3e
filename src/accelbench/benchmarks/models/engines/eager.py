"""eager: the model itself, under autocast for fp16 and bf16 (the reference engine)."""

from __future__ import annotations

from typing import Any

from accelbench.benchmarks.models.engines import EAGER, Job, Prepared


class Eager:
    name = EAGER

    def problem(self, job: Job) -> str | None:
        return None

    def prepare(self, job: Job) -> Prepared:
        return Prepared(autocast_runner(job, job.module), {"runs": "the eager module"})


def autocast_runner(job: Job, module: Any) -> Any:
    """module(*inputs) under the precision's autocast (none for fp32, tf32 and casts)."""
    precision, device_type = job.precision, job.device.type

    def run(inputs: tuple[Any, ...]) -> Any:
        with precision.autocast(job.torch, device_type):
            return module(*inputs)

    return run


ENGINE = Eager()
