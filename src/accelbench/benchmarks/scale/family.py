"""The `scale` family: training at scale (FSDP2, tensor and pipeline parallelism, a 2-D
mesh), its `scaling` suite and command (`accelbench scaling`)."""

from accelbench.benchmarks.scale import declaration
from accelbench.core.family import Family

FAMILY = Family(__package__, declaration.BENCHMARKS,
                summary="training at scale and its scaling efficiency",
                commands=(f"{__package__}.command",))
