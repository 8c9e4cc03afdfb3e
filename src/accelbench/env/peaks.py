"""Published peak figures of accelerators, as the vendors' datasheets state them.

Each figure is the dense matrix peak a GEMM can reach, per package, in TFLOP/s (TOPS for
int8), with the 2:4 structured-sparsity figure kept apart. On NVIDIA GPUs fp32 is the
non-tensor FP32 figure (an fp32 GEMM without TF32 runs on the CUDA cores) and fp64 is the
FP64 tensor-core figure; on AMD GPUs fp32 and fp64 are the matrix-core figures. NVIDIA's
Hopper datasheets print only the sparse tensor figures ("1/2 lower without sparsity"), so
the dense ones there are half of them. A figure a datasheet does not give is absent, never
estimated.

MI250 and MI250X carry two GCDs per package and PyTorch sees each GCD as a device, so
`devices_per_package` is 2 there and the per-device figures are half the package's.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from accelbench.env.device import DeviceInfo

PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True)
class DevicePeaks:
    name: str
    dense: dict[str, float] = field(hash=False)  # TFLOP/s (TOPS for int8) per package
    sparse: dict[str, float] = field(hash=False)  # 2:4 structured sparsity, same units
    memory_tbs: float | None  # TB/s per package
    devices_per_package: int = 1  # PyTorch devices one package shows up as
    source: str = ""

    def dense_flops(self, key: str) -> float | None:
        """Dense peak for `key` in FLOP/s (OP/s for int8) per PyTorch device."""
        return self._per_device(self.dense.get(key))

    def sparse_flops(self, key: str) -> float | None:
        """Structured-sparsity peak for `key` in FLOP/s per PyTorch device."""
        return self._per_device(self.sparse.get(key))

    @property
    def memory_bandwidth(self) -> float | None:
        """Peak memory bandwidth in bytes/s per PyTorch device."""
        return self._per_device(self.memory_tbs)

    def _per_device(self, tera: float | None) -> float | None:
        return None if tera is None else tera * 1e12 / self.devices_per_package


def _amd_cdna3(name: str, memory_tbs: float, source: str) -> DevicePeaks:
    """MI300X and MI325X share the CDNA3 compute die and differ only in memory."""
    return DevicePeaks(
        name=name,
        dense={
            "fp64": 163.4,
            "fp32": 163.4,
            "tf32": 653.7,
            "fp16": 1307.4,
            "bf16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        sparse={"tf32": 1307.4, "fp16": 2614.9, "bf16": 2614.9, "fp8": 5229.8, "int8": 5229.8},
        memory_tbs=memory_tbs,
        source=source,
    )


def _nvidia_a100(name: str, memory_tbs: float, source: str) -> DevicePeaks:
    """All A100 variants have the same compute figures; memory differs."""
    return DevicePeaks(
        name=name,
        dense={
            "fp64": 19.5,
            "fp32": 19.5,
            "tf32": 156.0,
            "fp16": 312.0,
            "bf16": 312.0,
            "int8": 624.0,
        },
        sparse={"tf32": 312.0, "fp16": 624.0, "bf16": 624.0, "int8": 1248.0},
        memory_tbs=memory_tbs,
        source=source,
    )


def _nvidia_hopper(
    name: str, sparse: dict[str, float], fp64: float, fp32: float, memory_tbs: float, source: str
) -> DevicePeaks:
    """Hopper datasheets print the sparse tensor figures; dense is half of each."""
    return DevicePeaks(
        name=name,
        dense={"fp64": fp64, "fp32": fp32, **{k: v / 2 for k, v in sparse.items()}},
        sparse=dict(sparse),
        memory_tbs=memory_tbs,
        source=source,
    )


_H100_SXM_SPARSE = {"tf32": 989.0, "fp16": 1979.0, "bf16": 1979.0, "fp8": 3958.0, "int8": 3958.0}
_H100_PCIE_SPARSE = {"tf32": 756.0, "fp16": 1513.0, "bf16": 1513.0, "fp8": 3026.0, "int8": 3026.0}

_PEAKS: tuple[DevicePeaks, ...] = (
    DevicePeaks(
        name="AMD Instinct MI100",
        dense={"fp64": 11.5, "fp32": 46.1, "fp16": 184.6, "bf16": 92.3, "int8": 184.6},
        sparse={},
        memory_tbs=1.2288,
        source="AMD Instinct MI100 datasheet (CDNA has no FP64 matrix cores: fp64 is vector)",
    ),
    DevicePeaks(
        name="AMD Instinct MI210",
        dense={"fp64": 45.3, "fp32": 45.3, "fp16": 181.0, "bf16": 181.0, "int8": 181.0},
        sparse={},
        memory_tbs=1.6384,
        source="AMD Instinct MI210 datasheet",
    ),
    DevicePeaks(
        name="AMD Instinct MI250",
        dense={"fp64": 90.5, "fp32": 90.5, "fp16": 362.1, "bf16": 362.1, "int8": 362.1},
        sparse={},
        memory_tbs=3.2768,
        devices_per_package=2,
        source="AMD Instinct MI250 datasheet",
    ),
    DevicePeaks(
        name="AMD Instinct MI250X",
        dense={"fp64": 95.7, "fp32": 95.7, "fp16": 383.0, "bf16": 383.0, "int8": 383.0},
        sparse={},
        memory_tbs=3.2768,
        devices_per_package=2,
        source="AMD Instinct MI250X datasheet",
    ),
    _amd_cdna3("AMD Instinct MI300X", 5.3, "AMD Instinct MI300X datasheet"),
    _amd_cdna3("AMD Instinct MI325X", 6.0, "AMD Instinct MI325X datasheet"),
    _nvidia_a100("NVIDIA A100 SXM4 40GB", 1.555, "NVIDIA A100 Tensor Core GPU datasheet"),
    _nvidia_a100("NVIDIA A100 SXM4 80GB", 2.039, "NVIDIA A100 Tensor Core GPU datasheet"),
    _nvidia_a100("NVIDIA A100 PCIe 40GB", 1.555, "NVIDIA A100 Tensor Core GPU datasheet"),
    _nvidia_a100("NVIDIA A100 PCIe 80GB", 1.935, "NVIDIA A100 Tensor Core GPU datasheet"),
    _nvidia_hopper(
        "NVIDIA H100 SXM5",
        _H100_SXM_SPARSE,
        67.0,
        67.0,
        3.35,
        "NVIDIA H100 Tensor Core GPU datasheet",
    ),
    _nvidia_hopper(
        "NVIDIA H100 PCIe",
        _H100_PCIE_SPARSE,
        51.0,
        51.0,
        2.0,
        "NVIDIA H100 Tensor Core GPU datasheet",
    ),
    _nvidia_hopper(
        "NVIDIA H200 SXM",
        _H100_SXM_SPARSE,
        67.0,
        67.0,
        4.8,
        "NVIDIA H200 Tensor Core GPU datasheet",
    ),
)

_BY_NAME = {p.name: p for p in _PEAKS}

# Device names as PyTorch reports them, normalised by _normalise(), to table entries.
# Names that could be more than one product ("NVIDIA H100", "AMD Instinct MI250X / MI250",
# "... VF", "... NVL") are deliberately absent.
_ALIASES: dict[str, str] = {
    "mi100": "AMD Instinct MI100",
    "mi210": "AMD Instinct MI210",
    "mi250": "AMD Instinct MI250",
    "mi250x": "AMD Instinct MI250X",
    "mi300x": "AMD Instinct MI300X",
    "mi325x": "AMD Instinct MI325X",
    "a100 sxm4 40gb": "NVIDIA A100 SXM4 40GB",
    "a100 sxm4 80gb": "NVIDIA A100 SXM4 80GB",
    "a100 pcie 40gb": "NVIDIA A100 PCIe 40GB",
    "a100 80gb pcie": "NVIDIA A100 PCIe 80GB",
    "h100 80gb hbm3": "NVIDIA H100 SXM5",
    "h100 pcie": "NVIDIA H100 PCIe",
    "h200": "NVIDIA H200 SXM",
}

# Only one product has each of these ROCm architectures, so the arch decides when the
# name does not. gfx90a (MI210/MI250/MI250X) and gfx942 (MI300X/MI300A/MI325X) do not.
_ARCH_ONLY: dict[str, str] = {"gfx908": "AMD Instinct MI100"}

# Full compute-unit count of GPUs that can be split into compute partitions (CPX, DPX,
# QPX), where each partition is its own PyTorch device with a share of the package.
_PARTITIONABLE: dict[str, int] = {"AMD Instinct MI300X": 304, "AMD Instinct MI325X": 304}
_PARTITION_COUNTS = (2, 4, 8)

_NOISE_WORDS = {"nvidia", "amd", "instinct", "tesla"}


def _normalise(name: str) -> str:
    words = re.sub(r"[-_/,()]+", " ", name.lower()).split()
    return " ".join(w for w in words if w not in _NOISE_WORDS)


def _partitions(peaks: DevicePeaks, device: DeviceInfo) -> int:
    """How many compute partitions the package is split into, judged by its CU count."""
    full = _PARTITIONABLE.get(peaks.name)
    if not full or not device.compute_units or device.compute_units >= full:
        return 1
    ratio = full / device.compute_units
    return next((n for n in _PARTITION_COUNTS if abs(ratio - n) < 0.05), 1)


def lookup(device: DeviceInfo) -> DevicePeaks | None:
    """Published peaks of `device`, None when its product cannot be identified for sure."""
    if device.type == "cpu" or device.platform == "cpu":
        return None
    name = _ALIASES.get(_normalise(device.name or ""))
    if name is None and device.platform == "rocm" and device.arch:
        name = _ARCH_ONLY.get(device.arch.split(":", 1)[0])
    if name is None:
        return None
    peaks = _BY_NAME[name]
    partitions = _partitions(peaks, device)
    if partitions > 1:
        peaks = dataclasses.replace(
            peaks, devices_per_package=peaks.devices_per_package * partitions
        )
    return peaks


def all_peaks() -> list[DevicePeaks]:
    """Every device in the table, for listing."""
    return list(_PEAKS)
