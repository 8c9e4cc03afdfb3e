"""Fingerprint keys, each declared once with its label and the kind of its value.

`accelbench env` and the reports show a fingerprint through `report.fingerprint.rows()`,
which writes each value as its kind says; a key's label and kind live here and nowhere
else. Keys are dotted paths into the dict `Fingerprint.to_dict()` returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# How a value is written (report.fingerprint): as it is, as a binary size, as a list of
# names counted ("2 x MI300X"), as a library's {"name", "version"}, or as the nodes of a
# distributed job (env.cluster: one row for the nodes, then their interconnect settings),
# or as the physical GPUs of the visible devices (env.gpu_identity: one row per device).
VALUE = "value"
BYTES = "bytes"
COUNTED = "counted"
LIBRARY = "library"
CLUSTER = "cluster"
GPUS = "gpus"
KINDS = (VALUE, BYTES, COUNTED, LIBRARY, CLUSTER, GPUS)


@dataclass(frozen=True)
class MetadataKey:
    key: str  # dotted path into the fingerprint dict
    label: str
    unit: str | None = None
    kind: str = VALUE
    expand: bool = False  # a mapping shown as one row per entry, labelled by its key

    def get(self, d: Mapping[str, Any]) -> Any:
        value: Any = d
        for part in self.key.split("."):
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return value


# In display order: the device, the stack from runtime down to libraries, then the host.
KEYS: tuple[MetadataKey, ...] = (
    MetadataKey("device.name", "Device"),
    MetadataKey("device.market_name", "Device (vendor tool)"),
    MetadataKey("device.type", "Device type"),
    MetadataKey("device.index", "Device index"),
    MetadataKey("device.arch", "Architecture"),
    MetadataKey("device.memory_bytes", "Device memory", unit="B", kind=BYTES),
    MetadataKey("device.compute_units", "Multiprocessors (SMs, CUs; WGPs on RDNA)"),
    MetadataKey("device.l2_cache_bytes", "L2 cache", unit="B", kind=BYTES),
    MetadataKey("devices.names", "Devices visible", kind=COUNTED),
    MetadataKey("gpus", "GPU", kind=GPUS),
    MetadataKey("product.label", "Identified as"),
    MetadataKey("product.identified_by", "Identified by"),
    MetadataKey("product.peaks", "Published peaks"),
    MetadataKey("product.no_peaks", "No published peaks"),
    MetadataKey("memory_model.integrated", "Integrated with the CPU (APU)"),
    MetadataKey("memory_model.integrated_by", "Integrated: decided by"),
    MetadataKey("memory_model.xnack", "XNACK"),
    MetadataKey("memory_model.xnack_by", "XNACK: read from"),
    MetadataKey("platform", "Platform"),
    MetadataKey("runtime.name", "Runtime"),
    MetadataKey("runtime.hip", "HIP version (PyTorch build)"),
    MetadataKey("runtime.cuda", "CUDA version (PyTorch build)"),
    MetadataKey("driver.driver_version", "Driver"),
    MetadataKey("driver.rocm_version", "ROCm version (installed)"),
    MetadataKey("driver.cuda_driver_version", "CUDA version (driver)"),
    MetadataKey("driver.amd_smi_version", "amd-smi"),
    MetadataKey("driver.products", "Devices (vendor tool)", kind=COUNTED),
    MetadataKey("driver.vbios_versions", "VBIOS"),
    MetadataKey("driver.tool", "Driver read with"),
    MetadataKey("driver.problems", "Vendor tools not read"),
    MetadataKey("torch.version", "PyTorch"),
    MetadataKey("torch.git_version", "PyTorch commit"),
    MetadataKey("torch.debug", "PyTorch debug build"),
    MetadataKey("torch.blas", "CPU BLAS"),
    MetadataKey("torch.lapack", "LAPACK"),
    MetadataKey("torch.mkl_version", "MKL"),
    MetadataKey("torch.cpu_capability", "CPU capability"),
    MetadataKey("torch.preferred_blas_library", "GPU BLAS (preferred)"),
    MetadataKey("torch.float32_matmul_precision", "float32 matmul precision"),
    MetadataKey("torch.num_threads", "PyTorch CPU threads"),
    MetadataKey("libraries.conv", "Convolution library", kind=LIBRARY),
    MetadataKey("libraries.collective", "Collective library", kind=LIBRARY),
    MetadataKey("packages", "Packages", expand=True),
    MetadataKey("onnxruntime_providers", "onnxruntime providers"),
    MetadataKey("environment", "Environment", expand=True),
    MetadataKey("cluster", "Nodes", kind=CLUSTER),
    MetadataKey("host.hostname", "Host"),
    MetadataKey("topology.signature", "GPU/NIC wiring"),
    MetadataKey("topology.direct.source", "GPU links read from"),
    MetadataKey("host.cpu_model", "CPU"),
    MetadataKey("host.physical_cores", "CPU cores"),
    MetadataKey("host.logical_cores", "CPU threads"),
    MetadataKey("threads_source", "CPU threads per process"),
    MetadataKey("host.memory_bytes", "Host memory", unit="B", kind=BYTES),
    MetadataKey("host.os", "OS"),
    MetadataKey("host.python", "Python"),
    MetadataKey("accelbench.version", "accelbench"),
)

BY_KEY: dict[str, MetadataKey] = {k.key: k for k in KEYS}
