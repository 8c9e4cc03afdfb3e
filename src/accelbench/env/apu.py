"""Whether a GPU shares one memory with the CPU (an APU), whether XNACK is on, and so where
managed memory lives when the GPU uses it.

On an APU the CPU and the GPU reach the same memory: AMD's Instinct MI300A puts EPYC
cores and CDNA compute units on one package with one HBM. PyTorch says so through
`torch.cuda.get_device_properties(i).is_integrated` (PyTorch 2.9 and later have it, from
hipDeviceProp_t::integrated on ROCm and cudaDeviceProp::integrated on CUDA); a device
identified as an MI300A (core.product) is one whatever that flag says.

XNACK lets an AMD GPU retry a memory access after a page fault: page migration of managed
memory and GPU access to memory the GPU has not mapped need it. Three things decide it,
and the device's gcnArchName wins over the environment:

- gcnArchName's feature (`gfx90a:sramecc+:xnack+` / `xnack-`) is the mode the runtime
  runs the device in: the code objects it loads must match it. It is the outcome of
  everything that has a say: HSA_XNACK, the kernel driver (amdgpu.noretry=0 turns XNACK
  on without HSA_XNACK; a driver without HMM support, or a virtualised GPU, keeps it off
  whatever is asked) and the GPU itself (gfx906 and gfx908 report `xnack-` with
  HSA_XNACK=1; gfx90a and gfx942 follow it). A HSA_XNACK that disagrees is recorded as
  set but not in effect.
- No feature in a gcnArchName PyTorch did give: the runtime names every target that has
  XNACK with its mode, so a bare name (`gfx1100`, `gfx1151`) is a target without XNACK,
  which HSA_XNACK=1 cannot turn on: off.
- No gcnArchName at all: HSA_XNACK=1 only asks (the driver or the GPU may refuse it, as
  above), so nothing says: None; any other value is off (only 1 turns it on); unset: None.

Managed memory (hipMallocManaged, cudaMallocManaged) lives, as the GPU uses it, where
`managed_memory` says: on an APU in the one memory (nothing migrates, XNACK or not); on
CUDA it migrates (see `managed_memory`); on a discrete AMD GPU it migrates to device
memory on the GPU's page faults only with XNACK on, and without it ROCm keeps it in host
memory, where the GPU reaches it over the link like mapped (zero-copy) host memory.

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
    xnack_feature: str | None = None  # gcnArchName's "xnack+" / "xnack-"; None: absent
    hsa_xnack: str | None = None  # the HSA_XNACK the process ran with; None: unset

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"integrated": self.integrated,
                               "integrated_by": self.integrated_by}
        if self.xnack_by is not None:
            out["xnack"] = self.xnack
            out["xnack_by"] = self.xnack_by
            out["xnack_feature"] = self.xnack_feature
            out["hsa_xnack"] = self.hsa_xnack
        return out


# Where managed memory is when the GPU uses it (ManagedMemory.placement).
MIGRATES = "migrates"  # its pages move to the processor that touches them
HOST_RESIDENT = "host-resident"  # it stays in host memory; the GPU reaches it over the link
ONE_MEMORY = "one memory"  # an APU: CPU and GPU share the memory it is in
UNKNOWN = "unknown"  # an AMD GPU whose XNACK state nothing says


@dataclass(frozen=True)
class ManagedMemory:
    """Where managed memory lives when the GPU uses it, and what says so."""

    placement: str  # MIGRATES, HOST_RESIDENT, ONE_MEMORY or UNKNOWN
    placement_by: str

    def to_dict(self) -> dict[str, Any]:
        return {"managed_memory": self.placement, "managed_memory_by": self.placement_by}


def managed_memory(model: MemoryModel, platform: str) -> ManagedMemory:
    """Where a GPU's managed memory lives: the one memory of an APU; on CUDA, device memory
    once touched (pages migrate on demand with concurrentManagedAccess, Pascal and later
    on Linux, HMM or ATS systems included; without it, all of them at each kernel's
    launch, as before Pascal); on a discrete AMD GPU, device memory on page faults with
    XNACK on, host memory without it."""
    if model.integrated:
        return ManagedMemory(ONE_MEMORY, "an APU: the CPU and the GPU share one memory, so "
                                         "nothing migrates, XNACK or not")
    if platform != "rocm":
        return ManagedMemory(MIGRATES, "CUDA: pages migrate to the GPU on its page faults "
                                       "(concurrentManagedAccess) or at a kernel's launch "
                                       "(without it)")
    said = model.xnack_by or "nothing says"
    if model.xnack:
        return ManagedMemory(MIGRATES, f"XNACK on ({said}): the GPU retries after a page "
                                       "fault and the driver migrates the page to it")
    if model.xnack is False:
        return ManagedMemory(HOST_RESIDENT, f"XNACK off ({said}): the GPU cannot retry after "
                                            "a page fault, so ROCm keeps managed memory in "
                                            "host memory and the GPU reaches it over the link")
    return ManagedMemory(UNKNOWN, f"XNACK's state is not known ({said}): managed memory "
                                  "migrates with it on and stays in host memory without it")


def memory_model(props: object, device: DeviceInfo,
                 environ: Mapping[str, str]) -> MemoryModel | None:
    """The memory model of a GPU from its PyTorch device properties; None for a CPU."""
    if device.platform not in ("rocm", "cuda"):
        return None
    integrated, integrated_by = _integrated(props, device)
    if device.platform != "rocm":
        return MemoryModel(integrated, integrated_by)
    gcn_arch = str(getattr(props, "gcnArchName", None) or "")
    features = gcn_arch.split(":")[1:]
    feature = next((f for f in features if f in ("xnack+", "xnack-")), None)
    asked = environ.get("HSA_XNACK")
    xnack, xnack_by = _xnack(gcn_arch, feature, asked)
    return MemoryModel(integrated, integrated_by, xnack, xnack_by, feature, asked)


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


def _xnack(gcn_arch: str, feature: str | None, asked: str | None
           ) -> tuple[bool | None, str]:
    """XNACK's state and what said so; the module docstring says which source wins."""
    if feature is not None:
        on = feature == "xnack+"
        said = f"gcnArchName {gcn_arch}"
        if asked is not None and (asked == "1") != on:
            said += f" (HSA_XNACK={asked} is set, but not in effect)"
        return on, said
    if gcn_arch:
        said = f"gcnArchName {gcn_arch} has no xnack feature: the target has no XNACK"
        if asked == "1":
            said += " (HSA_XNACK=1 is set, but cannot take effect)"
        return False, said
    if asked == "1":
        return None, ("HSA_XNACK=1 asks for it, but PyTorch gave no gcnArchName to show it "
                      "took effect")
    if asked is not None:  # only 1 turns it on
        return False, f"HSA_XNACK={asked} (PyTorch gave no gcnArchName)"
    return None, "neither gcnArchName (not given) nor HSA_XNACK says"
