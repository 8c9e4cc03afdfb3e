"""The GEMM benchmark, run for real on the CPU, and its shape grammar."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.mathmode import math_mode
from accelbench.benchmarks.micro import gemm
from accelbench.benchmarks.micro.shapes import DEFAULT_TOKENS, parse_shape, shape_names
from accelbench.core.case import Case
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseSkipped
from accelbench.core.request import RunRequest
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.errors import UserError
from accelbench.runner.plan import expand, validate
from fakes import run_benchmark

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")



def run(ctx: CaseContext, **given: object):
    return run_benchmark(gemm.BENCHMARK, ctx, **given)


@pytest.mark.parametrize("dtype", ["fp32", "fp64", "bf16", "int8"])
def test_gemm_runs_on_cpu_and_derives_flops(ctx: CaseContext, dtype: str) -> None:
    result, measurement = run(ctx, shape="64x48x32", dtype=dtype)
    assert result.timing.samples
    assert result.details["flop_per_call"] == 2 * 64 * 48 * 32
    assert result.details["flop_formula"] == "2*m*n*k*batch"
    assert result.details["check_rel_error_small"] <= gemm.TOLERANCE[dtype]
    assert result.details["check_rel_error_full"] <= gemm.TOLERANCE[dtype]
    throughput = measurement.figure("throughput")
    assert throughput is not None
    assert throughput.unit == ("OP/s" if dtype == "int8" else "FLOP/s")
    assert math.isfinite(throughput.value) and throughput.value > 0
    median = measurement.stats.median
    assert throughput.value == pytest.approx(2 * 64 * 48 * 32 / median, rel=1e-9)
    assert throughput.peak is None
    assert measurement.figure("time").value == median


def test_int8_result_is_exact(ctx: CaseContext) -> None:
    result, _ = run(ctx, shape="32x16x24", dtype="int8")
    assert result.details["check_rel_error_small"] == 0.0
    assert result.details["check_rel_error_full"] == 0.0
    assert result.details["op"] == "torch._int_mm"


def test_batched_gemm_counts_every_matrix(ctx: CaseContext) -> None:
    result, measurement = run(ctx, shape="32x16x8", dtype="fp32", batch=3)
    assert result.details["op"] == "torch.bmm"
    assert result.details["flop_per_call"] == 2 * 32 * 16 * 8 * 3
    median = measurement.stats.median
    assert measurement.figure("throughput").value == pytest.approx(
        2 * 32 * 16 * 8 * 3 / median, rel=1e-9
    )


@pytest.mark.parametrize("dtype", ["tf32", "fp8"])
def test_gpu_only_dtypes_are_skipped_on_cpu_with_a_reason(ctx: CaseContext, dtype: str) -> None:
    with pytest.raises(CaseSkipped, match=rf"{dtype}.*not available on cpu"):
        run(ctx, shape="64", dtype=dtype)


def test_int8_shape_limits_are_a_clear_failure(ctx: CaseContext) -> None:
    with pytest.raises(CaseFailed, match=r"m > 16 and n, k multiples of 8; got m=16"):
        run(ctx, shape="16x64x64", dtype="int8")
    with pytest.raises(CaseFailed, match="multiples of 8"):
        run(ctx, shape="32x60x64", dtype="int8")
    with pytest.raises(CaseFailed, match="batch=1"):
        run(ctx, shape="32", dtype="int8", batch=2)


def test_fp8_shape_limits() -> None:
    assert gemm.layout_problem("fp8", 7, 32, 48, 1) is None
    shape_problem = gemm.layout_problem("fp8", 32, 40, 48, 1)
    assert shape_problem is not None and "multiples of 16" in shape_problem
    batch_problem = gemm.layout_problem("fp8", 32, 32, 32, 2)
    assert batch_problem is not None and "torch._scaled_mm" in batch_problem
    assert gemm.layout_problem("bf16", 7, 9, 11, 4) is None


def test_fp8_operands_compute_the_scaled_product() -> None:
    """The fp8 path (scales, column-major B, bf16 output) runs where _scaled_mm has a CPU
    kernel, even though the benchmark itself refuses fp8 on a CPU."""
    try:
        ops = gemm.make_operands(torch, torch.device("cpu"), "fp8", 64, 32, 48, 1, 0)
        ops.call()
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"no CPU kernel for torch._scaled_mm here: {e}")
    assert ops.a.dtype == torch.float8_e4m3fn and ops.out.dtype == torch.bfloat16
    assert ops.b.shape == (48, 32) and ops.b.stride() == (1, 48)  # column-major
    assert ops.scale != 1.0
    assert gemm.relative_error(torch, ops, torch.arange(64), torch.arange(32)) < 2e-2


def test_a_wrong_but_fast_matmul_does_not_score(
    ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = torch.matmul

    def wrong(a, b, *, out):
        real(a, b, out=out)
        return out.mul_(1.01)

    monkeypatch.setattr(torch, "matmul", wrong)
    with pytest.raises(CaseFailed, match=r"wrong result: relative error .* for fp32"):
        run(ctx, shape="64", dtype="fp32")


def test_a_matmul_wrong_only_at_full_size_is_caught(
    ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = torch.matmul

    def wrong_when_large(a, b, *, out):
        real(a, b, out=out)
        return out.add_(1.0) if a.shape[0] > gemm.CHECK_MAX_DIM else out

    monkeypatch.setattr(torch, "matmul", wrong_when_large)
    with pytest.raises(CaseFailed, match=r"wrong result: .*300x32x32"):
        run(ctx, shape="300x32x32", dtype="fp32")


def test_fp32_forbids_tf32_for_the_case_and_restores_the_flag(
    ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags = torch.backends.cuda.matmul
    seen = []
    real = torch.matmul

    def spy(a, b, *, out):
        seen.append(flags.fp32_precision)
        return real(a, b, out=out)

    monkeypatch.setattr(torch, "matmul", spy)
    previous = flags.allow_tf32
    flags.allow_tf32 = True  # the legacy API: both of PyTorch's states say TF32
    try:
        result, _ = run(ctx, shape="32", dtype="fp32")
        assert seen and set(seen) == {"ieee"}
        assert result.details["tf32_in_effect"] is False
        assert result.details["matmul_fp32_precision"] == "ieee"
        assert "allow_tf32" not in result.details
        assert "hipblaslt_allow_tf32" not in result.details  # a ROCm detail
        # Restored through the new API to a state the legacy flag can still read.
        assert flags.fp32_precision == "tf32" and flags.allow_tf32 is True
    finally:
        flags.allow_tf32 = previous


def test_the_matmul_precision_is_restored_after_an_error() -> None:
    flags = torch.backends.cuda.matmul
    previous = flags.fp32_precision
    with pytest.raises(RuntimeError, match="boom"), \
            math_mode(torch, True, ("matmul",), "cuda") as mode:
        assert flags.fp32_precision == "tf32" and mode.in_effect()
        raise RuntimeError("boom")
    assert flags.fp32_precision == previous


def test_peak_is_passed_through_for_the_harness(
    ctx: CaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    peaks = SimpleNamespace(dense_flops=lambda key: {"fp32": 1e12}.get(key))
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: peaks)
    result, measurement = run(ctx, shape="32", dtype="fp32")
    assert result.rates[0].peak == 1e12
    assert measurement.figure("throughput").pct_of_peak is not None


@pytest.mark.parametrize(
    ("text", "mnk"),
    [
        ("4096", (4096, 4096, 4096)),
        ("128x256x512", (128, 256, 512)),
        ("bert-base.ffn-up", (DEFAULT_TOKENS, 3072, 768)),
        ("gpt2-small.qkv", (DEFAULT_TOKENS, 2304, 768)),
        ("gpt2-xl.ffn-down", (DEFAULT_TOKENS, 1600, 6400)),
        ("llama-7b.gate-up", (DEFAULT_TOKENS, 22016, 4096)),
        ("llama-7b.ffn-down", (DEFAULT_TOKENS, 4096, 11008)),
        ("llama-1b.qkv", (DEFAULT_TOKENS, 3072, 2048)),  # 32 q heads + 2 * 8 kv heads of 64
        ("llama-1b.attn-out", (DEFAULT_TOKENS, 2048, 2048)),
        ("bert-large.attn-out@512", (512, 1024, 1024)),
    ],
)
def test_shapes_parse_to_m_n_k(text: str, mnk: tuple[int, int, int]) -> None:
    assert parse_shape(text) == mnk


def test_every_named_shape_is_a_valid_parameter() -> None:
    names = shape_names()
    assert len(names) == len(set(names)) == 32
    for name in names:
        assert gemm.BENCHMARK.resolve({"shape": name})["shape"] == name


@pytest.mark.parametrize("bad", ["12x", "0", "4096x0x7", "llama-7b.ffn-up", "gpt2.qkv@-1", ""])
def test_bad_shapes_are_user_errors_listing_the_forms(bad: str) -> None:
    with pytest.raises(UserError, match=r"gemm: parameter shape=.*MxNxK"):
        gemm.BENCHMARK.resolve({"shape": bad})


def test_llama_up_projection_hint_names_gate_up() -> None:
    with pytest.raises(UserError, match="llama-7b has projections qkv, attn-out, gate-up"):
        gemm.BENCHMARK.resolve({"shape": "llama-7b.ffn-up"})


@pytest.mark.parametrize(
    ("device", "dtype", "reason"),
    [
        (DeviceInfo("cuda", 0, "cuda", "NVIDIA A100", arch="sm_80"), "fp8", "8.9 or newer"),
        (DeviceInfo("cuda", 0, "cuda", "Tesla V100", arch="sm_70"), "bf16", "8.0 or newer"),
        (DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X", arch="gfx90a"), "tf32", "MI300"),
        (DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X", arch="gfx90a"), "fp8", "gfx942"),
    ],
)
def test_unsupported_gpu_dtypes_are_skipped_before_touching_the_device(
    device: DeviceInfo, dtype: str, reason: str
) -> None:
    ctx = CaseContext(device, PerfCounterClock(), TimingPolicy())
    with pytest.raises(CaseSkipped, match=reason):
        gemm.BENCHMARK.measure(ctx, gemm.BENCHMARK.resolve({"dtype": dtype}))


# --- fp8: use_fast_accum as a parameter --------------------------------------------------

# fp8 run for real: a device that says H100 and computes on the CPU (where this torch has
# a _scaled_mm kernel).
H100_ON_CPU = DeviceInfo("cpu", None, "cuda", "NVIDIA H100 (on the CPU)", "sm_90")


@pytest.mark.parametrize("fast_accum", [True, False])
def test_fp8_passes_fast_accum_to_scaled_mm_and_records_it(
    monkeypatch: pytest.MonkeyPatch, fast_accum: bool
) -> None:
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    real, seen = torch._scaled_mm, []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("use_fast_accum"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", spy)
    ctx = CaseContext(H100_ON_CPU, PerfCounterClock(), TimingPolicy(max_time=0.1,
                                                                    warmup_time=0.01))
    try:
        result, _ = run(ctx, shape="64x32x48", dtype="fp8", fast_accum=fast_accum)
    except CaseFailed as e:
        pytest.skip(f"no CPU kernel for torch._scaled_mm here: {e}")
    assert seen and set(seen) == {fast_accum}  # the checked calls and the timed ones
    assert result.details["fp8_fast_accum"] is fast_accum
    assert "tf32_in_effect" not in result.details  # no float32 matmul precision for fp8


def test_fast_accum_is_on_by_default_and_belongs_to_fp8_cases_only() -> None:
    resolved = gemm.BENCHMARK.resolve({"dtype": "fp8"})
    assert resolved["fast_accum"] is True
    case = gemm.BENCHMARK.case(resolved, "cuda:0")
    assert "fast_accum" in case.shown  # shown on and off: both are settings of fp8
    assert "fast_accum" in gemm.BENCHMARK.case(
        gemm.BENCHMARK.resolve({"dtype": "fp8", "fast_accum": "false"}), "cuda:0").shown
    for dtype in ("fp32", "tf32", "bf16", "int8"):
        given = gemm.BENCHMARK.resolve({"dtype": dtype, "fast_accum": "false"})
        assert "fast_accum" not in given  # checked, then left out
    with pytest.raises(UserError, match="fast_accum='maybe' is not a valid bool"):
        gemm.BENCHMARK.resolve({"dtype": "fp32", "fast_accum": "maybe"})


def test_other_dtypes_keep_their_case_identity() -> None:
    """fp32 and the others compute what they did: their keys are those of the cases
    stored before fast_accum existed."""
    for dtype in ("fp32", "tf32", "fp16", "int8"):
        params = gemm.BENCHMARK.resolve({"shape": "4096", "dtype": dtype})
        before = Case.make("gemm", "old", "micro", {"shape": "4096", "dtype": dtype,
                                                     "batch": 1}, "cuda:0")
        assert gemm.BENCHMARK.case(params, "cuda:0").key == before.key


H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * 2**30)
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * 2**30)


def _gemm_cases(device: DeviceInfo, **overrides: tuple[str, ...]) -> list[dict[str, object]]:
    request = RunRequest(suite="standard", benches=("gemm",), overrides=overrides)
    return [dict(p.params) for p in expand(validate(request, REGISTRY), device)]


def test_the_standard_suite_times_fp8_with_and_without_fast_accum_on_cuda() -> None:
    cases = _gemm_cases(H100)
    fp8 = [c for c in cases if c["dtype"] == "fp8"]
    assert sorted((c["shape"], c["fast_accum"]) for c in fp8) == sorted(
        (s, f) for s in ("1024", "4096", "8192", "16384") for f in (True, False))
    assert all("fast_accum" not in c for c in cases if c["dtype"] != "fp8")
    # PyTorch does not hand the flag to hipBLASLt: ROCm times the default only.
    rocm_fp8 = [c for c in _gemm_cases(MI300X) if c["dtype"] == "fp8"]
    assert len(rocm_fp8) == 4 and {c["fast_accum"] for c in rocm_fp8} == {True}


def test_a_fast_accum_grid_does_not_multiply_the_other_dtypes() -> None:
    cases = _gemm_cases(H100, fast_accum=("true,false",))
    fp32 = [c for c in cases if c["dtype"] == "fp32"]
    assert len(fp32) == len({c["shape"] for c in fp32}) == 4
    assert len([c for c in cases if c["dtype"] == "fp8"]) == 8
