"""Fingerprint keys, each declared once with its label, unit and formatter.

`accelbench env` and the reports show a fingerprint through `rows()`, so a key's label
and the way its value is written live here and nowhere else. Keys are dotted paths into
the dict `Fingerprint.to_dict()` returns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Formatter = Callable[[Any], str]


def format_bytes(n: float | None) -> str:
    """Binary units, as memory is sold and reported: 68702699520 -> "64.0 GiB"."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def format_library(value: Any) -> str:
    """{"name": "MIOpen", "version": "3.2.0"} -> "MIOpen 3.2.0"."""
    if not isinstance(value, Mapping):
        return format_value(value)
    return " ".join(str(value[k]) for k in ("name", "version") if value.get(k))


def format_counted(value: Any) -> str:
    """["MI300X", "MI300X"] -> "2 x MI300X": device lists are mostly one name repeated."""
    if not isinstance(value, (list, tuple)):
        return format_value(value)
    counts = Counter(str(v) for v in value)
    return ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counts.items())


@dataclass(frozen=True)
class MetadataKey:
    key: str  # dotted path into the fingerprint dict
    label: str
    unit: str | None = None
    format: Formatter = format_value
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
    MetadataKey("device.type", "Device type"),
    MetadataKey("device.index", "Device index"),
    MetadataKey("device.arch", "Architecture"),
    MetadataKey("device.memory_bytes", "Device memory", unit="B", format=format_bytes),
    MetadataKey("device.compute_units", "Compute units"),
    MetadataKey("device.l2_cache_bytes", "L2 cache", unit="B", format=format_bytes),
    MetadataKey("devices.names", "Devices visible", format=format_counted),
    MetadataKey("platform", "Platform"),
    MetadataKey("runtime.name", "Runtime"),
    MetadataKey("runtime.hip", "HIP version (PyTorch build)"),
    MetadataKey("runtime.cuda", "CUDA version (PyTorch build)"),
    MetadataKey("driver.driver_version", "Driver"),
    MetadataKey("driver.rocm_version", "ROCm version (installed)"),
    MetadataKey("driver.cuda_driver_version", "CUDA version (driver)"),
    MetadataKey("driver.amd_smi_version", "amd-smi"),
    MetadataKey("driver.products", "Devices (vendor tool)", format=format_counted),
    MetadataKey("driver.vbios_versions", "VBIOS"),
    MetadataKey("driver.tool", "Driver read with"),
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
    MetadataKey("libraries.conv", "Convolution library", format=format_library),
    MetadataKey("libraries.collective", "Collective library", format=format_library),
    MetadataKey("packages", "Packages", expand=True),
    MetadataKey("onnxruntime_providers", "onnxruntime providers"),
    MetadataKey("environment", "Environment", expand=True),
    MetadataKey("host.hostname", "Host"),
    MetadataKey("host.cpu_model", "CPU"),
    MetadataKey("host.physical_cores", "CPU cores"),
    MetadataKey("host.logical_cores", "CPU threads"),
    MetadataKey("host.memory_bytes", "Host memory", unit="B", format=format_bytes),
    MetadataKey("host.os", "OS"),
    MetadataKey("host.python", "Python"),
    MetadataKey("accelbench.version", "accelbench"),
)

BY_KEY: dict[str, MetadataKey] = {k.key: k for k in KEYS}


def _absent(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, (list, tuple, dict)) and not value)


def rows(fingerprint: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs for a fingerprint dict, in display order, absent values skipped.

    A mapping key declared with `expand` (packages, environment) gives one row per entry.
    """
    result: list[tuple[str, str]] = []
    for meta in KEYS:
        value = meta.get(fingerprint)
        if _absent(value):
            continue
        if meta.expand and isinstance(value, Mapping):
            # An empty value is kept here: CUDA_VISIBLE_DEVICES="" hides every GPU.
            result.extend(
                (str(name), meta.format(item) or '""')
                for name, item in value.items()
                if item is not None
            )
            continue
        text = meta.format(value)
        if text:
            result.append((meta.label, text))
    return result
