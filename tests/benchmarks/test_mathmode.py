"""Float32 math modes: set, read back and restored through PyTorch's per-op precisions
where they exist (never touching the legacy flags, whose reads raise once the two APIs
are mixed), the legacy flags on older PyTorch, and ROCm's HIPBLASLT_ALLOW_TF32 gate.

A fake `torch.backends` (tests/fakes.py) behaves as ATen's Context does; the real torch
on the CPU has the new API too, and GEMM and conv cases run on it for real.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import torch

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.mathmode import (
    HIPBLASLT_ALLOW_TF32,
    LEGACY_API,
    NEW_API,
    math_mode,
    read_precision,
    tf32_worker_env,
)
from accelbench.benchmarks.micro import conv, gemm
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseSkipped
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.core.worker_env import NONE, WorkerEnv
from fakes import FakeMathContext, run_benchmark

MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * 2**30)
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * 2**30)
# The ROCm code path run for real: a device that says ROCm MI300X and computes on the CPU.
MI300X_ON_CPU = DeviceInfo("cpu", None, "rocm", "AMD Instinct MI300X (on the CPU)", "gfx942")


def as_module(fake: FakeMathContext) -> ModuleType:
    """The fake's `torch` as the module object that math_mode and read_precision take."""
    module = ModuleType("torch")
    vars(module).update(vars(fake.torch))
    return module


@pytest.fixture
def real_precisions() -> Iterator[None]:
    """The real torch's per-op precisions, put back after the test."""
    # torch types neither torch.backends.cudnn.conv nor torch.backends.cudnn.rnn's
    # fp32_precision, both there at run time.
    b = torch.backends
    saved = (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
             b.cudnn.rnn.fp32_precision)  # type: ignore[attr-defined]
    yield
    (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
     b.cudnn.rnn.fp32_precision) = saved  # type: ignore[attr-defined]


@pytest.fixture
def rocm_ctx(monkeypatch: pytest.MonkeyPatch) -> CaseContext:
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    return CaseContext(MI300X_ON_CPU, PerfCounterClock(),
                       TimingPolicy(max_time=0.2, warmup_time=0.01))


# --- the fake behaves as PyTorch does --------------------------------------------------


def test_the_fake_raises_on_a_legacy_read_once_the_apis_are_mixed() -> None:
    """What the old code did (read allow_tf32 to save it) fails as PyTorch fails."""
    ctx = FakeMathContext()
    matmul, cudnn = ctx.torch.backends.cuda.matmul, ctx.torch.backends.cudnn
    assert matmul.allow_tf32 is False and cudnn.allow_tf32 is True
    matmul.fp32_precision = "tf32"
    with pytest.raises(RuntimeError, match=FakeMathContext.MIXED):
        _ = matmul.allow_tf32
    cudnn.conv.fp32_precision = "ieee"
    with pytest.raises(RuntimeError, match=FakeMathContext.MIXED):
        _ = cudnn.allow_tf32


def test_real_torch_raises_on_a_legacy_read_once_the_apis_are_mixed(real_precisions) -> None:
    """The same on the real torch, so the fake's rule is PyTorch's."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        _ = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.fp32_precision = "none"
    torch.backends.cudnn.conv.fp32_precision = "ieee"  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        _ = torch.backends.cudnn.allow_tf32


# --- the new API, with the legacy state mixed ------------------------------------------


@pytest.mark.parametrize("tf32", [True, False])
def test_inside_a_case_the_legacy_and_new_state_agree_and_the_mix_found_comes_back(
    tf32: bool,
) -> None:
    """Inside the case every legacy read works and says what the per-op precisions say
    (cuBLAS handle set-up, cuBLASLt and torch.compile read them); after it, the state
    found, mixed as it was, is back."""
    ctx = FakeMathContext()
    b = ctx.torch.backends
    b.cuda.matmul.fp32_precision = "tf32"  # someone used the new API: legacy reads raise
    b.cudnn.conv.fp32_precision = "ieee"
    with math_mode(as_module(ctx), tf32, ("matmul", "conv", "rnn"), "cuda") as mode:
        want = "tf32" if tf32 else "ieee"
        assert dict(mode.precisions) == {"matmul": want, "conv": want, "rnn": want}
        assert mode.api == NEW_API
        assert mode.in_effect("matmul") is tf32 and mode.problem() is None
        assert b.cuda.matmul.allow_tf32 is tf32 and b.cudnn.allow_tf32 is tf32
    assert (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision,
            b.cudnn.rnn.fp32_precision) == ("tf32", "ieee", "tf32")


@pytest.mark.parametrize("ops", [("matmul",), ("conv",), ("matmul", "conv", "rnn")])
@pytest.mark.parametrize("tf32", [True, False])
def test_the_real_torch_reads_its_legacy_flags_inside_a_case(
    tf32: bool, ops: tuple[str, ...], real_precisions
) -> None:
    """Setting only the per-op precision ("tf32" for matmul, conv apart from RNN) would
    make these reads raise, as cuBLAS and torch.compile make them."""
    with math_mode(torch, tf32, ops, "cuda") as mode:
        assert mode.in_effect(ops[0]) is tf32
        if "matmul" in ops:
            assert torch.backends.cuda.matmul.allow_tf32 is tf32
        if "conv" in ops:
            assert torch.backends.cudnn.allow_tf32 is tf32
    _ = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def test_an_error_inside_restores_the_precisions() -> None:
    ctx = FakeMathContext()
    matmul = ctx.torch.backends.cuda.matmul
    with pytest.raises(ValueError, match="boom"), \
            math_mode(as_module(ctx), True, ("matmul",), "cuda"):
        assert matmul.fp32_precision == "tf32"
        raise ValueError("boom")
    assert matmul.fp32_precision == "none"


def test_the_legacy_flags_on_older_pytorch() -> None:
    ctx = FakeMathContext(new_api=False)
    b = ctx.torch.backends
    with math_mode(as_module(ctx), True, ("matmul", "conv"), "cuda") as mode:
        assert mode.api == LEGACY_API
        assert dict(mode.precisions) == {"matmul": "tf32", "conv": "tf32"}
        assert b.cuda.matmul.allow_tf32 is True and mode.in_effect()
    with math_mode(as_module(ctx), False, ("matmul", "conv"), "cuda") as mode:
        assert dict(mode.precisions) == {"matmul": "ieee", "conv": "ieee"}
        assert b.cudnn.allow_tf32 is False
    # math_mode's exit put the flag back; mypy keeps it narrowed from inside the block.
    assert b.cuda.matmul.allow_tf32 is False and b.cudnn.allow_tf32 is True  # type: ignore[unreachable]


def test_details_name_what_was_read_back() -> None:
    ctx = FakeMathContext()
    with math_mode(as_module(ctx), True, ("matmul",), "cuda") as mode:
        assert mode.details(("matmul",)) == {
            "tf32_in_effect": True, "matmul_fp32_precision": "tf32",
            "fp32_precision_api": NEW_API}
    with math_mode(as_module(ctx), False, ("conv",), "rocm", environ={}) as mode:
        assert mode.details(("conv",)) == {  # no hipBLASLt switch without matmuls
            "tf32_in_effect": False, "conv_fp32_precision": "ieee",
            "fp32_precision_api": NEW_API}


def test_read_precision_never_reads_a_legacy_flag() -> None:
    ctx = FakeMathContext()
    ctx.torch.backends.cudnn.conv.fp32_precision = "ieee"
    assert read_precision(as_module(ctx), "conv") == "ieee"
    assert read_precision(as_module(FakeMathContext(new_api=False)), "conv") == "tf32"
    assert ctx.legacy_reads == 0


# --- ROCm: TF32 in hipBLASLt only with HIPBLASLT_ALLOW_TF32=1 ---------------------------


def test_rocm_legacy_tf32_without_the_variable_reads_back_off_and_says_why() -> None:
    ctx = FakeMathContext(new_api=False, rocm_gate=True)
    with math_mode(as_module(ctx), True, ("matmul",), "rocm", environ={}) as mode:
        assert mode.precisions["matmul"] == "ieee"  # allow_tf32 = True did nothing
        assert not mode.in_effect()
        assert mode.problem() == (
            "TF32 is not in effect: HIPBLASLT_ALLOW_TF32 is not set in the worker "
            "(ROCm builds of PyTorch enable TF32 in hipBLASLt only then)")
        assert mode.details(("matmul",))["hipblaslt_allow_tf32"] is None


def test_rocm_new_api_reads_tf32_but_needs_the_variable_too() -> None:
    """PyTorch 2.9 keeps the precision it is given, and its ROCm GEMM path still asks
    allowTF32CuBLAS(), which is false without the variable."""
    environ: dict[str, str] = {}
    ctx = FakeMathContext(rocm_gate=True, environ=environ)
    with math_mode(as_module(ctx), True, ("matmul",), "rocm", environ=environ) as mode:
        assert mode.precisions["matmul"] == "tf32" and not mode.in_effect()
        assert "HIPBLASLT_ALLOW_TF32 is not set" in str(mode.problem())
    environ[HIPBLASLT_ALLOW_TF32] = "0"
    with math_mode(as_module(ctx), True, ("matmul",), "rocm", environ=environ) as mode:
        assert "HIPBLASLT_ALLOW_TF32 is '0', not 1," in str(mode.problem())
    environ[HIPBLASLT_ALLOW_TF32] = "1"
    with math_mode(as_module(ctx), True, ("matmul",), "rocm", environ=environ) as mode:
        assert mode.in_effect() and mode.problem() is None
        assert mode.details(("matmul",))["hipblaslt_allow_tf32"] == "1"
    with math_mode(as_module(ctx), False, ("matmul",), "rocm", environ=environ) as mode:
        assert not mode.in_effect() and mode.problem() is None  # fp32 is fp32


@pytest.mark.parametrize("name", ["gemm", "train", "train-ddp", "infer"])
def test_tf32_cases_on_rocm_start_their_worker_with_the_variable(name: str) -> None:
    bench = REGISTRY.get(name)
    tf32 = bench.resolve({"dtype": "tf32"})
    assert bench.environment(tf32, MI300X) == WorkerEnv.of({HIPBLASLT_ALLOW_TF32: "1"})
    assert bench.environment(bench.resolve({"dtype": "fp32"}), MI300X) == NONE
    assert bench.environment(tf32, H100) == NONE
    # The user's own value wins, and the benchmark records what was in effect.
    assert not bench.environment(tf32, MI300X).for_user({HIPBLASLT_ALLOW_TF32: "0"})
    # tf32 and fp32 cases never share a worker on ROCm.
    assert bench.worker_identity(tf32, MI300X) != bench.worker_identity(
        bench.resolve({"dtype": "fp32"}), MI300X)


def test_tf32_worker_env_is_for_tf32_on_rocm_only() -> None:
    assert tf32_worker_env({"dtype": "tf32"}, MI300X).values == ((HIPBLASLT_ALLOW_TF32, "1"),)
    assert tf32_worker_env({"dtype": "bf16"}, MI300X) == NONE
    assert tf32_worker_env({}, MI300X) == NONE


# --- GEMM and conv run for real with the APIs mixed -------------------------------------


def test_gemm_fp32_runs_after_the_new_api_set_tf32(ctx: CaseContext, real_precisions) -> None:
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # a legacy read would now raise
    result, _ = run_benchmark(gemm.BENCHMARK, ctx, shape="32", dtype="fp32")
    assert result.details["matmul_fp32_precision"] == "ieee"
    assert result.details["tf32_in_effect"] is False
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"


def test_gemm_runs_against_a_fake_that_raises_on_mixed_reads(
    ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeMathContext()
    fake.torch.backends.cuda.matmul.fp32_precision = "tf32"
    monkeypatch.setattr(torch.backends.cuda, "matmul", fake.torch.backends.cuda.matmul)
    result, _ = run_benchmark(gemm.BENCHMARK, ctx, shape="32", dtype="fp32")
    assert result.details["matmul_fp32_precision"] == "ieee"
    assert fake.resolved("matmul") == "tf32"  # the mix found is back


def test_conv_fp32_runs_after_the_new_api_set_conv_precision(
    ctx: CaseContext, real_precisions
) -> None:
    # cudnn.allow_tf32 now raises
    torch.backends.cudnn.conv.fp32_precision = "ieee"  # type: ignore[attr-defined]
    result, _ = run_benchmark(conv.BENCHMARK, ctx, layer="8:12x12:16:3x3:1:1", batch=1)
    assert result.details["flags"]["cudnn.conv.fp32_precision"] == "ieee"
    assert result.details["conv_fp32_precision"] == "ieee"
    assert result.details["tf32_in_effect"] is False
    assert torch.backends.cudnn.conv.fp32_precision == "ieee"  # type: ignore[attr-defined]


# --- a tf32 GEMM on ROCm --------------------------------------------------------------


def test_rocm_tf32_gemm_without_the_variable_is_skipped_not_timed(
    rocm_ctx: CaseContext, monkeypatch: pytest.MonkeyPatch, real_precisions
) -> None:
    monkeypatch.delenv(HIPBLASLT_ALLOW_TF32, raising=False)
    before = torch.backends.cuda.matmul.fp32_precision
    with pytest.raises(CaseSkipped, match="TF32 is not in effect: HIPBLASLT_ALLOW_TF32 is not"):
        run_benchmark(gemm.BENCHMARK, rocm_ctx, shape="32", dtype="tf32")
    assert torch.backends.cuda.matmul.fp32_precision == before  # restored on the way out


def test_rocm_tf32_gemm_with_the_variable_records_what_was_in_effect(
    rocm_ctx: CaseContext, monkeypatch: pytest.MonkeyPatch, real_precisions
) -> None:
    monkeypatch.setenv(HIPBLASLT_ALLOW_TF32, "1")
    result, _ = run_benchmark(gemm.BENCHMARK, rocm_ctx, shape="32", dtype="tf32")
    assert result.details["tf32_in_effect"] is True
    assert result.details["matmul_fp32_precision"] == "tf32"
    assert result.details["hipblaslt_allow_tf32"] == "1"
    fp32, _ = run_benchmark(gemm.BENCHMARK, rocm_ctx, shape="32", dtype="fp32")
    assert fp32.details["tf32_in_effect"] is False
    assert fp32.details["matmul_fp32_precision"] == "ieee"


# --- environment switches that override the flags ---------------------------------------


def test_nvidia_tf32_override_0_means_no_tf32_whatever_the_flags_say() -> None:
    """cuBLAS and cuDNN read NVIDIA_TF32_OVERRIDE=0 themselves and never use TF32 then:
    a tf32 case is not measured as tf32, an fp32 case is fp32."""
    ctx = FakeMathContext()
    environ = {"NVIDIA_TF32_OVERRIDE": "0"}
    with math_mode(as_module(ctx), True, ("matmul", "conv"), "cuda", environ) as mode:
        assert mode.precisions["matmul"] == "tf32"  # PyTorch asks for it ...
        assert not mode.in_effect("matmul") and not mode.in_effect("conv")  # ... in vain
        assert mode.problem() == (
            "TF32 is not in effect: NVIDIA_TF32_OVERRIDE=0 is set in the worker (cuBLAS and "
            "cuDNN then never use TF32, whatever PyTorch asks)")
        assert mode.details(("matmul",))["tf32_env"] == {"NVIDIA_TF32_OVERRIDE": "0"}
    with math_mode(as_module(ctx), False, ("matmul",), "cuda", environ) as mode:
        assert mode.problem() is None and not mode.in_effect()


def test_tf32_switches_in_the_environment_are_recorded_with_the_mode() -> None:
    """TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 makes TF32 PyTorch's default for matmuls; a
    case sets its own mode over it, and the record says the switch was there."""
    ctx = FakeMathContext()
    ctx.torch.backends.cuda.matmul.allow_tf32 = True  # the state the override starts in
    environ = {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1", "NVIDIA_TF32_OVERRIDE": "1",
               "CUDA_VISIBLE_DEVICES": "0"}
    with math_mode(as_module(ctx), False, ("matmul",), "cuda", environ) as mode:
        assert mode.precisions["matmul"] == "ieee" and mode.problem() is None
        assert mode.details(("matmul",))["tf32_env"] == {
            "NVIDIA_TF32_OVERRIDE": "1", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    assert ctx.torch.backends.cuda.matmul.allow_tf32 is True  # the default is back
    with math_mode(as_module(ctx), False, ("matmul",), "cuda", {}) as mode:
        assert "tf32_env" not in mode.details(("matmul",))


def test_on_rocm_the_blas_preference_is_recorded_too() -> None:
    environ = {HIPBLASLT_ALLOW_TF32: "1", "TORCH_BLAS_PREFER_HIPBLASLT": "0"}
    with math_mode(as_module(FakeMathContext()), True, ("matmul",), "rocm",
                   environ) as mode:
        assert mode.details(("matmul",))["tf32_env"] == {
            HIPBLASLT_ALLOW_TF32: "1", "TORCH_BLAS_PREFER_HIPBLASLT": "0"}


# --- ROCm: how TF32 runs depends on the architecture ------------------------------------


def rocm_torch(gcn_arch: str) -> ModuleType:
    """A fake ROCm build of torch whose device 0 reports `gcn_arch` as gcnArchName."""
    from types import SimpleNamespace

    module = as_module(FakeMathContext())
    module.version = SimpleNamespace(hip="7.0.51831", cuda=None)  # type: ignore[attr-defined]
    props = SimpleNamespace(gcnArchName=gcn_arch, name="AMD Instinct")
    module.cuda = SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: True, current_device=lambda: 0,
        get_device_properties=lambda index: props)
    return module


def test_tf32_on_gfx950_is_recorded_as_hipblaslt_emulation() -> None:
    """gfx950 (MI350X, MI355X) has no xf32 matrix instructions: hipBLASLt runs a TF32
    GEMM there as bf16 passes, which the record says instead of implying xf32 hardware."""
    environ = {HIPBLASLT_ALLOW_TF32: "1"}
    with math_mode(rocm_torch("gfx950:sramecc+:xnack-"), True, ("matmul",), "rocm",
                   environ) as mode:
        assert mode.arch == "gfx950" and mode.in_effect()
        details = mode.details(("matmul",))
        assert details["tf32_implementation"].startswith(
            "emulated: gfx950 has no xf32 matrix instructions")
    with math_mode(rocm_torch("gfx942:sramecc+:xnack-"), True, ("matmul",), "rocm",
                   environ) as mode:
        assert mode.details(("matmul",))["tf32_implementation"] == (
            "xf32 matrix instructions (gfx942)")
    with math_mode(rocm_torch("gfx950:sramecc+:xnack-"), False, ("matmul",), "rocm",
                   environ) as mode:  # fp32 asked: nothing about TF32 to say
        assert "tf32_implementation" not in mode.details(("matmul",))
