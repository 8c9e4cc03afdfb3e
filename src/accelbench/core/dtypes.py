"""Precisions accelbench measures, declared once, and which devices support them."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.core.device import DeviceInfo


@dataclass(frozen=True)
class DType:
    name: str  # accelbench's name, used in parameters and results
    torch_name: str  # attribute of the torch module holding the storage dtype
    bytes: int
    peak_key: str  # key into the published peak table


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp64", "float64", 8, "fp64"),
        DType("fp32", "float32", 4, "fp32"),
        DType("tf32", "float32", 4, "tf32"),  # fp32 storage, TF32 matrix math
        DType("fp16", "float16", 2, "fp16"),
        DType("bf16", "bfloat16", 2, "bf16"),
        DType("fp8", "float8_e4m3fn", 1, "fp8"),  # e4m3; gfx942 uses the fnuz variant
        DType("int8", "int8", 1, "int8"),
    )
}


def gfx_version(arch: str | None) -> tuple[int, int, int] | None:
    """(9, 4, 2) from "gfx942", (9, 0, 10) from "gfx90a", (11, 0, 0) from "gfx1100".

    A gfx name is the major version followed by one minor digit and one hex stepping.
    """
    if not arch or not arch.startswith("gfx"):
        return None
    name = arch[3:].split(":", 1)[0]
    if len(name) < 3:
        return None
    try:
        return int(name[:-2]), int(name[-2]), int(name[-1], 16)
    except ValueError:
        return None


def unsupported_reason(device: DeviceInfo, dtype: str) -> str | None:
    """Why `dtype` matrix math cannot run on `device`, or None when it can."""
    where = f"{device.name} ({device.arch or device.platform})"
    if device.platform == "cpu":
        if dtype == "tf32":
            return "tf32 is a GPU matrix-core mode; not available on cpu"
        if dtype == "fp8":
            return "fp8 matrix multiply needs a GPU with fp8 support; not available on cpu"
        return None
    if device.platform == "cuda":
        sm = device.sm or 0
        if dtype in ("tf32", "bf16") and sm < 80:
            return f"{dtype} needs compute capability 8.0 or newer; {where}"
        if dtype == "fp8" and sm < 89:
            return f"fp8 needs compute capability 8.9 or newer; {where}"
        if dtype == "int8" and sm < 75:
            return f"int8 tensor-core GEMM needs compute capability 7.5 or newer; {where}"
        return None
    if device.platform == "rocm":
        major, minor, _ = gfx_version(device.arch) or (0, 0, 0)
        cdna3_or_later = major == 9 and minor >= 4
        if dtype == "tf32" and not cdna3_or_later:
            return f"tf32 needs an MI300-class GPU (gfx94x/gfx95x); {where}"
        if dtype == "fp8" and not (cdna3_or_later or major >= 12):
            return f"fp8 needs gfx942, gfx950 or gfx12; {where}"
        return None
    if dtype in ("tf32", "fp8", "int8"):
        return f"{dtype} is not measured on {device.platform} devices"
    return None


def fp8_torch_name(device: DeviceInfo) -> str:
    """gfx942 (MI300) implements the 'fnuz' fp8 variant; others use OCP e4m3."""
    version = gfx_version(device.arch)
    if device.platform == "rocm" and version is not None and version[:2] == (9, 4):
        return "float8_e4m3fnuz"
    return "float8_e4m3fn"
