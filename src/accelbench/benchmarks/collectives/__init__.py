"""Collective communication benchmarks: the operations that rccl-tests and nccl-tests
qualify nodes and fabrics with, measured through torch.distributed on every rank."""
