"""int8: the model quantised to 8-bit integers, by one of several recipes (`int8=`).

- `dynamic` (the CPU's default): PyTorch's dynamic quantisation of the linear layers
  (int8 weights, activations quantised on the fly; fbgemm/x86 kernels, CPU only).
- `pt2e`: PyTorch 2 export quantisation with the x86 inductor quantizer (static, per
  channel weights, calibrated on the case's batch), lowered by torch.compile; CPU only.
  From torchao where it moved there (PyTorch 2.10 on), else from torch.ao.
- `ort-dynamic`, `ort-static`: ONNX Runtime's quantisation of the exported model
  (static: QDQ format, calibrated on the case's batch), run by an ONNX Runtime session.
- `torchao` (the GPUs' default): torchao's int8 dynamic-activation, int8-weight recipe,
  lowered by torch.compile.

Every recipe starts from the fp32 model, so the case's dtype must be fp32; where a recipe
cannot run on this device the case is skipped with the reason.
"""

from __future__ import annotations

import copy
import importlib
import time
import warnings
from typing import Any

from accelbench.benchmarks.models.engines import INT8, Job, Prepared, onnxrt
from accelbench.benchmarks.models.engines.packages import install_line, require
from accelbench.benchmarks.models.engines.torchscript import _first_line
from accelbench.core.measurement import CaseFailed, CaseSkipped

CPU_ONLY = ("dynamic", "pt2e")


def method(job: Job) -> str:
    """The recipe this job uses: the one asked for, else the device's usual one."""
    if job.options.int8:
        return job.options.int8
    if job.device.type == "cpu":
        return "dynamic"
    if _torchao() is None:
        raise CaseSkipped("int8 on this GPU needs torchao, which is not installed (or does "
                          f"not fit this PyTorch): {install_line('torchao')}")
    return "torchao"


def _torchao() -> Any:
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        return None
    return quantize_, Int8DynamicActivationInt8WeightConfig


class Int8:
    name = INT8

    def problem(self, job: Job) -> str | None:
        if job.precision.dtype != "fp32":
            return "int8 recipes quantise the fp32 model: run the int8 engine with dtype=fp32"
        return None

    def prepare(self, job: Job) -> Prepared:
        recipe = method(job)
        if recipe in CPU_ONLY and job.device.type != "cpu":
            raise CaseSkipped(f"int8={recipe} runs on CPUs only")
        started = time.perf_counter()
        prepared = _RECIPES[recipe](job)
        prepared.details.update({"int8": recipe, "quantise_s": time.perf_counter() - started})
        return prepared


def _dynamic(job: Job) -> Prepared:
    torch = job.torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated
        quantized = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(job.module), {torch.nn.Linear}, dtype=torch.qint8)
    layers = sum(1 for m in quantized.modules() if "quantized" in type(m).__module__)
    if not layers:
        raise CaseFailed("int8=dynamic: the model has no torch.nn.Linear layer to quantise")
    return Prepared(lambda inputs: quantized(*inputs),
                    {"recipe": "torch.ao.quantization.quantize_dynamic, torch.nn.Linear to "
                               "qint8 (per-tensor weights, dynamic activations)",
                     "quantized_layers": layers})


def _pt2e_api() -> tuple[Any, Any, Any, str]:
    try:
        from torchao.quantization.pt2e import quantizer as _  # noqa: F401
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86
        return prepare_pt2e, convert_pt2e, x86, "torchao.quantization.pt2e"
    except ImportError:
        pass
    try:  # before PyTorch 2.10 (imported by name: later releases no longer have it)
        pt2e = importlib.import_module("torch.ao.quantization.quantize_pt2e")
        x86 = importlib.import_module(
            "torch.ao.quantization.quantizer.x86_inductor_quantizer")
        return pt2e.prepare_pt2e, pt2e.convert_pt2e, x86, "torch.ao.quantization"
    except ImportError:
        raise CaseSkipped("int8=pt2e needs PT2E quantisation, which moved from PyTorch to "
                          f"torchao: {install_line('torchao')}") from None


def _pt2e(job: Job) -> Prepared:
    torch = job.torch
    prepare_pt2e, convert_pt2e, x86, source = _pt2e_api()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            # strict: a module called at several places (ResNet blocks reuse their ReLU)
            # gets a partition per call, which the quantizer's fusion patterns need.
            exported = torch.export.export(copy.deepcopy(job.module), job.example,
                                           strict=True).module()
            quantizer = x86.X86InductorQuantizer()
            quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
            observed = prepare_pt2e(exported, quantizer)
            observed(*job.example)  # calibration on the case's batch
            converted = convert_pt2e(observed)
    except CaseSkipped:
        raise
    except Exception as exc:
        raise CaseFailed(f"int8=pt2e: quantisation failed: {type(exc).__name__}: "
                         f"{_first_line(exc)}") from None
    compiled = torch.compile(converted)
    return Prepared(lambda inputs: compiled(*inputs),
                    {"recipe": f"PT2E ({source}): torch.export, X86InductorQuantizer "
                               "(static, per-channel weights), calibrated on the batch, "
                               "torch.compile"},
                    lazy=True, cleanup=torch._dynamo.reset)


def _ort(job: Job, static: bool) -> Prepared:
    ort = require("onnxruntime", "int8 with ONNX Runtime")
    require("onnx", "int8 with ONNX Runtime")
    from onnxruntime import quantization as q

    provider = onnxrt.choose_provider(job.options.provider, onnxrt._platform(job),
                                      list(ort.get_available_providers()))
    fp32 = onnxrt.export(job, job.module, job.example, job.workdir / "model.onnx")
    path = job.workdir / "model.int8.onnx"
    try:
        with onnxrt.quiet():
            if static:
                q.quantize_static(str(fp32.path), str(path), _Calibration(job),
                                  quant_format=q.QuantFormat.QDQ,
                                  activation_type=q.QuantType.QInt8,
                                  weight_type=q.QuantType.QInt8)
            else:
                q.quantize_dynamic(str(fp32.path), str(path), weight_type=q.QuantType.QInt8)
    except Exception as exc:
        raise CaseFailed(f"int8={'ort-static' if static else 'ort-dynamic'}: quantisation "
                         f"failed: {type(exc).__name__}: {_first_line(exc)}") from None
    sess = onnxrt.session(job, path, provider)
    run, output = onnxrt.runner(job, sess, None)
    recipe = ("onnxruntime.quantization.quantize_static (QDQ, int8 activations and weights, "
              "calibrated on the batch)" if static else
              "onnxruntime.quantization.quantize_dynamic (int8 weights)")
    return Prepared(run, {"recipe": recipe, "exporter": fp32.exporter,
                          "providers_used": list(sess.get_providers()),
                          "graph_optimization_level":
                              onnxrt.LEVELS[job.options.ort_level or "all"]},
                    output=output)


class _Calibration:
    """ONNX Runtime's calibration reader: the case's batch, once."""

    def __init__(self, job: Job) -> None:
        self._batches = iter([{n: t.cpu().numpy() for n, t in
                               zip(job.input_names, job.example, strict=True)}])

    def get_next(self) -> dict[str, Any] | None:
        return next(self._batches, None)


def _torchao_recipe(job: Job) -> Prepared:
    api = _torchao()
    if api is None:
        raise CaseSkipped(f"int8=torchao needs torchao: {install_line('torchao')}")
    quantize_, config = api
    torch = job.torch
    model = copy.deepcopy(job.module)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_(model, config())
    except Exception as exc:
        raise CaseFailed(f"int8=torchao: quantisation failed: {type(exc).__name__}: "
                         f"{_first_line(exc)}") from None
    compiled = torch.compile(model)
    return Prepared(lambda inputs: compiled(*inputs),
                    {"recipe": "torchao quantize_ Int8DynamicActivationInt8WeightConfig, "
                               "torch.compile"},
                    lazy=True, cleanup=torch._dynamo.reset)


_RECIPES = {
    "dynamic": _dynamic,
    "pt2e": _pt2e,
    "ort-dynamic": lambda job: _ort(job, static=False),
    "ort-static": lambda job: _ort(job, static=True),
    "torchao": _torchao_recipe,
}

ENGINE = Int8()
