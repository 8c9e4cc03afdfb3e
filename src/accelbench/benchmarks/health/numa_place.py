"""Running on one NUMA node's CPUs and placing memory on one node, without libnuma: the
whole process (every thread, PyTorch's own pool included) is pinned with
sched_setaffinity, memory is placed by first touch under the kernel's default local
policy, and where each page landed is asked of the kernel (move_pages with no target
nodes), so a copy that was meant to cross nodes is known to have.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
from collections.abc import Iterator, Sequence

# move_pages(2)'s system call number: the kernel's syscall tables.
_MOVE_PAGES = {"x86_64": 279, "aarch64": 239, "ppc64le": 301}


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
