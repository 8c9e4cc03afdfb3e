"""The `health` benchmark: is this node's hardware healthy and wired as it should be?

One case per check, each reading what the kernel (sysfs) or the GPU vendor's library
(amdsmi, NVML) reports and judging every reading by a stated rule (findings):

  edac, numa, pcie, iommu, hugepages, topology   the host, from sysfs and procfs (the
                                                  topology's NVLink/XGMI from NVML/amdsmi)
  gpu-faults                                      GPU faults the kernel logged since boot
  gpu-ecc, gpu-pages, gpu-pcie, gpu-links,        each GPU, from amdsmi or NVML
  gpu-throttle, gpu-versions

A check fails when any finding fails (the case's reason names each one), passes with a
warning per finding that warns, and is skipped, with the reason, where there is nothing
to read on this node (no EDAC driver, no GPU library). Its figures count the findings
by level; every finding, with the values it was decided on, is in the details.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.health.findings import PASS, Finding, conclude
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

HOST_CHECKS = ("edac", "numa", "pcie", "iommu", "hugepages", "topology", "gpu-faults")
GPU_AREAS = ("ecc", "pages", "pcie", "links", "throttle", "versions")
GPU_CHECKS = tuple(f"gpu-{area}" for area in GPU_AREAS)
CHECKS = HOST_CHECKS + GPU_CHECKS


@dataclass(frozen=True)
class HealthParams:
    """The parameters of a health case (`BENCHMARK.params`)."""

    check: str


def measure(ctx: CaseContext, params: HealthParams) -> CaseResult:
    check = params.check
    if check in GPU_CHECKS:
        findings, details, unchecked = _gpu(ctx, check.removeprefix("gpu-"))
    else:
        findings, details, unchecked = _host(check, _vendor(ctx))
    return conclude(findings, details, unchecked)


def _vendor(ctx: CaseContext) -> str | None:
    """The GPU vendor whose library to read: the case's device's, else each in turn."""
    return {"rocm": "amd", "cuda": "nvidia"}.get(ctx.device.platform)


def _host(check: str, vendor: str | None) -> tuple[list[Finding], dict[str, Any], str | None]:
    from accelbench.benchmarks.health import host_checks, sysfs, topology

    if check == "gpu-faults":
        return _faults()
    if check == "topology":
        devices = sysfs.pci_devices()
        wiring = topology.topology(devices, topology.direct_links(vendor))
        found = [host_checks.visible_gpus(devices, _runtime_gpus())]
        return found, {"topology": wiring.to_dict()}, None
    run: dict[str, Callable[[], host_checks.Checked]] = {
        "edac": host_checks.edac, "numa": host_checks.numa, "pcie": host_checks.pcie,
        "iommu": host_checks.iommu, "hugepages": host_checks.hugepages}
    checked = run[check]()
    return list(checked.findings), dict(checked.details), checked.unchecked


def _faults() -> tuple[list[Finding], dict[str, Any], str | None]:
    from accelbench.benchmarks.health import kernel_log

    records = kernel_log.kmsg_records()
    if records is None:
        return [], {}, ("the kernel log (/dev/kmsg) cannot be read here: GPU faults since "
                        "boot (NVIDIA Xids, amdgpu resets) need root or CAP_SYSLOG")
    found = kernel_log.findings(kernel_log.events(records))
    if not found:
        found = [Finding("kernel log", PASS, kernel_log.XID_RULE,
                         f"no GPU fault among the {len(records)} records of the kernel log",
                         {"records": len(records)})]
    return found, {"records": len(records)}, None


def _runtime_gpus() -> int | None:
    """The GPUs PyTorch sees (None where it cannot say)."""
    import torch

    try:
        return int(torch.cuda.device_count())
    except RuntimeError:
        return None


def _gpu(ctx: CaseContext, area: str) -> tuple[list[Finding], dict[str, Any], str | None]:
    from accelbench.benchmarks.health import gpu

    read = gpu.read_gpus(_vendor(ctx))
    if not read.gpus:
        raise CaseSkipped(read.missing or "no GPU found by amdsmi or NVML")
    found = gpu.findings(read)[area]
    return list(found), {"source": read.source, "gpus": [g.to_dict() for g in read.gpus]}, None


BENCHMARK = Benchmark(
    name="health",
    family="health",
    summary="Node health and wiring: host memory errors (EDAC), NUMA, PCIe links and errors, "
    "IOMMU, hugepages and the GPU/NIC topology from sysfs (with NVLink/XGMI from NVML or "
    "amdsmi); each GPU's ECC, retired pages, "
    "PCIe link, XGMI/NVLink links, throttling and firmware from amdsmi or NVML",
    entry="accelbench.benchmarks.health.declaration:measure",
    sources=tuple(f"accelbench.benchmarks.health.{m}" for m in (
        "findings", "sysfs", "host_checks", "topology", "gpu", "gpu_amd", "gpu_nvidia",
        "vendor_session", "kernel_log")),
    params=(Param("check", "str", "pcie", choices=CHECKS,
                  help="what to check: " + ", ".join(CHECKS)),),
    devices=("cpu", "cuda"),
    timeout_s=120.0,
    views=("accelbench.benchmarks.health.view:sections",),
    typed=HealthParams,
)
