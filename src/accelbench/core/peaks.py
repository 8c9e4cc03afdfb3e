"""Published peak figures of accelerators, as the vendors' datasheets state them.

Each figure is the dense matrix peak a GEMM can reach, per package, in TFLOP/s (TOPS for
int8), with the 2:4 structured-sparsity figure kept apart. On NVIDIA GPUs fp32 is the
non-tensor FP32 figure (an fp32 GEMM without TF32 runs on the CUDA cores) and fp64 is the
FP64 tensor-core figure; on AMD GPUs fp32 and fp64 are the matrix-core figures. NVIDIA's
Hopper datasheets print only the sparse tensor figures ("1/2 lower without sparsity"), so
the dense ones there are half of them. The L40S (Ada) datasheet prints both, and no
fp64 or int8 figure, so those are absent. A figure a datasheet does not give is absent,
never estimated.

MI250 and MI250X carry two GCDs per package and PyTorch sees each GCD as a device, so
`devices_per_package` is 2 there and the per-device figures are half the package's; a
compute partition of an MI300-class GPU gets its share the same way.

RDNA GPUs (Radeon PRO V620, W7900, RX 7900 XTX) have no fp32 or fp64 matrix units: their
fp32 is the vector figure, and a precision their data sheet gives no figure for (fp64,
int8, and tf32 and fp8, which they do not support) is absent. RDNA 3's fp16 and bf16 are
the WMMA figures. The CU counts in their sources are AMD's; ROCm reports half as many
work-group processors, which core.product reads as such.

The GPUs of AMD's Ryzen processors (Radeon 8060S and its Strix Halo siblings, the 890M
and 880M of Strix Point, the 860M to 820M of Krackan Point, the 780M to 740M of Phoenix
and Hawk Point) are identified but have no entry: AMD's processor pages give their
graphics model, compute units and clock, and its GPU specification table their
architecture and compute units, but neither gives a peak TFLOP/s or a memory bandwidth
for them, and one graphics model is sold in several processors. A figure worked out from
those parameters would be accelbench's estimate, not a published peak. RDNA 4 (Radeon RX
9070 XT, Radeon AI PRO R9700) is not in the table yet.

Which entry applies to a device is decided by core.product, from its name, architecture,
compute-unit (or WGP) count and memory; `explain` says why a device has none.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

from accelbench.core import product
from accelbench.core.device import DeviceInfo

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
    DevicePeaks(
        name="AMD Instinct MI300A",
        dense={
            "fp64": 122.6,
            "fp32": 122.6,
            "tf32": 490.3,
            "fp16": 980.6,
            "bf16": 980.6,
            "fp8": 1961.2,
            "int8": 1961.2,
        },
        sparse={"tf32": 980.6, "fp16": 1961.2, "bf16": 1961.2, "fp8": 3922.3, "int8": 3922.3},
        memory_tbs=5.3,
        source="AMD Instinct MI300A APU data sheet (228 CUs at 2100 MHz; FP64/FP32 matrix "
        "122.6, FP16/BF16 980.6 TFLOP/s, INT8 1961.2 TOPS; 128 GB HBM3 at 5.3 TB/s)",
    ),
    DevicePeaks(
        name="AMD Radeon PRO V620",
        dense={"fp32": 20.28, "fp16": 40.55},
        sparse={},
        memory_tbs=0.512,
        source="AMD Radeon PRO V620 specifications (72 CUs; peak FP32 20.28, FP16 40.55 "
        "TFLOP/s; 32 GB GDDR6 at 512 GB/s)",
    ),
    DevicePeaks(
        name="AMD Radeon PRO W7900",
        dense={"fp32": 61.3, "fp16": 122.6, "bf16": 122.6},
        sparse={},
        memory_tbs=0.864,
        source="AMD Radeon PRO W7900 specifications (96 CUs; peak FP32 61.3, FP16 and BF16 "
        "122.6 TFLOP/s; 48 GB GDDR6 at 864 GB/s)",
    ),
    DevicePeaks(
        name="AMD Radeon RX 7900 XTX",
        dense={"fp32": 61.4, "fp16": 122.8, "bf16": 122.8},
        sparse={},
        memory_tbs=0.96,
        source="AMD Radeon RX 7900 XTX specifications (96 CUs; peak FP32 61.4, FP16 and BF16 "
        "122.8 TFLOP/s; 24 GB GDDR6 at 960 GB/s)",
    ),
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
    DevicePeaks(
        name="NVIDIA L40S",
        dense={"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0},
        sparse={"tf32": 366.0, "fp16": 733.0, "bf16": 733.0, "fp8": 1466.0},
        memory_tbs=0.864,
        source="NVIDIA L40S datasheet (142 SMs; FP32 91.6, TF32 183, BF16/FP16 362.05, FP8 "
        "733 TFLOP/s dense, twice that with sparsity; 48 GB GDDR6 at 864 GB/s; 350 W)",
    ),
)

_BY_NAME = {p.name: p for p in _PEAKS}

# Per-device figures of two products that agree within this are the same figures, rounded
# differently (MI210: 45.3 TFLOP/s fp64; one MI250 GCD: 90.5 / 2).
_SAME = 0.005


def _share(peaks: DevicePeaks, fit: product.Fit) -> DevicePeaks:
    if fit.partitions == 1:
        return peaks
    return dataclasses.replace(peaks, devices_per_package=peaks.devices_per_package
                               * fit.partitions)


def _same_per_device(a: DevicePeaks, b: DevicePeaks) -> bool:
    def close(x: float | None, y: float | None) -> bool:
        return (x is None and y is None) or (
            x is not None and y is not None and math.isclose(x, y, rel_tol=_SAME))

    return (set(a.dense) == set(b.dense) and set(a.sparse) == set(b.sparse)
            and all(close(a.dense_flops(k), b.dense_flops(k)) for k in a.dense)
            and all(close(a.sparse_flops(k), b.sparse_flops(k)) for k in a.sparse)
            and close(a.memory_bandwidth, b.memory_bandwidth))


@functools.lru_cache(maxsize=256)
def _resolve(device: DeviceInfo) -> tuple[DevicePeaks | None, str | None]:
    found = product.identify(device)
    if not found.fits:
        return None, found.reason
    entries = []
    for fit in found.fits:
        peaks = _BY_NAME.get(fit.name)
        if peaks is None:
            missing = f"the peak table has no published figures for {fit.name}"
            return None, f"{found.reason}; {missing}" if found.reason else missing
        entries.append(_share(peaks, fit))
    if len(entries) == 1:
        return entries[0], None
    if all(_same_per_device(entries[0], other) for other in entries[1:]):
        # Not knowing which of these it is costs nothing: their devices rate the same.
        sources = "; ".join(e.source for e in entries)
        return dataclasses.replace(entries[0], name=found.label,
                                   source=f"{sources} (equal per device)"), None
    return None, f"{found.reason}, and their published peaks differ"


def lookup(device: DeviceInfo) -> DevicePeaks | None:
    """Published peaks of `device`, None when its product cannot be identified for sure."""
    return _resolve(device)[0]


def explain(device: DeviceInfo) -> str | None:
    """Why `device` has no published peaks; None when it has."""
    return _resolve(device)[1]


def all_peaks() -> list[DevicePeaks]:
    """Every device in the table, for listing."""
    return list(_PEAKS)
