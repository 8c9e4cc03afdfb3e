"""Whole-model benchmarks: training and inference throughput of real architectures.

`zoo` names the models and builds them from configurations with random weights (nothing
is downloaded); `train` and `infer` hold the benchmark declarations and their measure
functions. Importing this package, `zoo` or the declarations does not import torch.
"""
