"""torch.compile, torch.export and ONNX round trips against eager: for real on the CPU
(the compile check compiles C++ with the host's compiler), and made wrong on purpose."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from validation_helpers import CPU, figures, run_check

from accelbench.benchmarks.validation import export, torch_compile


@pytest.mark.slow
def test_a_compiled_model_matches_eager():
    m = run_check(torch_compile.BENCHMARK, dtype="fp32")
    assert m.status == "ok", m.reason
    f = figures(m)
    assert f["error"] <= f["tolerance"] and f["compile_time"] > 0
    compared = {c["name"] for c in m.details["compared"]}
    assert {"output", "grad_input", "grad_up.weight", "grad_down.bias"} <= compared


class Miscompiled(torch.nn.Module):
    """What torch.compile returns (the model as `_orig_mod`), computing a little off."""

    def __init__(self, model):
        super().__init__()
        self._orig_mod = model

    def forward(self, x):
        return self._orig_mod(x) * (1 + 1e-3)


def test_a_compiler_that_changes_the_result_fails(monkeypatch):
    def compile(model, **kwargs):
        return Miscompiled(model)

    monkeypatch.setattr(torch, "compile", compile)
    m = run_check(torch_compile.BENCHMARK, dtype="fp32")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("wrong result: torch.compile against eager in fp32: ")
    assert "elements of output outside the tolerance" in m.reason
    assert "grad_input" in m.reason


def test_an_exported_program_matches_eager_after_save_and_load():
    m = run_check(export.EXPORT, dtype="fp32")
    assert m.status == "ok", m.reason
    assert figures(m)["error"] <= figures(m)["tolerance"]
    assert m.details["program_bytes"] > 0


def test_a_program_that_loads_wrong_fails(monkeypatch):
    real = torch.export.load

    class Wrong:
        def __init__(self, program):
            self._program = program

        def module(self):
            inner = self._program.module()
            return lambda x: inner(x) + 1e-3

    monkeypatch.setattr(torch.export, "load", lambda f: Wrong(real(f)))
    m = run_check(export.EXPORT, dtype="fp32")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("wrong result: torch.export round trip against eager: ")


def test_without_onnx_the_check_is_skipped_with_the_pip_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("onnx") else real(name, *a))
    m = run_check(export.ONNX)
    assert m.status == "skipped"
    assert m.reason == ("onnx, onnxscript, onnxruntime not installed: "
                        "pip install onnx onnxscript onnxruntime")
    assert m.details["install"] == "pip install onnx onnxscript onnxruntime"


def test_the_pip_line_names_the_runtime_of_the_device():
    from accelbench.core.device import DeviceInfo

    rocm = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942")
    h100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100", "sm_90")
    assert export.onnx_install_line(rocm).endswith("onnxruntime-rocm")
    assert export.onnx_install_line(h100).endswith("onnxruntime-gpu")
    assert export.onnx_install_line(CPU).endswith(" onnxruntime")


@pytest.mark.skipif(not all(importlib.util.find_spec(n) for n in export.ONNX_MODULES),
                    reason="onnx, onnxscript and onnxruntime are not installed here")
@pytest.mark.slow
def test_an_onnx_round_trip_matches_eager():
    m = run_check(export.ONNX)
    assert m.status == "ok", m.reason
    assert m.details["provider"] == "CPUExecutionProvider"
    assert figures(m)["error"] <= figures(m)["tolerance"]
