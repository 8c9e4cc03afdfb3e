"""The `collectives` benchmark declaration: one case per operation, size, dtype, reduction
and form, measured on every rank of a torch.distributed job (see `ops` for what is
measured and how sizes and bandwidths are defined)."""

from __future__ import annotations

from accelbench.benchmarks.collectives.ops import (
    DTYPE_NAMES,
    INPLACE_CHOICES,
    OPS,
    REDUCE_OPS,
    REDUCING,
    CollectivesParams,
)
from accelbench.benchmarks.collectives.sweep import SizeParam
from accelbench.core.params import UNKEYED, Param
from accelbench.core.registry import Benchmark

BENCHMARK = Benchmark(
    name="collectives",
    family="collectives",
    summary="Collectives through torch.distributed (RCCL, NCCL, Gloo, MPI): time, algorithm "
    "and bus bandwidth per message size, checked on known data",
    entry="accelbench.benchmarks.collectives.ops:measure",
    params=(
        Param("op", "str", "all-reduce", help="the collective operation", choices=OPS),
        SizeParam(
            "bytes",
            "int",
            1 << 20,
            help="size of the operation as nccl-tests define it (the buffer for all-reduce, "
            "broadcast, reduce, send-recv; the whole gathered or scattered data for "
            "all-gather, reduce-scatter, gather, scatter; each rank's send buffer for "
            "all-to-all); K/M/G suffixes; a sweep MIN:MAX:xFACTOR or MIN:MAX:+STEP makes "
            "one case per size",
            minimum=0,
            # A barrier moves no data: one case, whatever the sizes of its grid.
            only_when=("op", tuple(op for op in OPS if op != "barrier")), outside=UNKEYED,
        ),
        Param("dtype", "str", "fp32", help="element type", choices=DTYPE_NAMES,
              only_when=("op", tuple(op for op in OPS if op != "barrier")), outside=UNKEYED),
        Param("reduce", "str", "sum",
              help="reduction of all-reduce, reduce-scatter and reduce", choices=REDUCE_OPS,
              only_when=("op", REDUCING), outside=UNKEYED),
        Param("inplace", "str", "auto",
              help="auto: out-of-place where torch.distributed has both forms (all-gather, "
              "reduce-scatter), the only form elsewhere; yes or no force one",
              choices=INPLACE_CHOICES),
        Param("warmup", "int", 0,
              help="warm-up calls before timing (nccl-tests -w); 0: the timing core's warm-up "
              "time", minimum=0),
        Param("iters", "int", 0,
              help="calls per timed sample (nccl-tests -n); 0: sized by the timing core",
              minimum=0),
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    distributed=True,
    min_ranks=2,
    views=("accelbench.benchmarks.collectives.view:sections",),
    typed=CollectivesParams,
)
