"""Host buffers on transparent huge pages, for the memory benchmark on the CPU.

A streaming copy's bandwidth on a CPU depends on how its buffers' 4 KiB pages lie in
physical memory: where the kernel hands out scattered pages (what is left after earlier
processes came and went), a 64 MiB copy ran at 18-22 GB/s, and from runs of contiguous
pages at 26-30 (one process on a 2-core EPYC VM, ten buffer sets timed in turn). Which a
process gets depends on what ran before it, so two processes measuring the same thing
differed by 10-15%, and the one that allocated first in a pair differed from the other
round after round. On 2 MiB pages every set ran at 30-35 GB/s, within ±3% of the others.
So the buffers are mapped with `MADV_HUGEPAGE` (honoured where transparent huge pages are
`always` or `madvise`, the usual settings) and aligned to 2 MiB; how much of them the
kernel did back with huge pages is read back from /proc/self/smaps and recorded.
"""

from __future__ import annotations

import contextlib
import mmap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

HUGE_PAGE = 2 << 20
SMAPS = "/proc/self/smaps"


def huge_page_tensor(count: int, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised 1-D CPU tensor of `count` elements on memory advised for huge
    pages; a plain `torch.empty` where the platform has no such advice."""
    import torch

    nbytes = count * torch.empty(0, dtype=dtype).element_size()
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or nbytes == 0:
        return torch.empty(count, dtype=dtype)
    # One huge page more than needed, so that the tensor can start on a huge page's edge.
    region = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(OSError):  # a kernel built without transparent huge pages
        region.madvise(advice)
    whole = torch.frombuffer(region, dtype=torch.uint8)  # keeps the region alive
    skip = -whole.data_ptr() % HUGE_PAGE
    return whole[skip:skip + nbytes].view(dtype)


def huge_page_share(tensors: list[torch.Tensor], smaps: str = SMAPS) -> float | None:
    """The share of the tensors' bytes that the kernel backs with huge pages now (after
    they were written), from the mappings holding them; None where unreadable."""
    spans = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors]
    wanted = sum(end - start for start, end in spans)
    if not wanted:
        return None
    huge = 0
    try:
        with open(smaps, encoding="ascii", errors="replace") as lines:
            counting = False
            for line in lines:
                head = line.split(maxsplit=1)[0] if line.strip() else ""
                if "-" in head and not head.endswith(":"):
                    low, _, high = head.partition("-")
                    try:
                        start, end = int(low, 16), int(high, 16)
                    except ValueError:
                        counting = False
                        continue
                    counting = any(start <= s < end for s, _ in spans)
                elif counting and head == "AnonHugePages:":
                    fields = line.split()
                    if len(fields) >= 2 and fields[1].isdecimal():
                        huge += int(fields[1]) * 1024
    except OSError:
        return None
    return min(1.0, huge / wanted)
