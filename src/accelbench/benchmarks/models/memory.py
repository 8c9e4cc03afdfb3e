"""Peak memory of a case: device memory on GPUs, resident memory of the process on the CPU.

On GPUs the figure is PyTorch's peak of allocated device memory since the case began
(the caching allocator may hold more; that is reported beside it). On the CPU it is the
process's peak resident set size (VmHWM), reset at the start of the case where Linux
allows (`/proc/self/clear_refs`); otherwise the peak of the process's whole life, said so.
CPU figures include the Python interpreter and the libraries.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import device as TorchDevice

_PROC = Path("/proc/self")


class PeakMemory:
    def __init__(self, torch: ModuleType, device: torch.device | str) -> None:
        self._torch = torch
        self._device: TorchDevice = torch.device(device)
        self._reset_ok = False
        self.reset()

    def reset(self) -> None:
        if self._device.type == "cuda":
            self._torch.cuda.reset_peak_memory_stats(self._device)
            return
        try:
            (_PROC / "clear_refs").write_text("5")  # resets VmHWM to the current RSS
            self._reset_ok = True
        except OSError:
            self._reset_ok = False

    def peak(self) -> tuple[int, dict[str, Any]]:
        """Peak bytes since reset, and details saying what was measured."""
        if self._device.type == "cuda":
            cuda = self._torch.cuda
            return int(cuda.max_memory_allocated(self._device)), {
                "peak_memory_source": "torch.cuda.max_memory_allocated",
                "peak_memory_reserved": int(cuda.max_memory_reserved(self._device)),
            }
        hwm = _vm_hwm() if self._reset_ok else None
        if hwm is not None:
            return hwm, {"peak_memory_source": "peak RSS of the process during the case (VmHWM)"}
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        return int(rss), {"peak_memory_source": "peak RSS of the process over its life"}


def _vm_hwm() -> int | None:
    try:
        for line in (_PROC / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
