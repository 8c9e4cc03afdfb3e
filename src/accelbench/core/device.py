"""What a benchmark needs to know about the device it runs on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from accelbench.core.untrusted import is_decimal


@dataclass(frozen=True)
class DeviceInfo:
    """One device as PyTorch sees it.

    `type` is PyTorch's device type: ROCm GPUs are "cuda" devices in PyTorch, and
    `platform` says which stack is really underneath ("rocm" or "cuda").

    The product is identified from `name`, `arch`, `compute_units` and `memory_bytes`
    (core.product): ROCm's device name alone does not always say which product it is.
    Every field after `name` has a default, so a device stored before a field existed
    still loads, with that field unknown.
    """

    type: str  # "cpu", "cuda", "xpu", "mps"
    index: int | None
    platform: str  # "cpu", "cuda", "rocm", "xpu", "mps"
    name: str
    arch: str | None = None  # gcnArchName without its features ("gfx90a"), "sm_90"; None on CPU
    memory_bytes: int | None = None  # total_memory: what this device (or partition) sees
    # multi_processor_count: SMs (CUDA); CUs on CDNA; on RDNA, WGPs (two CUs each), or
    # CUs when HIP runs in CU mode (GPU_ENABLE_WGP_MODE=0)
    compute_units: int | None = None
    l2_cache_bytes: int | None = None
    # The product name the vendor tool gives (amd-smi's market_name), when every GPU of the
    # node has the same one: a second opinion where PyTorch's name says too little.
    market_name: str | None = None

    @property
    def torch_device(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    @property
    def device_class(self) -> str:
        """ "cpu" or "gpu": the axis suites are written against."""
        return "cpu" if self.type == "cpu" else "gpu"

    @property
    def sm(self) -> int | None:
        """CUDA compute capability as an integer (90 for sm_90), None elsewhere."""
        if self.platform == "cuda" and self.arch and self.arch.startswith("sm_"):
            try:
                return int(self.arch[3:])
            except ValueError:
                return None
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceInfo:
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in fields})


_TYPES = ("cpu", "cuda", "xpu", "mps")


def parse_device_spec(spec: str) -> tuple[str, int | None]:
    """Check a --device value without touching any device: "auto", "cpu", "cuda", "cuda:1".

    Returns (type, index); type "auto" picks the first accelerator, else the CPU.
    """
    from accelbench.errors import UserError

    text = spec.strip().lower()
    if text in ("auto", ""):
        return "auto", None
    if text in ("rocm", "hip"):
        raise UserError(
            f"unknown device {spec!r}: ROCm GPUs are 'cuda' devices in PyTorch (use --device cuda)"
        )
    kind, _, index = text.partition(":")
    if kind not in _TYPES:
        raise UserError(f"unknown device {spec!r} (use auto, cpu, cuda, cuda:N, xpu or mps)")
    if not index:
        return kind, None
    if not is_decimal(index):
        raise UserError(f"invalid device index in {spec!r}")
    if kind == "cpu":
        raise UserError(f"invalid device {spec!r}: the CPU has no index")
    return kind, int(index)
