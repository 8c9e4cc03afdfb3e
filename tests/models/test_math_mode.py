"""The model benchmarks' float32 math mode: matmuls, convolutions and RNNs set through
PyTorch's per-op precisions and read back (cases run for real on the CPU), and a tf32
case on ROCm without TF32 in effect skipped rather than set against the TF32 peak."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from model_cases import BRIEF, TINY

from accelbench.benchmarks.mathmode import HIPBLASLT_ALLOW_TF32
from accelbench.benchmarks.models import infer, train
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseSkipped
from accelbench.core.timing import PerfCounterClock

# The ROCm code path run for real: a device that says ROCm MI300X and computes on the CPU.
MI300X_ON_CPU = DeviceInfo("cpu", None, "rocm", "AMD Instinct MI300X (on the CPU)", "gfx942")


@pytest.fixture
def mixed_apis() -> Iterator[None]:
    """The new API used in this process the way that makes legacy reads raise; put back
    after the test."""
    import torch

    # torch types neither torch.backends.cudnn.conv nor torch.backends.cudnn.rnn's
    # fp32_precision, both there at run time.
    b = torch.backends
    saved = (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
             b.cudnn.rnn.fp32_precision)  # type: ignore[attr-defined]
    b.cuda.matmul.fp32_precision = "tf32"
    b.cudnn.conv.fp32_precision = "ieee"  # type: ignore[attr-defined]
    yield
    (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
     b.cudnn.rnn.fp32_precision) = saved  # type: ignore[attr-defined]


@pytest.fixture
def rocm_ctx(monkeypatch: pytest.MonkeyPatch) -> CaseContext:
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    return CaseContext(MI300X_ON_CPU, PerfCounterClock(), BRIEF)


def test_training_an_lstm_in_fp32_sets_every_op_and_restores_it(execute, mixed_apis) -> None:
    import torch

    m = execute(train.BENCHMARK, model="lstm-tiny", dtype="fp32", **TINY)
    assert m.status == "ok", m.reason
    assert {k: m.details[k] for k in ("matmul_fp32_precision", "conv_fp32_precision",
                                      "rnn_fp32_precision", "tf32_in_effect")} == {
        "matmul_fp32_precision": "ieee", "conv_fp32_precision": "ieee",
        "rnn_fp32_precision": "ieee", "tf32_in_effect": False}
    assert "hipblaslt_allow_tf32" not in m.details  # a ROCm detail
    b = torch.backends
    assert (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision) == ("tf32", "ieee")  # type: ignore[attr-defined]


def test_inference_in_bf16_runs_with_the_apis_mixed(execute, mixed_apis) -> None:
    m = execute(infer.BENCHMARK, model="gpt2-tiny", dtype="bf16", batch=2, seq=16,
                steps_per_window=1)
    assert m.status == "ok", m.reason
    assert m.details["matmul_fp32_precision"] == "ieee"  # TF32 is off but for tf32


def test_rocm_tf32_training_without_the_variable_is_skipped(
    rocm_ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HIPBLASLT_ALLOW_TF32, raising=False)
    params = train.BENCHMARK.resolve({"model": "gpt2-tiny", "dtype": "tf32", **TINY})
    with pytest.raises(CaseSkipped, match="HIPBLASLT_ALLOW_TF32 is not set in the worker"):
        train.BENCHMARK.measure(rocm_ctx, params)


def test_rocm_tf32_inference_with_the_variable_records_tf32_in_effect(
    rocm_ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HIPBLASLT_ALLOW_TF32, "1")
    params = infer.BENCHMARK.resolve({"model": "gpt2-tiny", "dtype": "tf32", "batch": 2,
                                      "seq": 16, "steps_per_window": 1})
    result = infer.BENCHMARK.measure(rocm_ctx, params)
    assert result.details["tf32_in_effect"] is True
    assert result.details["matmul_fp32_precision"] == "tf32"
    assert result.details["hipblaslt_allow_tf32"] == "1"
