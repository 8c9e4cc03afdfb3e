"""Running on one NUMA node's CPUs and placing memory on one node, without libnuma: the
whole process (every thread, PyTorch's own pool included) is pinned with
sched_setaffinity, memory is placed by first touch under the kernel's default local
policy, and where each page landed is asked of the kernel (move_pages with no target
nodes), so a copy that was meant to cross nodes is known to have.

A buffer to place is a fresh anonymous mapping of its own (`placed`), never memory an
allocator hands out: an allocator's cache (glibc's heap for small buffers, PyTorch's
caching host allocator for pinned ones) gives a freed block back where its pages already
lie, on whichever node first touched them. Page-locked memory for GPU copies is such a
buffer registered with the GPU runtime (`page_locked`), which pins its pages where they
are, rather than memory from PyTorch's pinned allocator: that allocator keeps freed
blocks for reuse, and it allocates with cudaHostAlloc(..., cudaHostAllocDefault)
(aten/src/ATen/cuda/CachingHostAllocator.cpp), under ROCm hipHostMalloc with the default
flags, which places memory on the NUMA node nearest the current GPU whatever CPUs the
process runs on (HIP's host memory guide, "Memory allocation flags of pinned memory":
only hipHostMallocNumaUser follows the process's NUMA policy).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import platform
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

# move_pages(2)'s system call number: the kernel's syscall tables.
_MOVE_PAGES = {"x86_64": 279, "aarch64": 239, "ppc64le": 301}
# cudaHostRegisterDefault and hipHostRegisterDefault: with unified addressing (every
# 64-bit CUDA and ROCm process), memory registered so is mapped and portable: pinned
# for every GPU of the process (cuda_runtime_api.h, hip_runtime_api.h).
_REGISTER_DEFAULT = 0


def threads() -> list[int]:
    """The ids of this process's threads."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


@contextlib.contextmanager
def pinned(cpus: Sequence[int]) -> Iterator[None]:
    """Every thread of the process on `cpus` until the block ends (then as it was)."""
    before = {tid: _affinity(tid) for tid in threads()}
    try:
        for tid in before:
            _set_affinity(tid, cpus)
        yield
    finally:
        for tid, mask in before.items():
            if mask:
                _set_affinity(tid, mask)


def _affinity(tid: int) -> set[int]:
    try:
        return os.sched_getaffinity(tid)
    except OSError:  # the thread ended
        return set()


def _set_affinity(tid: int, cpus: Sequence[int] | set[int]) -> None:
    with contextlib.suppress(OSError):
        os.sched_setaffinity(tid, cpus)


def page_nodes(address: int, length: int, samples: int = 64) -> list[int] | None:
    """The NUMA node of up to `samples` pages spread over [address, address + length);
    None where the kernel cannot be asked (another architecture, a kernel without
    NUMA, a sandbox that refuses the call)."""
    number = _MOVE_PAGES.get(platform.machine())
    if number is None or length <= 0:
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    first = address - address % page
    count = max(1, min(samples, length // page))
    step = max(page, (length // count) // page * page)
    pages = (ctypes.c_void_p * count)(*[first + i * step for i in range(count)])
    status = (ctypes.c_int * count)()
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(ctypes.c_long(number), ctypes.c_int(0), ctypes.c_ulong(count),
                          pages, None, status, ctypes.c_int(0))
    if result != 0:
        return None
    nodes = list(status)
    return nodes if all(n >= 0 for n in nodes) else None


def placed(torch: ModuleType, cpus: Sequence[int], nbytes: int) -> Tensor:
    """`nbytes` of zeroed host memory (a uint8 tensor) whose pages the CPUs `cpus` wrote
    first, so they lie on those CPUs' NUMA node wherever it has free pages. The tensor
    keeps its mapping alive; the pages go back to the kernel with the last reference."""
    # Private and anonymous (Python maps anonymous memory shared unless told): page-aligned,
    # with no page until written.
    block = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
    tensor = torch.frombuffer(block, dtype=torch.uint8)
    with pinned(cpus):
        tensor.zero_()
    return tensor


@contextlib.contextmanager
def page_locked(torch: ModuleType, tensor: Tensor) -> Iterator[Tensor]:
    """`tensor`'s host memory (from `placed`) registered with the GPU runtime until the
    block ends: cudaHostRegister, hipHostRegister under ROCm (PyTorch binds either as
    torch.cuda.cudart().cudaHostRegister). Registering pins the pages where they lie, so
    the GPUs copy to and from them directly, as from PyTorch's pinned memory. Every copy
    must be finished when the block ends."""
    runtime = torch.cuda.cudart()
    address, nbytes = tensor.data_ptr(), tensor.numel() * tensor.element_size()
    torch.cuda.check_error(runtime.cudaHostRegister(address, nbytes, _REGISTER_DEFAULT))
    try:
        yield tensor
    finally:
        released = runtime.cudaHostUnregister(address)
    torch.cuda.check_error(released)


def found_on(*buffers: Tensor) -> str | None:
    """Where the pages of these host buffers lie: "node1", or "node0,node1" where they
    are spread over nodes; None where the kernel cannot be asked about one of them."""
    nodes: set[int] = set()
    for buffer in buffers:
        found = page_nodes(buffer.data_ptr(), buffer.numel() * buffer.element_size())
        if found is None:
            return None
        nodes.update(found)
    return ",".join(f"node{n}" for n in sorted(nodes))
