"""Every inference engine, run for real on the CPU on tiny models; engines made wrong on
purpose fail their case with the parity figures; exports that fail, missing packages."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest
import torch

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.models import engines
from accelbench.benchmarks.models.engines import onnxrt, packages
from accelbench.core.measurement import CaseSkipped

BENCH = REGISTRY.get("infer-engine")
# One layer and a short sequence keep the compiled engines' compile times to seconds.
BERT = {"model": "bert-tiny", "config": "layers=1", "batch": 2, "seq": 8,
        "steps_per_window": 2}
RESNET = {"model": "resnet-tiny", "batch": 2, "image": 32, "steps_per_window": 2}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("engine", "given", "ready"), [
    ("eager", BERT, False),
    ("compile", BERT, True),
    ("compile-max-autotune", BERT, True),
    ("torchscript", RESNET, True),
    ("onnxruntime", BERT, True),
    ("int8", BERT, True),
])
def test_every_engine_runs_and_matches_eager(execute, engine, given, ready) -> None:
    m = execute(BENCH, engine=engine, **given)
    assert m.status == "ok", m.reason
    parity = m.details["parity"]
    assert parity["ok"] and parity["top1"] >= parity["tolerance"]["top1"]
    assert parity["max_rel"] <= parity["tolerance"]["max_rel"]
    assert m.details["engine"] == engine
    assert m.figure("throughput").value > 0 and m.figure("p50").value > 0
    assert (m.figure("compile_time") is not None) == ready
    if engine == "eager":
        assert parity["max_abs"] == 0.0  # the same module, the same kernels


def test_onnxruntime_records_its_export_and_the_providers_it_used(execute) -> None:
    m = execute(BENCH, engine="onnxruntime", ort_level="basic", **BERT)
    assert m.status == "ok", m.reason
    d = m.details["engine_details"]
    assert d["exporter"] == "dynamo" and "exporter_fallback_reason" not in d
    assert d["providers_used"] == ["CPUExecutionProvider"]
    # Every node on the CPU provider, counted; the options the session applied.
    assert list(d["nodes_per_provider"]) == ["CPUExecutionProvider"]
    assert d["nodes_per_provider"]["CPUExecutionProvider"] > 0
    assert "nodes_off_requested_provider" not in d
    assert d["provider_options"] == {"CPUExecutionProvider": {}}
    assert d["io"] == "I/O binding of the torch tensors on cpu:0"
    assert d["graph_optimization_level"] == "ORT_ENABLE_BASIC"
    assert d["intra_op_threads"] == torch.get_num_threads()
    assert m.details["provider"] == "auto" and m.details["ort_level"] == "basic"


@pytest.mark.parametrize("recipe", ["dynamic", "pt2e", "ort-dynamic", "ort-static"])
def test_every_cpu_int8_recipe_runs_within_the_int8_tolerance(execute, recipe) -> None:
    given = RESNET if recipe in ("pt2e", "ort-static") else BERT
    m = execute(BENCH, engine="int8", int8=recipe, **given)
    assert m.status == "ok", m.reason
    assert m.details["engine_details"]["int8"] == recipe
    assert m.details["parity"]["tolerance"] == {"max_rel": 0.15, "cosine": 0.99, "top1": 0.7}


def test_engines_that_do_not_apply_are_skipped_with_the_reason(execute) -> None:
    half = execute(BENCH, engine="int8", dtype="bf16", **BERT)
    assert half.status == "skipped" and "dtype=fp32" in half.reason
    # A setting given to an engine it does not apply to keeps its default (the case is
    # the eager one, same key); a record that carries one anyway is skipped, not run.
    assert BENCH.resolve({"engine": "eager", "int8": "pt2e"})["int8"] == ""
    stray = engines.unused_options("eager", engines.Options(int8="pt2e"))
    assert stray == "int8 applies to the int8 engine, not eager"


def test_the_diffusion_unet_runs_one_denoising_step(execute) -> None:
    m = execute(BENCH, engine="eager", model="sd-unet-tiny", batch=2)
    assert m.status == "ok", m.reason
    assert m.details["task"] == "denoising" and m.details["latent"] == 8
    assert m.details["parity"]["top1"] is None  # no classes
    assert m.figure("model_flops").value > 0


# -- engines made wrong on purpose -------------------------------------------------------

def _scaled(out: torch.Tensor) -> torch.Tensor:
    return out * 1.5


def _noisy(out: torch.Tensor) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return out + 10 * torch.randn(out.shape, generator=gen).to(out)


def _nan(out: torch.Tensor) -> torch.Tensor:
    out = out.clone()
    out.view(-1)[0] = float("nan")
    return out


class Wrong:
    """An engine whose output is changed after it ran."""

    def __init__(self, inner, perturb) -> None:
        self.inner, self.perturb, self.name = inner, perturb, inner.name

    def problem(self, job):
        return self.inner.problem(job)

    def prepare(self, job):
        prepared = self.inner.prepare(job)
        seen = prepared.output or (lambda result: result)
        return replace(prepared, output=lambda result: self.perturb(seen(result)))


@pytest.fixture
def wrong(monkeypatch):
    def make(perturb):
        real = engines.get
        monkeypatch.setattr(engines, "get", lambda name: Wrong(real(name), perturb))
    return make


@pytest.mark.parametrize(("perturb", "failing"), [
    (_scaled, "max relative error 0.5 > "),
    (_noisy, "cosine similarity"),
    (_nan, "max relative error inf > "),
])
def test_a_wrong_output_fails_the_case_with_the_parity_figures(execute, wrong, perturb,
                                                               failing) -> None:
    wrong(perturb)
    m = execute(BENCH, engine="eager", **BERT)
    assert m.status == "failed"
    assert m.reason.startswith("parity with eager fp32 failed: ")
    assert failing in m.reason
    for figure in ("max abs error", "max relative error", "cosine", "top-1 agreement"):
        assert figure in m.reason
    assert not m.timings and m.figures == ()  # never timed, never scores


@pytest.mark.parametrize(("engine", "given"), [
    ("compile", BERT), ("torchscript", RESNET), ("onnxruntime", BERT), ("int8", BERT),
])
def test_every_engine_made_wrong_fails_its_case(execute, wrong, engine, given) -> None:
    wrong(_scaled)
    m = execute(BENCH, engine=engine, **given)
    assert m.status == "failed"
    assert m.reason.startswith("parity with eager fp32 failed: max relative error 0.5")
    assert not m.timings


# -- exports that fail, packages that are missing -----------------------------------------

def test_the_exporter_falls_back_and_says_why(execute, monkeypatch) -> None:
    real = torch.onnx.export

    def export(*args, dynamo=True, **kwargs):
        if dynamo:
            raise RuntimeError("unsupported operator aten::frobnicate\nmore detail")
        return real(*args, dynamo=False, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", export)
    m = execute(BENCH, engine="onnxruntime", **RESNET)
    assert m.status == "ok", m.reason
    d = m.details["engine_details"]
    assert d["exporter"] == "torchscript"
    assert d["exporter_fallback_reason"] == ("dynamo exporter: RuntimeError: unsupported "
                                             "operator aten::frobnicate")


def test_an_export_that_fails_is_a_failed_case_with_the_exporters_reasons(execute,
                                                                          monkeypatch) -> None:
    def export(*args, dynamo=True, **kwargs):
        raise ValueError(f"cannot export ({'dynamo' if dynamo else 'legacy'})")

    monkeypatch.setattr(torch.onnx, "export", export)
    m = execute(BENCH, engine="onnxruntime", **BERT)
    assert m.status == "failed"
    assert m.reason == ("onnxruntime: the export failed: dynamo exporter: ValueError: cannot "
                        "export (dynamo); torchscript exporter: ValueError: cannot export "
                        "(legacy)")


def test_a_missing_package_skips_the_case_with_the_exact_pip_line(execute,
                                                                 monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    m = execute(BENCH, engine="onnxruntime", **BERT)
    assert m.status == "skipped"
    assert m.reason == ("the onnxruntime engine needs onnxruntime, which is not installed: "
                        "pip install 'accelbench[onnx]'")
    assert onnxrt.available_providers() is None
    assert onnxrt.provider_problem("cuda") is None  # the case will say what to install


@pytest.mark.parametrize(("module", "line"), [
    ("mlperf_loadgen", "pip install 'accelbench[serving]'"),
    ("torchao", "pip install 'accelbench[quant]'"),
    ("diffusers", "pip install 'accelbench[diffusion]'"),
])
def test_each_optional_package_names_its_extra(monkeypatch, module, line) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(CaseSkipped, match=r"needs .*, which is not installed: ") as caught:
        packages.require(module, "this")
    assert str(caught.value).endswith(line)


def test_providers_are_chosen_per_platform_and_refused_where_they_cannot_run() -> None:
    cpu_only = ["CPUExecutionProvider"]
    assert onnxrt.choose_provider("", "cpu", cpu_only) == "cpu"
    assert onnxrt.choose_provider("", "rocm", ["MIGraphXExecutionProvider",
                                               "ROCMExecutionProvider", *cpu_only]) == "migraphx"
    assert onnxrt.choose_provider("", "rocm", ["ROCMExecutionProvider", *cpu_only]) == "rocm"
    assert onnxrt.choose_provider("", "cuda", ["CUDAExecutionProvider", *cpu_only]) == "cuda"
    with pytest.raises(CaseSkipped, match="install onnxruntime-gpu"):
        onnxrt.choose_provider("", "cuda", cpu_only)
    with pytest.raises(CaseSkipped, match="runs on a GPU, not on this cpu device"):
        onnxrt.choose_provider("cuda", "cpu", ["CUDAExecutionProvider", *cpu_only])
