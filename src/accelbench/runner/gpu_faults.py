"""GPU faults the kernel logged while a case ran (DCGM's "Xid during the test" rule):
the worker watches the kernel log from just before the case to just after it
(env.kernel_log.KernelWatch) and judges what its GPU logged in between.

A hardware fault (an Xid of NVIDIA's hardware list, an amdgpu uncorrectable or deferred
RAS error) fails the case, its figures kept beside the reason: a figure measured while
the GPU failed is not one to trust. Another GPU fault (a row remapping, an NVLink error,
an amdgpu corrected RAS error, a GPU reset) is a warning. An application's fault (an
illegal address, a page fault) is recorded only: it is the case's own error, which the
case reports itself. Faults of the node's other GPUs are left to the health
check `gpu-faults`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement
from accelbench.core.names import STATUS_FAILED, STATUS_OK
from accelbench.env.kernel_log import FAIL, WARN, Event, KernelWatch

__all__ = ["judge", "watch"]


def watch(device: DeviceInfo) -> tuple[KernelWatch, str | None] | None:
    """A watch of the kernel log for a GPU case, with the GPU's PCI address where PyTorch
    reports it; None on other devices or where the log cannot be read."""
    if device.type != "cuda":
        return None
    found = KernelWatch.open()
    return None if found is None else (found, _address(device))


def _address(device: DeviceInfo) -> str | None:
    from accelbench.env.pcie import pci_address
    from accelbench.env.telemetry.sources import DeviceAddress

    try:
        import torch

        pci = DeviceAddress.of(torch.cuda.get_device_properties(device.index or 0)).pci
    except Exception:  # a device that cannot be asked: every GPU's faults are kept
        return None
    return pci_address(pci) if pci is not None else None


def judge(m: Measurement, logged: Sequence[Event], address: str | None) -> Measurement:
    """The measurement with the GPU faults logged during it (only its GPU's, where its
    address is known) in its details, and judged as the module says."""
    mine = [e for e in logged if address is None or e.on(address)]
    if not mine:
        return m
    details = {**m.details, "gpu_events": [e.to_dict() for e in mine[:50]]}
    worst = [e for e in mine if e.level == FAIL] or [e for e in mine if e.level == WARN]
    if not worst:
        return dataclasses.replace(m, details=details)
    said = "; ".join(e.describe() for e in worst[:3]) + (
        f"; {len(worst) - 3} more" if len(worst) > 3 else "")
    if worst[0].level == WARN:
        return dataclasses.replace(m, details=details, warnings=(
            *m.warnings, f"the kernel logged a GPU fault during the case: {said}"))
    reason = f"the kernel logged a GPU hardware fault during the case: {said}"
    if m.status != STATUS_OK:
        reason = f"{m.reason}; {reason}" if m.reason else reason
        return dataclasses.replace(m, details=details, reason=reason)
    return dataclasses.replace(m, status=STATUS_FAILED, reason=reason, details=details)
