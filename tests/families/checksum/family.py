"""The declaration of the `checksum` family: all it is, in one place."""

from accelbench.core.family import Family, SlurmJob
from checksum.bench import BENCHMARK

FAMILY = Family(
    __package__, (BENCHMARK,),
    summary="hash functions checked and timed",
    checks=True,
    levels={1: (BENCHMARK.name,), 2: (BENCHMARK.name,), 3: (BENCHMARK.name,)},
    commands=(f"{__package__}.command",),
    slurm=(SlurmJob("checksum", "one job across nodes: `accelbench checksum` on each",
                    command="checksum", job_name="accelbench-checksum"),),
)
