"""Whole-model benchmarks: training and inference throughput of real architectures.

`zoo` names the models and builds them from configurations with random weights (nothing
is downloaded); `train` and `infer` hold the benchmark declarations and their measure
functions. Importing this package, `zoo` or the declarations does not import torch.
"""

# Every module of the package shapes the numbers (the models, their FLOPs, the step), so
# all of them are part of the version of the model benchmarks.
MODEL_SOURCES = (
    *(f"accelbench.benchmarks.models.{name}"
      for name in ("batchsize", "checks", "flops", "heads", "lstm", "memory", "params",
                   "precision", "results", "tasks", "trainer", "zoo")),
    "accelbench.benchmarks.mathmode",  # the float32 math mode, set for every case
)
