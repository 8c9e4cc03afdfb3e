"""torch.distributed plumbing: the job a process belongs to, its group, its coordinator.

Environment variables follow torchrun's (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR/MASTER_PORT). The backend named "nccl" is RCCL on ROCm
builds of PyTorch; "gloo" serves the CPU; "mpi" exists where PyTorch was built with it.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

from accelbench.core.context import DistInfo
from accelbench.core.names import BACKENDS
from accelbench.core.untrusted import is_decimal
from accelbench.errors import DeviceError, UserError


def launched_by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return all(k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


def default_backend(device_type: str) -> str:
    """NCCL (RCCL on ROCm) for GPUs, Gloo for the CPU."""
    return "nccl" if device_type == "cuda" else "gloo"


def check_backend(backend: str | None, device_type: str) -> str:
    """Validate a --backend value against the device, without starting anything."""
    if backend is None:
        return default_backend(device_type)
    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r} (backends: {', '.join(BACKENDS)})")
    if backend == "nccl" and device_type != "cuda":
        raise UserError("the nccl backend (RCCL on ROCm) needs a GPU device; use gloo on cpu")
    return backend


def torchrun_number(name: str, environ: Mapping[str, str] | None = None,
                    default: int | None = None, at_least: int = 0) -> int:
    """One of torchrun's variables (RANK, WORLD_SIZE, ...) as a whole number; a value
    that is none (`WORLD_SIZE=abc`) is bad input, said in one line."""
    env = os.environ if environ is None else environ
    text = env.get(name)
    if text is None and default is not None:
        return default
    value = text.strip() if text is not None else ""
    if not is_decimal(value) or int(value) < at_least:
        raise UserError(f"{name}={text!r}: torchrun sets it to a whole number"
                        + (f" of at least {at_least}" if at_least else "")
                        + "; run under torchrun, or unset RANK, WORLD_SIZE and LOCAL_RANK")
    return int(value)


def info_from_env(backend: str, environ: Mapping[str, str] | None = None) -> DistInfo:
    world = torchrun_number("WORLD_SIZE", environ, at_least=1)
    rank = torchrun_number("RANK", environ)
    local_rank = torchrun_number("LOCAL_RANK", environ)
    local_world = torchrun_number("LOCAL_WORLD_SIZE", environ, default=world, at_least=1)
    if rank >= world or local_rank >= local_world:
        raise UserError(f"RANK={rank} and LOCAL_RANK={local_rank} do not fit WORLD_SIZE="
                        f"{world} and LOCAL_WORLD_SIZE={local_world}: torchrun sets them so")
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank,
                    local_world_size=local_world, backend=backend)


def init_group(backend: str, device_type: str, timeout_s: float, first: int = 0) -> DistInfo:
    """Join the job's default process group; each rank on its own local device, rank r
    on GPU `first + r`."""
    import torch
    import torch.distributed as dist

    info = info_from_env(backend)
    if backend == "mpi" and not dist.is_mpi_available():
        raise DeviceError("the mpi backend is not available in this PyTorch build")
    if backend == "nccl" and not dist.is_nccl_available():
        raise DeviceError("the nccl backend (RCCL/NCCL) is not available in this PyTorch build")
    if device_type == "cuda":
        index = first + info.local_rank
        if index >= torch.cuda.device_count():
            raise DeviceError(
                f"local rank {info.local_rank} has no GPU (it would use cuda:{index}): "
                f"{torch.cuda.device_count()} visible"
            )
        torch.cuda.set_device(index)
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=dt.timedelta(seconds=timeout_s))
    return info


def join_as_rank(device: tuple[str, int | None], backend: str | None, timeout_s: float
                 ) -> tuple[DistInfo, str, str]:
    """Under a torchrun the user started: check --device (as `ValidRequest.device` names
    it), join the job's group.

    Returns the rank's place, the device it measures on ("cpu" or "cuda:LOCAL_RANK") and
    the backend in use.
    """
    import torch

    from accelbench.env.torch_floor import require_supported_torch

    info_from_env(backend or "")  # a broken torchrun environment is refused first
    stdout_for_python_only()
    require_supported_torch(str(torch.__version__))
    kind, index = device
    if index is not None:
        raise UserError("under torchrun each rank uses its local GPU: use --device cuda or cpu")
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    backend = check_backend(backend, kind)
    info = init_group(backend, kind, timeout_s)
    return info, ("cpu" if kind == "cpu" else f"{kind}:{info.local_rank}"), backend


def stdout_for_python_only() -> None:
    """From here on, what native libraries write to file descriptor 1 goes to stderr, and
    Python's sys.stdout alone writes to the real standard output: ranks under a user's
    torchrun share it, and Gloo prints "[Gloo] Rank 1 is connected to 1 peer ranks" there
    whenever a group is made, which would break `--json` output."""
    import sys

    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no standard output to keep
        return
    sys.stdout = open(saved, "w", buffering=1, encoding=sys.stdout.encoding,  # noqa: SIM115
                      errors=sys.stdout.errors)


def shutdown_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class GroupCoordinator:
    """Timing decisions through the default process group (see core.timing.Coordinator)."""

    def __init__(self, device: Any) -> None:
        import torch
        import torch.distributed as dist

        self._torch = torch
        self._dist = dist
        self._device = device

    def slowest(self, seconds: float) -> float:
        value = self._torch.tensor([seconds], dtype=self._torch.float64, device=self._device)
        self._dist.all_reduce(value, op=self._dist.ReduceOp.MAX)
        return float(value.item())

    def agree(self, value: int) -> int:
        data = self._torch.tensor([value], dtype=self._torch.int64, device=self._device)
        self._dist.broadcast(data, src=0)
        return int(data.item())

    def sampling(self) -> None:
        pass


class GroupBroken(Exception):
    """The job's process group failed between cases: a peer is gone or out of step, and
    no collective of this group can be trusted again."""

    def __init__(self, index: int, error: str) -> None:
        super().__init__(f"case {index}: {error}")
        self.index = index
        self.error = error


def gather_outcomes(status: str, reason: str | None) -> list[tuple[str, str | None]]:
    """Every rank's (status, reason) of the case just run, on every rank."""
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, (status, reason))
    return out
