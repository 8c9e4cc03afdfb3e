"""Numerics per precision, for real on the CPU, and against a stack made wrong on purpose:
an op monkeypatched to return a perturbed result fails its check with the reason."""

from __future__ import annotations

import pytest
import torch
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import numerics
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseSkipped
from accelbench.core.timing import PerfCounterClock, TimingPolicy

BENCH = numerics.BENCHMARK
CPU_OPS = [op for op in numerics.OPS if op not in ("sdpa-efficient", "sdpa-cudnn")]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", CPU_OPS)
def test_every_op_passes_on_the_cpu_within_its_tolerance(op, dtype):
    m = run_check(BENCH, op=op, dtype=dtype)
    assert m.status == "ok", m.reason
    f = figures(m)
    assert 0 <= f["error"] <= f["tolerance"]
    assert 0 < f["margin"] <= 100
    assert m.timings == () and m.details["verdict"] == "pass"
    assert m.details["math_mode"]["tf32_in_effect"] is False
    assert m.details["math_mode"]["matmul_fp32_precision"] in ("ieee", "none")
    assert all(c["outside"] == 0 for c in m.details["compared"])


def test_the_record_keeps_the_tolerance_its_basis_and_the_magnitude():
    m = run_check(BENCH, op="matmul", dtype="fp16")
    assert m.details["tolerance"] == {"rtol": 1e-3, "atol": 1e-5, "tolerance_scale": 1.0,
                                      "basis": "torch.testing default for fp16"}
    assert m.details["compared"][0]["magnitude"] == "|A| @ |B|"
    assert [f.name for f in m.measured] == ["error", "tolerance", "margin"]
    assert m.primary is not None and m.primary.name == "error"


@pytest.mark.parametrize(("dtype", "reason"), [
    ("tf32", "tf32 is a GPU matrix-core mode; not available on cpu"),
    ("fp8", "fp8 matrix multiply needs a GPU with fp8 support; not available on cpu"),
])
def test_precisions_the_cpu_lacks_are_skipped_with_the_reason(dtype, reason):
    m = run_check(BENCH, op="matmul", dtype=dtype)
    assert (m.status, m.reason) == ("skipped", reason)


def test_tf32_on_an_mi250x_is_skipped_before_the_device_is_touched():
    mi250x = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X", "gfx90a")
    ctx = CaseContext(mi250x, PerfCounterClock(), TimingPolicy())
    with pytest.raises(CaseSkipped) as skipped:
        BENCH.load()(ctx, BENCH.resolve({"op": "matmul", "dtype": "tf32"}))
    assert str(skipped.value) == ("tf32 needs an MI300-class GPU (gfx94x/gfx95x); "
                                  "AMD Instinct MI250X (gfx90a)")


@pytest.mark.parametrize(("op", "dtype", "why"), [
    ("softmax", "tf32", "tf32 changes only matrix products and convolutions"),
    ("conv-fwd", "fp8", "fp8 is checked on matmul (torch._scaled_mm); PyTorch has no fp8"),
])
def test_pairs_that_check_nothing_new_are_skipped(op, dtype, why):
    m = run_check(BENCH, op=op, dtype=dtype)
    assert m.reason is not None
    assert m.status == "skipped" and m.reason.startswith(why)


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_an_sdpa_backend_the_cpu_lacks_is_skipped_with_pytorchs_reasons(backend):
    m = run_check(BENCH, op=f"sdpa-{backend}", dtype="fp32")
    assert m.status == "skipped"
    assert m.reason is not None
    assert m.reason.startswith(f"the {backend} attention backend cannot run this case on cpu")
    assert "No viable backend for scaled_dot_product_attention" in m.reason


def _perturbed(real, factor: float):
    """`real`, but every low-precision result scaled by `factor`: a kernel gone wrong that
    the float64 reference does not share."""

    def wrong(*args, **kwargs):
        result = real(*args, **kwargs)
        if result.dtype == torch.float64:
            return result
        out = kwargs.get("out")
        if out is not None:
            with torch.no_grad():
                return out.mul_(factor)
        return result * factor

    return wrong


@pytest.mark.parametrize(("op", "dtype", "target", "factor"), [
    ("matmul", "fp32", (torch, "matmul"), 1 + 1e-4),
    ("bmm", "fp16", (torch, "bmm"), 1.05),
    ("addmm", "bf16", (torch, "addmm"), 2.0),
    ("conv-fwd", "fp32", (torch.nn.functional, "conv2d"), 1 + 1e-4),
    ("conv-bwd-weight", "fp16", (torch.nn.functional, "conv2d"), 1.1),
    ("sdpa-flash", "bf16", (torch.nn.functional, "scaled_dot_product_attention"), 2.0),
    ("sum", "fp32", (torch, "sum"), 1 + 1e-4),
    ("softmax", "fp16", (torch, "softmax"), 1.01),
    ("layer-norm", "bf16", (torch.nn.functional, "layer_norm"), 1.1),
    ("exp", "fp32", (torch, "exp"), 1 + 1e-5),
])
def test_a_perturbed_op_fails_its_check_with_the_reason(monkeypatch, op, dtype, target,
                                                         factor):
    module, name = target
    monkeypatch.setattr(module, name, _perturbed(getattr(module, name), factor))
    m = run_check(BENCH, op=op, dtype=dtype)
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith(f"wrong result: {op} in {dtype}: ")
    assert "outside the tolerance" in m.reason and "worst error" in m.reason
    f = figures(m)
    assert f["error"] > f["tolerance"] and f["margin"] < 0
    assert m.details["verdict"] == "fail"


def test_a_nan_from_the_device_fails_as_not_finite(monkeypatch):
    real = torch.tanh

    def tanh(x):
        out = real(x)
        if x.dtype != torch.float64:
            out = out.clone()
            out[7] = float("nan")
        return out

    monkeypatch.setattr(torch, "tanh", tanh)
    m = run_check(BENCH, op="tanh", dtype="fp16")
    assert m.status == "failed"
    assert m.reason is not None
    assert "1 of 65536 values of output are not finite where the reference is" in m.reason
    assert "margin" not in figures(m)


def test_a_larger_tolerance_scale_lets_the_same_error_pass(monkeypatch):
    monkeypatch.setattr(torch, "exp", _perturbed(torch.exp, 1 + 1e-5))
    assert run_check(BENCH, op="exp", dtype="fp32").status == "failed"
    m = run_check(BENCH, op="exp", dtype="fp32", tolerance_scale=100.0)
    assert m.status == "ok"
    assert m.details["tolerance"]["tolerance_scale"] == 100.0
    assert "tolerance_scale" in m.case.shown


def test_the_default_tolerance_scale_is_not_shown():
    params = BENCH.resolve({"op": "exp"})
    assert "tolerance_scale" not in BENCH.case(params, "cpu").shown
