"""Which product a GPU is, from what it reports of itself.

On ROCm, PyTorch's device name comes from the driver stack's table of marketing names
(libdrm's amdgpu.ids). That table can lack a device, which is then called "AMD Radeon
Graphics" (an MI300X on an older install), and it gives some products one name ("AMD
Instinct MI250X / MI250"). So an AMD device is identified by its architecture
(gcnArchName), its count of compute units or work-group processors and its memory,
matched against the products in AMD's GPU specification table (ROCm documentation, "AMD
GPU specifications"), with the device name and amd-smi's market name as evidence. A
compute partition of an MI300-class GPU (SPX, DPX, TPX, QPX, CPX) reports its share of
the compute units and is recognised as such. Where the evidence leaves more than one
product, the device is not identified and says so; its `label`, which names it in
generation keys, is never one product's name.

What the count counts. On CDNA (gfx9) HIP's multiProcessorCount is the compute-unit
count. On RDNA (gfx10, gfx11, gfx12) HIP runs kernels in work-group-processor mode by
default and counts work-group processors (WGPs), two CUs each: a Radeon RX 7900 XTX, 96
CUs in AMD's table, reports 48. With GPU_ENABLE_WGP_MODE=0 (CU mode) the same device
reports 96, as rocminfo always does. An RDNA signature therefore accepts both counts of
the whole device, WGPs and CUs, so the result does not depend on a runtime setting. This
costs nothing where no two products of one architecture share a count, and where they do
(an 8050S's 16 WGPs are an 8040S's 16 CUs) the device is not taken for either: it is "one
or the other" until its name says which. A count that fits no product is described as
WGPs, the default reading. Whether a count was read as WGPs or CUs is said in `basis`.

AMD's APUs (the MI300A; the Radeon graphics of Ryzen processors) have no memory of their
own: their GPU sees what the OS lends it, a carve-out or a share of system memory that a
BIOS or kernel setting sizes. So an APU's memory never rules it out; the MI300A's is only
checked not to exceed its 128 GB, and a Ryzen processor's GPU, which can be lent any
share of whatever memory the system has, is identified by architecture and count alone.

A CUDA device's name names one product and is taken as it is.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from accelbench.core.device import DeviceInfo

MI100 = "AMD Instinct MI100"
MI210 = "AMD Instinct MI210"
MI250 = "AMD Instinct MI250"
MI250X = "AMD Instinct MI250X"
MI300A = "AMD Instinct MI300A"
MI300X = "AMD Instinct MI300X"
MI325X = "AMD Instinct MI325X"
V620 = "AMD Radeon PRO V620"
W7900 = "AMD Radeon PRO W7900"
W7900_DUAL_SLOT = "AMD Radeon PRO W7900 Dual Slot"
RX_7900_XTX = "AMD Radeon RX 7900 XTX"
# The GPUs of Ryzen processors, named by AMD's graphics model: one model is in several
# processors (the Radeon 8060S in the Ryzen AI Max+ 395 and 392 among others).
RADEON_8060S = "AMD Radeon 8060S"
RADEON_8065S = "AMD Radeon 8065S"
RADEON_8050S = "AMD Radeon 8050S"
RADEON_8040S = "AMD Radeon 8040S"
RADEON_890M = "AMD Radeon 890M"
RADEON_880M = "AMD Radeon 880M"
RADEON_860M = "AMD Radeon 860M"
RADEON_840M = "AMD Radeon 840M"
RADEON_820M = "AMD Radeon 820M"
RADEON_780M = "AMD Radeon 780M"
RADEON_760M = "AMD Radeon 760M"
RADEON_740M = "AMD Radeon 740M"

_RDNA = re.compile(r"^gfx1[0-2][0-9a-f]{2}$")


def is_rdna(arch: str) -> bool:
    """Whether an LLVM target ("gfx1100") is RDNA, whose GPUs are built of WGPs."""
    return bool(_RDNA.match(arch))


@dataclass(frozen=True)
class Signature:
    """How one AMD product shows itself to PyTorch, per device (one GCD of an MI250)."""

    name: str
    arch: str  # LLVM target, as gcnArchName gives it
    compute_units: int  # CUs, as AMD's table counts them; ROCm reports half on RDNA
    memory_gib: float | None  # None: an APU whose GPU can be lent any amount
    unified_memory: bool = False  # an APU: its GPU sees what the OS lends it, up to this
    partitions: tuple[tuple[int, str], ...] = ()  # compute partitions: (count, mode name)

    @property
    def wgps(self) -> int | None:
        """Work-group processors, two CUs each, on RDNA; None elsewhere."""
        return self.compute_units // 2 if is_rdna(self.arch) else None


def reported_count(sig: Signature) -> int:
    """What ROCm's multi_processor_count says of a whole device of `sig` by default:
    WGPs on RDNA, CUs elsewhere."""
    return sig.compute_units if sig.wgps is None else sig.wgps


_MI300X_MODES = ((2, "DPX"), (4, "QPX"), (8, "CPX"))

# From AMD's GPU specification table: LLVM target, compute units and VRAM per device.
# The W7900 Dual Slot has no published peaks here; it is listed so that a W7900-shaped
# device with a generic name is not taken for a W7900. For the same reason every
# graphics model the table lists for an APU architecture is here, though the peak table
# has figures for none of them.
SIGNATURES: tuple[Signature, ...] = (
    Signature(MI100, "gfx908", 120, 32),
    Signature(MI210, "gfx90a", 104, 64),
    Signature(MI250, "gfx90a", 104, 64),  # per GCD: 208 CUs and 128 GiB per package
    Signature(MI250X, "gfx90a", 110, 64),  # per GCD: 220 CUs and 128 GiB per package
    Signature(MI300X, "gfx942", 304, 192, partitions=_MI300X_MODES),
    Signature(MI325X, "gfx942", 304, 256, partitions=_MI300X_MODES),
    # Six XCDs of 38 CUs: three partitions of two XCDs (TPX) or one per XCD (CPX).
    Signature(MI300A, "gfx942", 228, 128, unified_memory=True,
              partitions=((3, "TPX"), (6, "CPX"))),
    Signature(V620, "gfx1030", 72, 32),
    Signature(W7900, "gfx1100", 96, 48),
    Signature(W7900_DUAL_SLOT, "gfx1100", 96, 48),
    Signature(RX_7900_XTX, "gfx1100", 96, 24),
    # Ryzen processors' GPUs ("Dynamic + carveout" memory in the table).
    Signature(RADEON_8060S, "gfx1151", 40, None, unified_memory=True),  # Strix Halo
    Signature(RADEON_8065S, "gfx1151", 40, None, unified_memory=True),
    Signature(RADEON_8050S, "gfx1151", 32, None, unified_memory=True),
    Signature(RADEON_8040S, "gfx1151", 16, None, unified_memory=True),
    Signature(RADEON_890M, "gfx1150", 16, None, unified_memory=True),  # Strix Point
    Signature(RADEON_880M, "gfx1150", 12, None, unified_memory=True),
    Signature(RADEON_860M, "gfx1152", 8, None, unified_memory=True),  # Krackan Point
    Signature(RADEON_840M, "gfx1152", 4, None, unified_memory=True),
    Signature(RADEON_820M, "gfx1152", 2, None, unified_memory=True),
    Signature(RADEON_780M, "gfx1103", 12, None, unified_memory=True),  # Phoenix, Hawk Point
    Signature(RADEON_760M, "gfx1103", 8, None, unified_memory=True),
    Signature(RADEON_740M, "gfx1103", 4, None, unified_memory=True),
)
_BY_NAME = {s.name: s for s in SIGNATURES}

NVIDIA = frozenset({
    "NVIDIA A100 SXM4 40GB", "NVIDIA A100 SXM4 80GB", "NVIDIA A100 PCIe 40GB",
    "NVIDIA A100 PCIe 80GB", "NVIDIA H100 SXM5", "NVIDIA H100 PCIe", "NVIDIA H200 SXM",
    "NVIDIA L40S",
})

# Names as PyTorch or the vendor tool spell them, normalised by _normalise(), to the
# products they can be. Names that could be more than one NVIDIA product ("NVIDIA H100",
# "... NVL") are absent, and so are AMD names that are not a product of their own
# ("... VF", a virtual function whose share of the GPU the name does not say).
_NAMES: dict[str, tuple[str, ...]] = {
    "mi100": (MI100,),
    "mi210": (MI210,),
    "mi250": (MI250,),
    "mi250x": (MI250X,),
    "mi250x mi250": (MI250X, MI250),  # amdgpu.ids names both products so
    "mi300a": (MI300A,),
    "mi300x": (MI300X,),
    "mi325x": (MI325X,),
    "radeon pro v620": (V620,),
    "radeon pro w7900": (W7900,),
    "radeon pro w7900 dual slot": (W7900_DUAL_SLOT,),
    "radeon rx 7900 xtx": (RX_7900_XTX,),
    "a100 sxm4 40gb": ("NVIDIA A100 SXM4 40GB",),
    "a100 sxm4 80gb": ("NVIDIA A100 SXM4 80GB",),
    "a100 pcie 40gb": ("NVIDIA A100 PCIe 40GB",),
    "a100 80gb pcie": ("NVIDIA A100 PCIe 80GB",),
    "h100 80gb hbm3": ("NVIDIA H100 SXM5",),
    "h100 pcie": ("NVIDIA H100 PCIe",),
    "h200": ("NVIDIA H200 SXM",),
    "l40s": ("NVIDIA L40S",),
}

# Only one product has each of these architectures, so the architecture decides alone.
_ONE_PRODUCT_ARCHES = {"gfx908": MI100}

# What ROCm calls a device it has no marketing name for.
_GENERIC = re.compile(r"^(|radeon graphics|gfx[0-9a-f]+|device [0-9a-f]{4})$")
_NOISE_WORDS = {"nvidia", "amd", "instinct", "tesla"}

# Whole when it reports this share of the full compute units or more (300 of 304);
# reported memory is a little under the nominal size (191.7 GiB on a 192 GiB MI300X).
_WHOLE_CUS = 0.97
_MEMORY_LOW, _MEMORY_HIGH = 0.90, 1.01


@dataclass(frozen=True)
class Fit:
    """A product a device can be, split into `partitions` compute partitions."""

    name: str
    partitions: int = 1
    mode: str | None = None  # "CPX"; None when whole

    @property
    def label(self) -> str:
        return f"{self.name} ({self.mode})" if self.mode else self.name


@dataclass(frozen=True)
class Product:
    """What a device was identified as: one fit, several it could be, or none."""

    label: str  # the device in generation keys; never the name of one product it may not be
    fits: tuple[Fit, ...] = ()
    basis: str | None = None  # what identified it: "device name", "gfx942, 304 CUs, 192 GiB"
    reason: str | None = None  # why it is not identified; None when it is

    @property
    def fit(self) -> Fit | None:
        """The product, when identified for sure."""
        return self.fits[0] if len(self.fits) == 1 else None


def _normalise(name: str) -> str:
    words = re.sub(r"[-_/,()]+", " ", name.lower()).split()
    return " ".join(w for w in words if w not in _NOISE_WORDS)


def _ryzen_gpu_names() -> dict[str, tuple[str, ...]]:
    """amdgpu.ids names a Ryzen processor's GPU by its graphics model ("AMD Radeon 8060S
    Graphics"): both spellings, normalised as the names in _NAMES are."""
    names = (s.name for s in SIGNATURES if s.unified_memory and is_rdna(s.arch))
    return {key: (name,) for name in names
            for key in (_normalise(name), _normalise(f"{name} Graphics"))}


_NAMES.update(_ryzen_gpu_names())


def _arch(device: DeviceInfo) -> str:
    """ "gfx90a" from "gfx90a:sramecc+:xnack-": the target without its features."""
    return (device.arch or "").split(":", 1)[0]


def _gib(device: DeviceInfo) -> float | None:
    return None if device.memory_bytes is None else device.memory_bytes / 2**30


def _properties(device: DeviceInfo, unit: str = "CUs") -> str:
    """ "gfx942, 304 CUs, 192 GiB": what the device reports of itself, its count read as
    `unit`."""
    gib = _gib(device)
    parts = [
        _arch(device),
        f"{device.compute_units} {unit}" if device.compute_units is not None else "",
        f"{gib:.0f} GiB" if gib is not None else "",
    ]
    return ", ".join(p for p in parts if p) or "no architecture, compute units or memory"


def _unit(device: DeviceInfo, fits: tuple[Fit, ...] = ()) -> str:
    """What the device's count counts: CUs on CDNA; on RDNA WGPs, HIP's default, unless
    the products it fits have that many CUs (HIP in CU mode)."""
    if not is_rdna(_arch(device)):
        return "CUs"
    as_cus = [_BY_NAME[f.name].compute_units == device.compute_units for f in fits]
    if as_cus and all(as_cus):
        return "CUs"
    return "WGPs or CUs" if any(as_cus) else "WGPs"


def _partitions(sig: Signature, compute_units: int | None) -> tuple[int, str | None] | None:
    """Into how many compute partitions the package is split, judged by the CU count."""
    full = sig.compute_units
    if compute_units is None:
        return 1, None
    if sig.wgps is not None:
        # RDNA: the whole device, counted in WGPs (WGP mode) or CUs (CU mode), exactly.
        return (1, None) if compute_units in (sig.wgps, full) else None
    if _WHOLE_CUS * full <= compute_units <= full:
        return 1, None
    for count, mode in sig.partitions:
        if compute_units * count == full:
            return count, mode
    return None


def _memory_fits(sig: Signature, partitions: int, memory_bytes: int | None) -> bool:
    if memory_bytes is None or sig.memory_gib is None:
        return True
    gib = memory_bytes / 2**30
    if sig.unified_memory:
        return gib <= sig.memory_gib * _MEMORY_HIGH
    # A partition sees the whole memory (NPS1) or its memory partition's share (NPS2,
    # NPS4), of which there are no more than compute partitions.
    sizes = [sig.memory_gib / m for m in (1, 2, 4) if m <= partitions]
    return any(_MEMORY_LOW * s <= gib <= _MEMORY_HIGH * s for s in sizes)


def _fit(sig: Signature, device: DeviceInfo) -> Fit | None:
    if _arch(device) and _arch(device) != sig.arch:
        return None
    split = _partitions(sig, device.compute_units)
    if split is None or not _memory_fits(sig, split[0], device.memory_bytes):
        return None
    return Fit(sig.name, *split)


def _named(device: DeviceInfo) -> tuple[tuple[str, ...] | None, str | None, str | None]:
    """(products the names say, which name said it, a specific device name accelbench
    does not know). A name for one product wins over a name shared by several. The vendor
    tool's name is only evidence: its spellings vary ("AMD INSTINCT MI250 (MCM) OAM AC
    MBA"), so one accelbench does not know says nothing."""
    shared: tuple[tuple[str, ...], str] | None = None
    sources = (("device name", device.name), ("vendor tool's product name", device.market_name))
    for source, text in sources:
        products = _NAMES.get(_normalise(text or ""))
        if products and len(products) == 1:
            return products, source, None
        if products:
            shared = shared or (products, source)
    if shared:
        return shared[0], shared[1], None
    unknown = None if _GENERIC.match(_normalise(device.name or "")) else device.name
    return None, None, unknown


@functools.lru_cache(maxsize=256)
def identify(device: DeviceInfo) -> Product:
    """The product `device` is, or the products it could be, or why it is none of them."""
    if device.platform not in ("rocm", "cuda"):
        return Product(device.name, reason=f"the peak table holds GPUs, not {device.platform}")
    named, source, unknown = _named(device)
    if device.platform == "cuda":
        if named and len(named) == 1 and named[0] in NVIDIA:
            return Product(device.name, (Fit(named[0]),), source)
        return Product(device.name, reason=f"{device.name!r} is not a GPU in the peak table")
    return _identify_amd(device, named, source, unknown)


def _identify_amd(device: DeviceInfo, named: tuple[str, ...] | None, source: str | None,
                  unknown: str | None) -> Product:
    properties = _properties(device, _unit(device))
    if named is None and unknown is not None:
        return Product(device.name, reason=f"{unknown!r} is not a GPU in the peak table")
    generic_label = f"{device.name or 'AMD GPU'} ({properties})"
    if named is None:
        # Identified by what the device reports alone: this takes the architecture, the
        # compute units and the memory, unless only one product has the architecture.
        arch = _arch(device)
        one = _ONE_PRODUCT_ARCHES.get(arch)
        if one is not None:
            pool: tuple[str, ...] = (one,)
        elif arch and device.compute_units is not None and device.memory_bytes is not None:
            pool = tuple(s.name for s in SIGNATURES if s.arch == arch)
        else:
            return Product(generic_label, reason=(
                f"ROCm names it {device.name!r} and it reports {properties}: identifying it "
                "takes the architecture, the compute units and the memory"))
    else:
        pool = named
    if any(name not in _BY_NAME for name in pool):
        return Product(device.name, reason=f"the {source} says {' or '.join(pool)}, "
                                           f"which is not a ROCm device")
    fits = tuple(f for name in pool if (f := _fit(_BY_NAME[name], device)) is not None)
    properties = _properties(device, _unit(device, fits))
    if len(fits) == 1:
        narrowed = named is not None and len(named) > 1
        basis = f"{source} and {properties}" if narrowed else (source or properties)
        return Product(fits[0].label, fits, basis)
    if not fits:
        said = f"the {source} says {' or '.join(named)}, but " if named else ""
        return Product(generic_label,
                       reason=f"{said}{properties} fits no product in the peak table")
    return Product(" or ".join(f.label for f in fits), fits, reason=(
        f"{properties} fits {' and '.join(f.label for f in fits)}, and neither the device "
        "name nor the vendor tool says which"))


def generation_name(device: DeviceInfo) -> str:
    """The device's part of a generation key: the product it was identified as on ROCm,
    whose names can be generic or shared; the name it reports elsewhere."""
    if device.platform == "rocm":
        return identify(device).label
    return device.name


def shares_host_memory(device: DeviceInfo) -> str | None:
    """The product, when `device` is identified as an APU whose CPU and GPU share one
    memory (the MI300A, a Ryzen processor's Radeon graphics); None otherwise."""
    found = identify(device).fit
    if found is None or found.name not in _BY_NAME:
        return None
    return found.name if _BY_NAME[found.name].unified_memory else None
