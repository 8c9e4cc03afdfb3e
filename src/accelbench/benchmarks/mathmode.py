"""Float32 math modes: TF32 or full fp32 for matmuls, convolutions and RNNs, set for one
case, read back, and restored after it. GEMM, conv and the model benchmarks all go
through `math_mode`, so a result says what actually ran, not what was asked for.

PyTorch has two APIs for them, and mixing them breaks the old one:

- From PyTorch 2.9, a precision per operation: `torch.backends.cuda.matmul.fp32_precision`
  and `torch.backends.cudnn.conv.fp32_precision` / `.rnn.fp32_precision`, "tf32" or
  "ieee" ("none" inherits from the parent setting). The GEMM and cuDNN paths read these.
- The legacy flags, `torch.backends.cuda.matmul.allow_tf32` and
  `torch.backends.cudnn.allow_tf32` (one flag for conv and RNN). Reading one checks it
  against the new state and raises ("mix of the legacy and new APIs") once anything in
  the process has set a precision the flag cannot express: matmul.fp32_precision = "tf32"
  leaves the legacy matmul precision at "highest", cudnn.conv.fp32_precision = "ieee"
  leaves conv and RNN apart. So where the new API exists it is the only one used here;
  the legacy flags only on older PyTorch.

On ROCm, PyTorch 2.9 gates TF32 in hipBLASLt on the environment: `allowTF32CuBLAS()`
returns false, and setting `allow_tf32` does nothing, unless HIPBLASLT_ALLOW_TF32=1 (read
from the environment at each call). tf32 cases on ROCm therefore start their worker with
it (`tf32_worker_env`; a value the user set is kept), and TF32 counts as in effect for
matmuls on ROCm only when the worker has it exactly so. (The later sources, whose
precisions are enums, have no such gate: there the variable is harmless.) A tf32 case
whose TF32 is not in effect is skipped (see `MathMode.problem`), so it is never set
against the TF32 peak.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from accelbench.core.worker_env import NONE, WorkerEnv
from accelbench.env.device import DeviceInfo

HIPBLASLT_ALLOW_TF32 = "HIPBLASLT_ALLOW_TF32"
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

    def in_effect(self, op: str = "matmul") -> bool:
        """Whether `op` runs float32 math as TF32."""
        tf32 = self.precisions[op] == "tf32"
        if op == "matmul" and self.platform == "rocm":
            return tf32 and self.hipblaslt_allow_tf32 == "1"
        return tf32

    def problem(self, op: str = "matmul") -> str | None:
        """Why the case cannot be measured as asked for (TF32 asked for and not in effect,
        or the reverse), or None."""
        if self.in_effect(op) == self.tf32:
            return None
        setting = _setting_name(op, self.api)
        read = self.precisions[op]
        if not self.tf32:
            return f"TF32 could not be switched off: {setting} reads back {read!r}"
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
        return out


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
        for setting in settings:
            setting.set(tf32)
        yield MathMode(
            tf32=tf32,
            precisions={s.op: s.read() for s in settings},
            api=NEW_API if all(s.new for s in settings) else LEGACY_API,
            platform=platform,
            hipblaslt_allow_tf32=environ.get(HIPBLASLT_ALLOW_TF32) if platform == "rocm"
            else None,
        )
    finally:
        for setting, value in reversed(list(zip(settings, previous, strict=True))):
            setting.restore(value)


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
    """One op's switch: the per-op precision where PyTorch has it, else the legacy flag."""

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

    def get(self) -> object:
        if self.holder is not None:
            return self.holder.fp32_precision
        return bool(self.legacy.allow_tf32)

    def set(self, tf32: bool) -> None:
        if self.holder is not None:
            self.holder.fp32_precision = "tf32" if tf32 else "ieee"
        else:
            self.legacy.allow_tf32 = tf32

    def restore(self, value: object) -> None:
        if self.holder is not None:
            self.holder.fp32_precision = value
        else:
            self.legacy.allow_tf32 = value

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
