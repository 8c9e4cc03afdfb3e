"""Whether a GPU shares one memory with the CPU (an APU), and whether XNACK is on.

On an APU the CPU and the GPU reach the same memory: AMD's Instinct MI300A puts EPYC
cores and CDNA compute units on one package with one HBM. PyTorch says so through
`torch.cuda.get_device_properties(i).is_integrated` (PyTorch 2.9 and later have it, from
hipDeviceProp_t::integrated on ROCm and cudaDeviceProp::integrated on CUDA); a device
identified as an MI300A (core.product) is one whatever that flag says.

XNACK lets an AMD GPU retry a memory access after a page fault: page migration of managed
memory and GPU access to memory the GPU has not mapped need it. The HSA runtime turns it
on with HSA_XNACK=1 where the kernel driver allows it; the device's gcnArchName then
carries `xnack+` (`xnack-` when off), which is what is in effect. HSA_XNACK is read
only where gcnArchName says neither.

Nothing here imports torch: the fingerprint and the benchmark hand in the properties.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.core import product
from accelbench.core.device import DeviceInfo


@dataclass(frozen=True)
class MemoryModel:
    """How a GPU's memory relates to the CPU's."""

    integrated: bool  # an APU: CPU and GPU share one memory
    integrated_by: str  # what said so, or said not
    xnack: bool | None = None  # AMD GPUs only; None when nothing says
    xnack_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"integrated": self.integrated,
                               "integrated_by": self.integrated_by}
        if self.xnack_by is not None:
            out["xnack"] = self.xnack
            out["xnack_by"] = self.xnack_by
        return out


def memory_model(props: object, device: DeviceInfo,
                 environ: Mapping[str, str]) -> MemoryModel | None:
    """The memory model of a GPU from its PyTorch device properties; None for a CPU."""
    if device.platform not in ("rocm", "cuda"):
        return None
    integrated, integrated_by = _integrated(props, device)
    if device.platform != "rocm":
        return MemoryModel(integrated, integrated_by)
    xnack, xnack_by = _xnack(getattr(props, "gcnArchName", None), environ)
    return MemoryModel(integrated, integrated_by, xnack, xnack_by)


def _integrated(props: object, device: DeviceInfo) -> tuple[bool, str]:
    flag = getattr(props, "is_integrated", None)
    apu = product.shares_host_memory(device)
    if apu is not None:
        if flag is None:
            return True, f"identified as {apu}, an APU"
        if bool(flag):
            return True, f"PyTorch's is_integrated, and identified as {apu}, an APU"
        return True, f"identified as {apu}, an APU, though PyTorch's is_integrated is False"
    if props is None:
        return False, "PyTorch gave no device properties"
    if flag is None:
        return False, "PyTorch's device properties have no is_integrated"
    if bool(flag):
        return True, "PyTorch's is_integrated"
    return False, "PyTorch's is_integrated"


def _xnack(gcn_arch: object, environ: Mapping[str, str]) -> tuple[bool | None, str]:
    features = str(gcn_arch or "").split(":")[1:]
    asked = environ.get("HSA_XNACK")
    if "xnack+" in features or "xnack-" in features:
        on = "xnack+" in features
        said = f"gcnArchName {gcn_arch}"
        if asked is not None and (asked == "1") != on:
            said += f" (HSA_XNACK={asked} is set, but not in effect)"
        return on, said
    if asked is not None:
        return asked == "1", f"HSA_XNACK={asked} (gcnArchName {gcn_arch or '?'} says neither)"
    return None, f"neither gcnArchName ({gcn_arch or '?'}) nor HSA_XNACK says"
