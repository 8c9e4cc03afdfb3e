"""The `models` family: training and inference of whole models built from configurations
with random weights, through eager PyTorch and the engines they are deployed with."""

from accelbench.benchmarks.models import generate, infer, infer_engine, train
from accelbench.core.family import Family

FAMILY = Family(__package__, (train.BENCHMARK, train.DDP_BENCHMARK, infer.BENCHMARK,
                              infer_engine.BENCHMARK, generate.BENCHMARK),
                summary="training, inference and generation of whole models")
