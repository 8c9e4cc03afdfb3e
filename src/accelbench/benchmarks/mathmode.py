"""Float32 math modes: TF32 or full fp32 for matmuls, convolutions and RNNs, set for one
case, read back, and restored after it. GEMM, conv and the model benchmarks all go
through `math_mode`, so a result says what actually ran, not what was asked for.

PyTorch has two APIs for them, and mixing them breaks the old one:

- From PyTorch 2.9, a precision per operation: `torch.backends.cuda.matmul.fp32_precision`
  and `torch.backends.cudnn.conv.fp32_precision` / `.rnn.fp32_precision`, "tf32" or
  "ieee" ("none" inherits from the parent setting). The GEMM and cuDNN paths read these.
- The legacy flags, `torch.backends.cuda.matmul.allow_tf32` and
  `torch.backends.cudnn.allow_tf32` (one flag for conv and RNN). Reading one checks it
  against the new state and raises ("mix of the legacy and new APIs") once the two
  disagree: matmul.fp32_precision = "tf32" alone leaves the legacy matmul precision at
  "highest", cudnn.conv.fp32_precision = "ieee" alone leaves conv and RNN apart. Not only
  Python reads them: ATen's `allowTF32CuBLAS()` makes the same check, and cuBLAS handle
  set-up, cuBLASLt GEMMs and torch.compile call it.

So a case sets each switch through its legacy setter, which sets the legacy state and
the per-op precisions together, then sets the per-op precision explicitly, and reads the
mode back through the per-op precision (which never raises); on older PyTorch the legacy
flags alone. The state is consistent for the whole case, and what it found, mixed or
not, is put back after it.

On ROCm, PyTorch 2.9 gates TF32 in hipBLASLt on the environment: `allowTF32CuBLAS()`
returns false, and setting `allow_tf32` does nothing, unless HIPBLASLT_ALLOW_TF32=1 (read
from the environment at each call). tf32 cases on ROCm therefore start their worker with
it (`tf32_worker_env`; a value the user set is kept), and TF32 counts as in effect for
matmuls on ROCm only when the worker has it exactly so. (The later sources, whose
precisions are enums, have no such gate: there the variable is harmless.) A tf32 case
whose TF32 is not in effect is skipped (see `MathMode.problem`), so it is never set
against the TF32 peak.

The environment can override the flags, so the worker's TF32 switches are recorded with
the mode (`tf32_env`) and, where they decide, read into it:

- NVIDIA_TF32_OVERRIDE=0 makes cuBLAS and cuDNN never use TF32, whatever PyTorch asks
  (NVIDIA's libraries read it themselves; only the value 0 is documented to act): TF32
  is then not in effect on CUDA, and a tf32 case is skipped.
- TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 makes TF32 PyTorch's starting matmul precision:
  in the PyTorch versions accelbench supports, ATen's Context initialises
  `float32_matmul_precision` from it and a precision set later wins (older releases
  OR-ed it into every `allowTF32CuBLAS()`). A case that goes through `math_mode` sets
  its own precision over it; code that does not silently runs fp32 matmuls as TF32.
- On ROCm, HIPBLASLT_ALLOW_TF32 (above) and TORCH_BLAS_PREFER_HIPBLASLT, which picks
  hipBLASLt or hipBLAS/rocBLAS for GEMMs (only hipBLASLt has a TF32 path), are recorded.

How TF32 runs on ROCm depends on the architecture (the device's gcnArchName, read here):
gfx942 (MI300 series) has xf32 matrix instructions; gfx950 (MI350X, MI355X) has none,
and hipBLASLt runs a TF32 GEMM there as several bf16 passes (hipBLASLt's "TF32 emulation
for gfx950"). PyTorch asks hipBLASLt for TF32 on both alike (its ROCm TF32 gate has no
architecture list), so a tf32 case runs on both, and the record says which of the two
(`tf32_implementation`) rather than implying xf32 hardware on gfx950.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from accelbench.core.device import DeviceInfo
from accelbench.core.worker_env import NONE, WorkerEnv

HIPBLASLT_ALLOW_TF32 = "HIPBLASLT_ALLOW_TF32"
NVIDIA_TF32_OVERRIDE = "NVIDIA_TF32_OVERRIDE"
TORCH_ALLOW_TF32_CUBLAS_OVERRIDE = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
TORCH_BLAS_PREFER_HIPBLASLT = "TORCH_BLAS_PREFER_HIPBLASLT"
# Environment switches that decide or change TF32 use, recorded with every mode.
TF32_ENV = (HIPBLASLT_ALLOW_TF32, NVIDIA_TF32_OVERRIDE, TORCH_ALLOW_TF32_CUBLAS_OVERRIDE,
            TORCH_BLAS_PREFER_HIPBLASLT)
OPS = ("matmul", "conv", "rnn")
NEW_API = "fp32_precision"
LEGACY_API = "allow_tf32 (legacy)"


@dataclass(frozen=True)
class MathMode:
    """The float32 math a case runs with, read back after it was set."""

    tf32: bool  # what the case asked for
    precisions: Mapping[str, str]  # per op, as PyTorch reads it back: "tf32", "ieee", ...
    api: str  # NEW_API or LEGACY_API
    platform: str  # the device's: "cuda", "rocm", "cpu", ...
    hipblaslt_allow_tf32: str | None = None  # the worker's value, on ROCm
    tf32_env: Mapping[str, str] = field(default_factory=dict)  # TF32_ENV found set
    arch: str | None = None  # the ROCm device's gcnArchName without features

    def in_effect(self, op: str = "matmul") -> bool:
        """Whether `op` runs float32 math as TF32."""
        tf32 = self.precisions[op] == "tf32"
        if self.platform == "cuda" and self._nvidia_off():
            return False
        if op == "matmul" and self.platform == "rocm":
            return tf32 and self.hipblaslt_allow_tf32 == "1"
        return tf32

    def _nvidia_off(self) -> bool:
        return self.tf32_env.get(NVIDIA_TF32_OVERRIDE) == "0"

    def problem(self, op: str = "matmul") -> str | None:
        """Why the case cannot be measured as asked for (TF32 asked for and not in effect,
        or the reverse), or None."""
        if self.in_effect(op) == self.tf32:
            return None
        setting = _setting_name(op, self.api)
        read = self.precisions[op]
        if not self.tf32:
            return f"TF32 could not be switched off: {setting} reads back {read!r}"
        if self.platform == "cuda" and self._nvidia_off():
            return (f"TF32 is not in effect: {NVIDIA_TF32_OVERRIDE}=0 is set in the worker "
                    "(cuBLAS and cuDNN then never use TF32, whatever PyTorch asks)")
        if op == "matmul" and self.platform == "rocm" and self.hipblaslt_allow_tf32 != "1":
            value = self.hipblaslt_allow_tf32
            how = "is not set" if value is None else f"is {value!r}, not 1,"
            return (f"TF32 is not in effect: {HIPBLASLT_ALLOW_TF32} {how} in the worker "
                    "(ROCm builds of PyTorch enable TF32 in hipBLASLt only then)")
        return f"TF32 is not in effect: {setting} reads back {read!r} after it was set"

    def details(self, ops: Sequence[str]) -> dict[str, Any]:
        """What to store with the result: TF32 in effect for the first op, each op's
        precision as read back, and on ROCm the hipBLASLt switch when matmuls count."""
        out: dict[str, Any] = {"tf32_in_effect": self.in_effect(ops[0])}
        out.update({f"{op}_fp32_precision": self.precisions[op] for op in ops})
        out["fp32_precision_api"] = self.api
        if self.platform == "rocm" and "matmul" in ops:
            out["hipblaslt_allow_tf32"] = self.hipblaslt_allow_tf32
            how = rocm_tf32_implementation(self.arch)
            if self.tf32 and how:
                out["tf32_implementation"] = how
        if self.tf32_env:
            out["tf32_env"] = dict(self.tf32_env)
        return out


def rocm_tf32_implementation(arch: str | None) -> str | None:
    """How hipBLASLt runs a TF32 GEMM on `arch`, where accelbench knows it."""
    if arch is None:
        return None
    if arch == "gfx950":
        return ("emulated: gfx950 has no xf32 matrix instructions; hipBLASLt runs a TF32 "
                "GEMM as several bf16 passes")
    if arch.startswith("gfx94"):
        return f"xf32 matrix instructions ({arch})"
    return None


@contextmanager
def math_mode(
    torch: ModuleType, tf32: bool, ops: Sequence[str], platform: str,
    environ: Mapping[str, str] | None = None,
) -> Iterator[MathMode]:
    """TF32 on (`tf32`) or off for `ops`, read back, and restored afterwards, also after
    an error: a worker runs many cases, and nothing set here may outlive this one."""
    unknown = set(ops) - set(OPS)
    if unknown:
        raise ValueError(f"unknown math-mode operations {sorted(unknown)}")
    environ = os.environ if environ is None else environ
    settings = [_Setting(torch, op) for op in ops]
    previous = [s.get() for s in settings]
    try:
        # The legacy flags first (cuDNN's sets conv and RNN at once), then each op.
        for setting in settings:
            setting.set_legacy(tf32)
        for setting in settings:
            setting.set_precision(tf32)
        yield MathMode(
            tf32=tf32,
            precisions={s.op: s.read() for s in settings},
            api=NEW_API if all(s.new for s in settings) else LEGACY_API,
            platform=platform,
            hipblaslt_allow_tf32=environ.get(HIPBLASLT_ALLOW_TF32) if platform == "rocm"
            else None,
            tf32_env={name: environ[name] for name in sorted(TF32_ENV) if name in environ},
            arch=gcn_arch(torch) if platform == "rocm" else None,
        )
    finally:
        # The legacy flags first (each also sets its per-op precisions), then the per-op
        # precisions as they were: together, the state the case found.
        pairs = list(zip(settings, previous, strict=True))
        for setting, saved in reversed(pairs):
            setting.restore_legacy(saved)
        for setting, saved in reversed(pairs):
            setting.restore_precision(saved)


def gcn_arch(torch: ModuleType) -> str | None:
    """The current ROCm device's gcnArchName without its features ("gfx950"), or None
    where this torch is no ROCm build or has no device."""
    if not getattr(getattr(torch, "version", None), "hip", None):
        return None
    try:
        cuda = torch.cuda
        if not cuda.is_available():
            return None
        name = getattr(cuda.get_device_properties(cuda.current_device()), "gcnArchName", "")
    except (AttributeError, RuntimeError):
        return None
    return str(name).split(":", 1)[0] or None


def read_precision(torch: ModuleType, op: str) -> str:
    """`op`'s float32 precision as PyTorch reads it back, without ever touching a legacy
    flag where the new API exists (that read can raise)."""
    return _Setting(torch, op).read()


def tf32_worker_env(params: Mapping[str, Any], device: DeviceInfo) -> WorkerEnv:
    """A tf32 case on ROCm starts its worker with HIPBLASLT_ALLOW_TF32=1 (PyTorch reads it
    when deciding each GEMM); the user's own value, if set, is kept."""
    if params.get("dtype") == "tf32" and device.platform == "rocm":
        return WorkerEnv.of(values={HIPBLASLT_ALLOW_TF32: "1"})
    return NONE


class _Setting:
    """One op's switch: the per-op precision where PyTorch has it, else the legacy flag.

    Where both exist, the switch is set through the legacy setter, which sets the legacy
    state and the per-op precision together (`setAllowTF32CuBLAS`, `setAllowTF32CuDNN`
    in ATen's Context.cpp), and read back through the per-op precision. Setting the
    per-op precision alone would leave the two disagreeing (`matmul.fp32_precision =
    "tf32"` keeps the legacy matmul precision at "highest"; `cudnn.conv` apart from
    `cudnn.rnn`), and then every `allowTF32CuBLAS()` raises: cuBLAS handle set-up and
    cuBLASLt GEMMs call it, and so do torch.compile and torch.export."""

    def __init__(self, torch: ModuleType, op: str) -> None:
        self.op = op
        backends = torch.backends
        self.legacy = backends.cuda.matmul if op == "matmul" else backends.cudnn
        holder = backends.cuda.matmul if op == "matmul" else getattr(backends.cudnn, op, None)
        # Builds before the per-op precisions raise AttributeError for the name.
        self.holder = holder if holder is not None and hasattr(holder, "fp32_precision") \
            else None

    @property
    def new(self) -> bool:
        return self.holder is not None

    def get(self) -> tuple[bool | None, object]:
        """(the legacy flag, the per-op precision), as they are now; the legacy flag is
        None where reading it raises (something mixed the APIs before)."""
        try:
            legacy: bool | None = bool(self.legacy.allow_tf32)
        except RuntimeError:
            legacy = None
        return legacy, (self.holder.fp32_precision if self.holder is not None else None)

    def set_legacy(self, tf32: bool) -> None:
        self.legacy.allow_tf32 = tf32

    def set_precision(self, tf32: bool) -> None:
        """Explicit, where the legacy setter leaves "none" (inherited)."""
        if self.holder is not None:
            self.holder.fp32_precision = "tf32" if tf32 else "ieee"

    def restore_legacy(self, saved: tuple[bool | None, object]) -> None:
        if saved[0] is not None:
            self.legacy.allow_tf32 = saved[0]

    def restore_precision(self, saved: tuple[bool | None, object]) -> None:
        if self.holder is not None:
            self.holder.fp32_precision = saved[1]

    def read(self) -> str:
        """The precision in effect: the new API's value, or the legacy flag's equivalent."""
        if self.holder is not None:
            return str(self.holder.fp32_precision)
        return "tf32" if self.legacy.allow_tf32 else "ieee"


def _setting_name(op: str, api: str) -> str:
    if op == "matmul":
        return "torch.backends.cuda.matmul." + ("fp32_precision" if api == NEW_API
                                                else "allow_tf32")
    return f"torch.backends.cudnn.{op}.fp32_precision" if api == NEW_API \
        else "torch.backends.cudnn.allow_tf32"
