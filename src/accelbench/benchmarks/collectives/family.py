"""The `collectives` family: the operations rccl-tests and nccl-tests qualify nodes and
fabrics with, on every rank of a torchrun job; `accelbench slurm collectives` runs them
across nodes."""

from accelbench.benchmarks.collectives import declaration
from accelbench.core.family import Family, SlurmJob

FAMILY = Family(
    __package__, (declaration.BENCHMARK,),
    summary="collective operations through torch.distributed, bus bandwidth per size",
    slurm=(SlurmJob("collectives", "one job across nodes: torchrun on each, `accelbench run "
                    "--bench collectives`", command="run", options=("--bench", "collectives"),
                    job_name="accelbench-collectives"),))
