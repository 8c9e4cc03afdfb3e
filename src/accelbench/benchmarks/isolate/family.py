"""The `isolate` family: pairs of nodes and of local ranks, measured to name the slow node
or link, with its own command (`accelbench isolate`) and batch job (`accelbench slurm
isolate`)."""

from accelbench.benchmarks.isolate import declaration
from accelbench.core.family import Family, SlurmJob

FAMILY = Family(
    __package__, (declaration.BENCHMARK,),
    summary="pairs of nodes and ranks, to name the slow node or link",
    commands=(f"{__package__}.command",),
    slurm=(SlurmJob("isolate", "one job across nodes: torchrun on each, `accelbench "
                    "isolate`", command="isolate", job_name="accelbench-isolate"),))
