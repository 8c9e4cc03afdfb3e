"""The attention benchmark, run for real on the CPU; FLOP counts and backend recording."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.micro import attention
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Measurement
from accelbench.core.request import RunRequest
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.errors import UserError
from accelbench.runner.plan import expand, validate

BENCH = attention.BENCHMARK
RunCase = Callable[..., tuple[CaseResult, Measurement]]
CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * 2**30)
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * 2**30)
TINY = {"batch": 2, "heads": 2, "seq": 64, "head_dim": 32}


# --- real runs on the CPU ---------------------------------------------------------------


@pytest.mark.parametrize("pass_", attention.PASSES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("backend", "dtype"), [("auto", "bf16"), ("flash", "fp32"),
                                                ("math", "fp16")])
def test_runs_checked_and_counts_flops(
    ctx: CaseContext, run_case: RunCase, backend: str, dtype: str, causal: bool, pass_: str
) -> None:
    result, measurement = run_case(BENCH, ctx, **TINY, backend=backend, dtype=dtype,
                                   causal=causal, **{"pass": pass_})
    details = result.details
    flop = attention.attention_flop(2, 2, 64, 32, causal, pass_)
    assert details["flop_per_call"] == flop
    assert details["flop_formula"] == attention.FLOP_FORMULAS[(pass_, causal)]
    tolerance = attention.TOLERANCE[dtype]
    assert details["check_rel_errors_small"]["out"] <= tolerance
    assert details["check_rel_error_full"] <= tolerance
    if pass_ == "fwd-bwd":
        assert set(details["check_rel_errors_small"]) == {"out", "dq", "dk", "dv"}
        assert max(details["check_rel_errors_small"].values()) <= 2 * tolerance
    throughput = measurement.figure("throughput")
    assert throughput is not None and measurement.stats is not None
    assert throughput.unit == "FLOP/s" and throughput.peak is None
    assert throughput.value == pytest.approx(flop / measurement.stats.median, rel=1e-9)
    assert details["backend_requested"] == backend
    if backend == "auto":
        assert details["backend_used"] in ("flash", "math")  # the CPU has these two
    else:
        assert details["backend_used"] == backend
    assert details["backend_library"]
    assert "rocm_fa_library" not in details


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_a_backend_the_device_lacks_is_skipped_with_the_reason(
    ctx: CaseContext, run_case: RunCase, backend: str
) -> None:
    with pytest.raises(CaseSkipped) as skipped:
        run_case(BENCH, ctx, **TINY, backend=backend, dtype="fp32")
    reason = str(skipped.value)
    assert reason.startswith(f"the {backend} attention backend cannot run this case on cpu")
    assert "No viable backend" in reason  # PyTorch's own words
    assert "only the flash and math backends on the CPU" in reason


def test_forcing_leaves_the_global_backend_switches_alone(
    ctx: CaseContext, run_case: RunCase
) -> None:
    before = attention.sdp_flags(torch)
    run_case(BENCH, ctx, **TINY, backend="math", dtype="fp32")
    with pytest.raises(CaseSkipped):
        run_case(BENCH, ctx, **TINY, backend="efficient", dtype="fp32")
    assert attention.sdp_flags(torch) == before


def test_odd_sequence_lengths_and_the_causal_mask(ctx: CaseContext, run_case: RunCase) -> None:
    result, _ = run_case(BENCH, ctx, batch=1, heads=1, seq=300, head_dim=32, dtype="fp32",
                         causal=True, backend="flash")
    assert result.details["flop_per_call"] == 4 * 32 * 300 * 301 / 2
    assert "256 tokens" in result.details["check"]  # the small case stops at CHECK_SEQ


def test_an_attention_that_ignores_the_mask_does_not_score(
    ctx: CaseContext, run_case: RunCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = torch.nn.functional.scaled_dot_product_attention

    def unmasked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: object):
        return real(q, k, v)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", unmasked)
    with pytest.raises(CaseFailed, match=r"wrong result: relative error .* for fp32"):
        run_case(BENCH, ctx, **TINY, dtype="fp32", causal=True)


def test_fp32_attention_under_a_tf32_default_runs_and_says_fp32(
    ctx: CaseContext, run_case: RunCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 starts PyTorch with TF32 matmuls allowed, and
    the math backend's products then round their inputs to TF32. An fp32 case sets fp32
    matmuls for itself, records it, and leaves the default as it found it."""
    real = torch.nn.functional.scaled_dot_product_attention

    def cublas_like(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any):
        if torch.backends.cuda.matmul.fp32_precision == "tf32":  # 10 mantissa bits left
            q, k, v = (t.view(torch.int32).bitwise_and(~0x1FFF).view(torch.float32)
                       for t in (q, k, v))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", cublas_like)
    saved = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.allow_tf32 = True  # the state the override starts in
    try:
        result, _ = run_case(BENCH, ctx, **TINY, backend="math", dtype="fp32")
        assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.fp32_precision = saved
    assert result.details["matmul_fp32_precision"] == "ieee"
    assert result.details["tf32_in_effect"] is False
    half, _ = run_case(BENCH, ctx, **TINY, backend="math", dtype="bf16")
    assert "tf32_in_effect" not in half.details  # no float32 products to speak of


def test_a_case_larger_than_the_device_is_skipped_before_allocating(run_case: RunCase) -> None:
    small_gpu = dataclasses.replace(H100, memory_bytes=2**30)
    ctx = CaseContext(small_gpu, PerfCounterClock(), TimingPolicy())
    with pytest.raises(CaseSkipped, match=r"needs about .* GiB; the device has 1\.0 GiB"):
        run_case(BENCH, ctx, batch=64, heads=32, seq=16384, head_dim=128)
    # The math backend materialises S x S scores: a case the fused kernels fit is skipped.
    fits = {"batch": 1, "heads": 16, "seq": 8192, "head_dim": 128}
    assert attention.memory_estimate(**fits, element_bytes=2, pass_="fwd",
                                     materialized=False) < 2**29
    with pytest.raises(CaseSkipped, match="needs about"):
        run_case(BENCH, ctx, **fits, **{"pass": "fwd"}, backend="math")


def test_bf16_on_an_old_gpu_is_skipped_with_a_reason() -> None:
    v100 = DeviceInfo("cuda", 0, "cuda", "Tesla V100-SXM2-32GB", "sm_70", 32 * 2**30)
    ctx = CaseContext(v100, PerfCounterClock(), TimingPolicy())
    with pytest.raises(CaseSkipped, match=r"bf16 needs compute capability 8\.0"):
        BENCH.measure(ctx, BENCH.resolve({}))


# --- FLOP convention ------------------------------------------------------------------


def test_flop_convention() -> None:
    b, h, s, d = 4, 16, 2048, 128
    forward = 4 * b * h * s * s * d
    assert attention.attention_flop(b, h, s, d, False, "fwd") == forward
    causal = 4 * b * h * d * s * (s + 1) / 2  # only the unmasked pairs, diagonal included
    assert attention.attention_flop(b, h, s, d, True, "fwd") == causal
    assert causal == pytest.approx(forward / 2, rel=1e-3)
    assert attention.attention_flop(b, h, s, d, False, "fwd-bwd") == 3.5 * forward
    assert attention.attention_flop(b, h, s, d, True, "fwd-bwd") == 3.5 * causal
    assert attention.attention_flop(1, 1, 1, 1, True, "fwd") == 4


# --- backend recording, with faked devices ----------------------------------------------

FLAGS = {"flash": True, "efficient": True, "math": True, "cudnn": True}


def test_rocm_records_aotriton_by_default() -> None:
    env = {"TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1", "MIOPEN_FIND_MODE": "FAST"}
    out = attention.backend_settings(MI300X, "flash", "default", False, env, FLAGS)
    assert out["backend_used"] == "flash"
    assert out["backend_library"] == "AOTriton"
    assert out["rocm_fa_library"] == "default (AOTriton)"
    assert out["ck_sdpa_available"] is False
    assert out["rocm_attention_env"] == {"TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1"}
    assert out["sdp_enabled"] == FLAGS


def test_rocm_records_ck_when_it_is_preferred() -> None:
    env = {"TORCH_ROCM_FA_PREFER_CK": "1"}
    out = attention.backend_settings(MI300X, "efficient", "ck", True, env, FLAGS)
    assert out["backend_library"].startswith("composable_kernel (CK)")
    assert out["rocm_fa_library"] == "ck"
    assert out["ck_sdpa_available"] is True
    assert out["rocm_attention_env"] == env
    math = attention.backend_settings(MI300X, "math", "ck", True, {}, FLAGS)
    assert "rocBLAS/hipBLASLt" in math["backend_library"]


def test_cuda_and_cpu_record_their_libraries_and_no_rocm_settings() -> None:
    libraries = {
        backend: attention.backend_settings(H100, backend, None, None, {}, FLAGS)
        for backend in ("flash", "efficient", "cudnn", "math")
    }
    assert libraries["flash"]["backend_library"].startswith("FlashAttention-2")
    assert "CUTLASS" in libraries["efficient"]["backend_library"]
    assert libraries["cudnn"]["backend_library"] == "cuDNN fused attention"
    assert "cuBLAS" in libraries["math"]["backend_library"]
    assert not any("rocm" in key for out in libraries.values() for key in out)
    cpu = attention.backend_settings(CPU, "flash", None, None, {}, FLAGS)
    assert cpu["backend_library"] == "PyTorch's CPU flash-attention kernel"
    unknown = attention.backend_settings(CPU, None, None, None, {}, FLAGS)
    assert unknown["backend_library"].startswith("unknown")


def test_rocm_fa_preference_is_read_on_rocm_builds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ModuleType("torch")
    vars(fake).update(
        version=SimpleNamespace(hip="6.2.41133"),
        backends=SimpleNamespace(cuda=SimpleNamespace(
            preferred_rocm_fa_library=lambda: "_ROCmFABackend.Ck",
            is_ck_sdpa_available=lambda: True,
        )),
    )
    assert attention._rocm_fa_preference(fake) == "ck"
    assert attention._ck_available(fake) is True
    fake.version.hip = None  # a CUDA or CPU build
    assert attention._rocm_fa_preference(fake) is None
    assert attention._ck_available(fake) is None
    assert attention._rocm_fa_preference(torch) in (None, "default", "aotriton", "ck")


def test_unavailable_reason_reads_like_one_sentence() -> None:
    reasons = [
        "Flash attention kernel not used because:",
        "Flash attention was not compiled for current AMD GPU architecture",
        "Flash attention was not compiled for current AMD GPU architecture",
    ]
    text = attention.unavailable_reason(MI300X, "flash", reasons)
    assert text == (
        "the flash attention backend cannot run this case on AMD Instinct MI300X (gfx942): "
        "Flash attention kernel not used because: Flash attention was not compiled for "
        "current AMD GPU architecture."
    )


def test_a_rocm_result_carries_the_backend_settings(
    run_case: RunCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path on a device described as ROCm (computing on the CPU underneath)."""
    monkeypatch.setenv("TORCH_ROCM_FA_PREFER_CK", "1")
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    rocm_labelled = dataclasses.replace(MI300X, type="cpu", index=None)
    ctx = CaseContext(rocm_labelled, PerfCounterClock(),
                      TimingPolicy(max_time=0.2, warmup_time=0.01))
    result, _ = run_case(BENCH, ctx, **TINY, backend="flash")
    details = result.details
    assert details["backend_used"] == "flash"
    assert details["rocm_attention_env"] == {"TORCH_ROCM_FA_PREFER_CK": "1"}
    assert "rocm_fa_library" in details and "ck_sdpa_available" in details


# --- declaration and suites -------------------------------------------------------------


def test_declared_and_listed_with_its_parameters() -> None:
    described = REGISTRY.get("attention").describe()
    params = {p["name"]: p for p in described["params"]}
    assert set(params) == {"batch", "heads", "seq", "head_dim", "causal", "dtype", "backend",
                           "pass"}
    assert params["backend"]["choices"] == ["auto", "flash", "efficient", "cudnn", "math"]
    assert {64, 128} <= set(params["head_dim"]["choices"])
    assert {"fp16", "bf16"} <= set(described["dtypes"])
    with pytest.raises(UserError, match="seq=8 is below 16"):
        BENCH.resolve({"seq": "8"})
    with pytest.raises(UserError, match="pass='bwd' is not one of"):
        BENCH.resolve({"pass": "bwd"})


def test_suites_cover_backends_lengths_and_head_sizes() -> None:
    quick_cpu = [c for c in expand(validate(RunRequest(), REGISTRY), CPU)
                 if c.benchmark.name == "attention"]
    assert len(quick_cpu) == 1 and quick_cpu[0].params["seq"] <= 512
    standard = [c for c in expand(validate(RunRequest(suite="standard"), REGISTRY), MI300X)
                if c.benchmark.name == "attention"]
    assert {c.params["seq"] for c in standard} == {512, 1024, 2048, 4096, 8192, 16384}
    assert {c.params["head_dim"] for c in standard} == {64, 128}
    assert {c.params["causal"] for c in standard} == {True, False}
    assert {c.params["dtype"] for c in standard} == {"fp16", "bf16"}
    assert {c.params["backend"] for c in standard} == set(attention.BACKENDS)
    assert {c.params["pass"] for c in standard} == set(attention.PASSES)
    math_seqs = {c.params["seq"] for c in standard if c.params["backend"] == "math"}
    assert max(math_seqs) <= 2048  # the S x S scores of the math path stay small
