"""Export round trips of the tiny model (`tiny`): the reloaded program gives what eager
mode gives.

- export: torch.export.export, saved with torch.export.save and read back with
  torch.export.load, run on the device. The program is the model's ATen graph, run
  eagerly: it is held to torch.testing's tolerance for the precision.
- onnx: torch.onnx.export (the dynamo exporter, which needs onnx and onnxscript), run by
  onnxruntime on the provider for this device where it has one (CUDA, ROCm or MIGraphX),
  else on its CPU provider, as torch.onnx's own test helper compares them: torch.testing's
  fp32 tolerance. Skipped, with the pip line, where onnx, onnxscript or onnxruntime is
  not installed.
"""

from __future__ import annotations

import importlib.util
import io
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.validation.modes import math_mode, require_precision, storage
from accelbench.benchmarks.validation.verdict import (
    TOLERANCE_SCALE,
    compare,
    conclude,
    tensors_verdict,
    tolerance_for,
)
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

EXPORT_DTYPES = ("fp32", "fp16", "bf16")
ONNX_MODULES = ("onnx", "onnxscript", "onnxruntime")
# onnxruntime's execution provider for each platform, best first.
PROVIDERS = {
    "cuda": ("CUDAExecutionProvider",),
    "rocm": ("MIGraphXExecutionProvider", "ROCMExecutionProvider"),
}


@dataclass(frozen=True)
class ExportParams:
    """The parameters of an export case (`EXPORT.params`)."""

    dtype: str
    tolerance_scale: float


@dataclass(frozen=True)
class OnnxParams:
    """The parameters of an onnx case (`ONNX.params`)."""

    tolerance_scale: float


def measure_export(ctx: CaseContext, params: ExportParams) -> CaseResult:
    dtype = params.dtype
    require_precision(ctx.device, dtype)
    import torch

    from accelbench.benchmarks.validation.tiny import tiny_input, tiny_model

    device = torch.device(ctx.device.torch_device)
    kind = storage(torch, ctx.device, dtype)
    with math_mode(torch, dtype) as mode, torch.no_grad():
        model = tiny_model().to(device=device, dtype=kind).eval()
        x = tiny_input(device, kind)
        want = model(x)
        program = torch.export.export(model, (x,))
        saved = io.BytesIO()
        torch.export.save(program, saved)
        saved.seek(0)
        loaded = torch.export.load(saved)
        got = loaded.module()(x)
    tolerance = tolerance_for(dtype, params.tolerance_scale)
    verdict = tensors_verdict([compare(torch, "output", got, want, tolerance)], tolerance,
                              "torch.export round trip against eager")
    return conclude(verdict, {"round_trip": "torch.export.export, save, load, module()",
                              "program_bytes": len(saved.getvalue()), "math_mode": mode})


def onnx_install_line(device: DeviceInfo) -> str:
    runtime = {"cuda": "onnxruntime-gpu", "rocm": "onnxruntime-rocm"}.get(device.platform,
                                                                          "onnxruntime")
    return f"pip install onnx onnxscript {runtime}"


def measure_onnx(ctx: CaseContext, params: OnnxParams) -> CaseResult:
    missing = [name for name in ONNX_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        line = onnx_install_line(ctx.device)
        raise CaseSkipped(f"{', '.join(missing)} not installed: {line}",
                          details={"install": line})
    import onnxruntime
    import torch

    from accelbench.benchmarks.validation.tiny import tiny_input, tiny_model

    available = list(onnxruntime.get_available_providers())
    wanted = [p for p in PROVIDERS.get(ctx.device.platform, ()) if p in available]
    providers = [*wanted, "CPUExecutionProvider"]
    cpu = torch.device("cpu")
    with math_mode(torch, "fp32"), torch.no_grad():
        model = tiny_model().eval()
        x = tiny_input(cpu, torch.float32)
        want = model(x)
        program = torch.onnx.export(model, (x,), dynamo=True, verbose=False)
        assert program is not None  # the dynamo exporter returns its program
        proto = program.model_proto.SerializeToString()
        session = onnxruntime.InferenceSession(proto, providers=providers)
        name = session.get_inputs()[0].name
        got = torch.from_numpy(session.run(None, {name: x.numpy()})[0])
    used = session.get_providers()[0] if session.get_providers() else "unknown"
    tolerance = tolerance_for("fp32", params.tolerance_scale)
    verdict = tensors_verdict([compare(torch, "output", got, want, tolerance)], tolerance,
                              f"ONNX round trip on {used} against eager")
    details: dict[str, Any] = {"exporter": "torch.onnx.export(dynamo=True)",
                               "provider": used, "providers_available": available,
                               "onnxruntime": str(onnxruntime.__version__),
                               "model_bytes": len(proto)}
    if ctx.device.type != "cpu" and not wanted:
        details["note"] = (f"onnxruntime has no {ctx.device.platform} provider here: the "
                           "model ran on its CPU provider")
    return conclude(verdict, details)


EXPORT = Benchmark(
    name="export",
    family="validation",
    summary="torch.export round trip (export, save, load) of a tiny model matches eager",
    entry="accelbench.benchmarks.validation.export:measure_export",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes",
             "accelbench.benchmarks.validation.tiny"),
    params=(
        Param("dtype", "str", "fp32", help="precision of the model and its inputs",
              choices=EXPORT_DTYPES),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=ExportParams,
)

ONNX = Benchmark(
    name="onnx",
    family="validation",
    summary="ONNX round trip (torch.onnx.export, onnxruntime) of a tiny model matches "
    "eager; skipped without onnx, onnxscript and onnxruntime",
    entry="accelbench.benchmarks.validation.export:measure_onnx",
    sources=EXPORT.sources,
    params=(TOLERANCE_SCALE,),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=OnnxParams,
)
