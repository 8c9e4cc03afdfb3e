"""Words with one meaning, defined once: the status of a case and of a run, and the
torch.distributed backends."""

from __future__ import annotations

# A case.
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_SKIPPED)

# A run.
RUN_RUNNING = "running"
RUN_COMPLETE = "complete"
RUN_FAILED = "failed"
RUN_INTERRUPTED = "interrupted"
RUN_STATUSES = (RUN_RUNNING, RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED)

# torch.distributed backends: "nccl" is RCCL on ROCm builds of PyTorch, "gloo" serves
# the CPU, "mpi" exists where PyTorch was built with it.
BACKEND_NCCL = "nccl"
BACKEND_GLOO = "gloo"
BACKEND_MPI = "mpi"
BACKENDS = (BACKEND_NCCL, BACKEND_GLOO, BACKEND_MPI)
