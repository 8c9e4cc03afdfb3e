"""The buffers of the unified-memory benchmark, of each kind, seen by the GPU and by the
CPU without a copy.

- device: `torch.empty` on the GPU (PyTorch's caching allocator over hipMalloc/cudaMalloc);
  the CPU cannot address it.
- host: page-locked host memory mapped into the GPU's address space (hipHostMalloc or
  cudaHostAlloc with the mapped flag), through the runtime library (gpu_runtime).
- managed: hipMallocManaged or cudaMallocManaged (attached globally), likewise.

Host and managed memory are handed to PyTorch as they are: a GPU tensor through
`__cuda_array_interface__` (torch.as_tensor wraps the pointer when given the device, on
ROCm builds too), a CPU tensor through the buffer protocol (torch.frombuffer over a ctypes
array at the address). Both are checked to hold the pointer itself: a copy would measure
something else. Everything allocated is freed when the buffers are closed, after the GPU
has finished with it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.micro.gpu_runtime import Runtime, RuntimeCallFailed
from accelbench.core.measurement import CaseFailed

if TYPE_CHECKING:
    import torch as torch_types
    from torch import Tensor

KINDS = ("device", "host", "managed")
# The element types used here: torch's name -> (the array interface's typestr, bytes).
ELEMENTS = {"float32": ("<f4", 4), "int32": ("<i4", 4)}


@dataclass
class Buffer:
    kind: str
    gpu: Tensor  # the memory as a tensor on the GPU
    cpu: Tensor | None  # the same memory as a CPU tensor; None for device memory
    address: int  # where the CPU reaches it (0 for device memory)
    nbytes: int


class CudaArray:
    """An object that shows `pointer` through `__cuda_array_interface__` (version 2)."""

    def __init__(self, pointer: int, count: int, element: str) -> None:
        self.__cuda_array_interface__ = {
            "shape": (count,),
            "typestr": ELEMENTS[element][0],
            "data": (pointer, False),
            "strides": None,
            "version": 2,
        }


def gpu_tensor(torch: ModuleType, pointer: int, count: int, element: str,
               device: torch_types.device) -> Tensor:
    """A tensor on `device` over the memory at `pointer`, not a copy of it."""
    tensor = torch.as_tensor(CudaArray(pointer, count, element), device=device)
    if tensor.data_ptr() != pointer or tensor.device != device:
        raise CaseFailed(
            f"PyTorch copied the memory at {pointer:#x} instead of wrapping it "
            f"(it gave {tensor.data_ptr():#x} on {tensor.device})")
    return tensor


def cpu_tensor(torch: ModuleType, address: int, count: int, element: str) -> Tensor:
    """A CPU tensor over the memory at `address`, not a copy of it."""
    nbytes = count * ELEMENTS[element][1]
    view = (ctypes.c_char * nbytes).from_address(address)
    tensor = torch.frombuffer(view, dtype=getattr(torch, element))
    if tensor.data_ptr() != address:
        raise CaseFailed(f"PyTorch copied the host memory at {address:#x}")
    return tensor


def cells(address: int, count: int) -> Any:
    """`count` int32 values at `address`, for the CPU to read and write one at a time
    (a ctypes array: no tensor indexing between a write and the kernel that reads it)."""
    return (ctypes.c_int32 * count).from_address(address)


class Buffers:
    """Allocates buffers and frees them all on close, once the GPU is idle."""

    def __init__(self, torch: ModuleType, device: torch_types.device,
                 runtime: Runtime | None) -> None:
        self._torch = torch
        self._device = device
        self._runtime = runtime
        self._frees: list[tuple[str, int]] = []  # (how, pointer), in allocation order
        self.buffers: list[Buffer] = []

    def make(self, kind: str, count: int, element: str = "float32") -> Buffer:
        torch = self._torch
        nbytes = count * ELEMENTS[element][1]
        if kind == "device":
            tensor = torch.empty(count, dtype=getattr(torch, element), device=self._device)
            buffer = Buffer(kind, tensor, None, 0, nbytes)
        else:
            runtime = self._need_runtime(kind)
            if kind == "host":
                address = runtime.malloc_host_mapped(nbytes)
                self._frees.append(("host", address))
                pointer = runtime.host_device_pointer(address)
            else:
                address = pointer = runtime.malloc_managed(nbytes)
                self._frees.append(("managed", address))
            buffer = Buffer(kind, gpu_tensor(torch, pointer, count, element, self._device),
                            cpu_tensor(torch, address, count, element), address, nbytes)
        self.buffers.append(buffer)
        return buffer

    def _need_runtime(self, kind: str) -> Runtime:
        if self._runtime is None:
            raise ValueError(f"{kind} memory needs the runtime library")
        return self._runtime

    def close(self) -> list[str]:
        """Free everything; the problems met, in words (none: an empty list)."""
        problems = []
        if self._frees:
            try:
                self._torch.cuda.synchronize(self._device)
            except Exception as exc:  # freed all the same: a broken device keeps nothing
                problems.append(f"synchronizing before freeing: {exc}")
        self.buffers.clear()  # the tensors over the memory go before the memory does
        runtime = self._runtime
        for how, pointer in reversed(self._frees):
            try:
                if runtime is not None:
                    (runtime.free_host if how == "host" else runtime.free)(pointer)
            except RuntimeCallFailed as exc:
                problems.append(f"freeing {how} memory: {exc}")
        self._frees.clear()
        return problems

    def __enter__(self) -> Buffers:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        problems = self.close()
        if problems and exc is None:
            raise CaseFailed("; ".join(problems))
