"""Numerics per precision, for real on the CPU, and against a stack made wrong on purpose:
an op monkeypatched to return a perturbed result fails its check with the reason."""

from __future__ import annotations

import itertools
import math

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
        BENCH.measure(ctx, BENCH.resolve({"op": "matmul", "dtype": "tf32"}))
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


# --- fp32 convolutions through Winograd, as cuDNN and MIOpen may run them -----------------

MI300X_ON_CPU = DeviceInfo("cpu", None, "rocm", "AMD Instinct MI300X (on the CPU)", "gfx942")
H100_ON_CPU = DeviceInfo("cpu", None, "cuda", "NVIDIA H100 (on the CPU)", "sm_90")


def _winograd_matrices(tile: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """B^T, G, A^T of Winograd's F(tile, 3) on the points 0, +-1, +-2, +-1/2, ... and
    infinity (Toom-Cook), built in float64 and rounded to float32 as a library holds
    them; B^T solves A^T[(G g) * (B^T d)] = the 3-tap correlation of d with g."""
    points = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5][:tile + 1]
    n = tile + 2
    at = torch.zeros(tile, n, dtype=torch.float64)
    g = torch.zeros(n, 3, dtype=torch.float64)
    for j, p in enumerate(points):
        at[:, j] = torch.tensor([p ** i for i in range(tile)])
        denominator = math.prod(p - q for q in points if q != p)
        g[j] = torch.tensor([p ** k / denominator for k in range(3)])
    at[tile - 1, n - 1] = g[n - 1, 2] = 1.0
    system = torch.zeros(tile * 3 * n, n * n, dtype=torch.float64)
    target = torch.zeros(tile * 3 * n, dtype=torch.float64)
    for row, (i, k, col) in enumerate(itertools.product(range(tile), range(3), range(n))):
        for j in range(n):
            system[row, j * n + col] = at[i, j] * g[j, k]
        target[row] = float(col == i + k)
    bt = torch.linalg.lstsq(system, target.unsqueeze(1)).solution.reshape(n, n)
    assert torch.allclose(system @ bt.reshape(-1), target, atol=1e-9)
    return bt.float(), g.float(), at.float()


def winograd_conv2d(tile: int):
    """F.conv2d for 3x3, stride 1, padding 1 in float32 through Winograd's F(tile, 3),
    as a library's fast path computes it; every other call goes to the real conv2d."""
    real = torch.nn.functional.conv2d
    bt, g, at = _winograd_matrices(tile)

    def conv2d(x, w, bias=None, stride=1, padding=0, *args):
        if x.dtype != torch.float32 or bias is not None or (stride, padding) != (1, 1):
            return real(x, w, bias, stride, padding, *args)
        n, _, height, width = x.shape
        tiles_h, tiles_w = -(-height // tile), -(-width // tile)
        pad = torch.nn.functional.pad(
            x, (1, 1 + tiles_w * tile - width, 1, 1 + tiles_h * tile - height))
        u = g @ w @ g.T
        v = bt @ pad.unfold(2, tile + 2, tile).unfold(3, tile + 2, tile) @ bt.T
        y = at @ torch.einsum("kcij,nchwij->nkhwij", u, v) @ at.T
        out = y.permute(0, 1, 2, 4, 3, 5).reshape(n, w.shape[0], tiles_h * tile,
                                                 tiles_w * tile)
        return out[:, :, :height, :width].contiguous()

    return conv2d


def test_the_winograd_stand_in_is_a_correct_convolution():
    x, w = torch.randn(2, 8, 10, 10, dtype=torch.float64), torch.randn(4, 8, 3, 3)
    want = torch.nn.functional.conv2d(x.float(), w, None, 1, 1).double()
    for tile in (2, 4, 6):
        got = winograd_conv2d(tile)(x.float(), w, None, 1, 1).double()
        assert torch.allclose(got, want, rtol=0, atol=1e-3), tile


@pytest.mark.parametrize("device", [MI300X_ON_CPU, H100_ON_CPU])
@pytest.mark.parametrize("tile", [4, 6])
def test_an_fp32_winograd_convolution_passes_on_a_gpu_and_a_wrong_one_still_fails(
        monkeypatch, device, tile):
    """MIOpen and cuDNN run fp32 3x3 convolutions through Winograd, whose rounding error
    grows with the tile: F(4,3) and F(6,3), correct, miss torch.testing's fp32 tolerance
    on this check's own inputs. On a GPU the fp32 convolution checks allow for it; on the
    CPU, whose oneDNN path PyTorch runs direct, they stay strict."""
    monkeypatch.setattr(torch.nn.functional, "conv2d", winograd_conv2d(tile))
    m = run_check(BENCH, device=device, op="conv-fwd", dtype="fp32")
    assert m.status == "ok", m.reason
    assert "Winograd" in m.details["tolerance"]["basis"]
    assert run_check(BENCH, op="conv-fwd", dtype="fp32").status == "failed"  # the CPU
    monkeypatch.setattr(torch.nn.functional, "conv2d",
                        _perturbed(winograd_conv2d(tile), 1 + 1e-4))
    assert run_check(BENCH, device=device, op="conv-fwd", dtype="fp32").status == "failed"
