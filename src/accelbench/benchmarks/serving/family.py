"""The `serving` family: serving scenarios under MLPerf LoadGen."""

from accelbench.benchmarks.serving import bench
from accelbench.core.family import Family

FAMILY = Family(__package__, (bench.BENCHMARK,),
                summary="MLPerf LoadGen serving scenarios")
