"""GEMM on the GPU in every precision it offers, checked, with the math mode read back."""

from __future__ import annotations

import pytest
from gpu_runs import run_on_gpu

from accelbench.benchmarks.micro.gemm import GEMM_DTYPES
from accelbench.core.dtypes import fp8_torch_name, unsupported_reason

pytestmark = pytest.mark.gpu

SHAPE = "2048"  # fp8 and int8 need multiples of 16 and 8; a few ms per call in fp64


def offered(device) -> list[str]:
    """The precisions accelbench measures on this device (fp8 is tested on its own)."""
    return [d for d in GEMM_DTYPES if d != "fp8" and unsupported_reason(device, d) is None]


@pytest.fixture(scope="module")
def gemm_run(gpu, tmp_path_factory):
    dtypes = offered(gpu.device)
    store = tmp_path_factory.mktemp("gemm") / "results.sqlite"
    run = run_on_gpu(store, ["gemm"], {"shape": SHAPE}, dtypes=dtypes)
    return dtypes, {m.case.param_dict["dtype"]: m for m in run.measurements}


def test_every_offered_precision_runs_checked_against_float64(gemm_run, gpu):
    dtypes, by_dtype = gemm_run
    assert {"fp64", "fp32", "fp16"} <= set(dtypes)
    assert sorted(by_dtype) == sorted(dtypes)
    for dtype, m in by_dtype.items():
        if dtype == "tf32" and m.status == "skipped":
            continue  # a tf32 case that cannot engage TF32: checked below
        assert m.status == "ok", (dtype, m.reason)
        assert m.case.device == gpu.device.torch_device
        details = m.details
        assert (details["m"], details["n"], details["k"]) == (2048, 2048, 2048)
        assert details["check_rel_error_small"] <= details["check_tolerance"], dtype
        assert details["check_rel_error_full"] <= details["check_tolerance"], dtype
        throughput = m.figure("throughput")
        assert throughput.unit == ("OP/s" if dtype == "int8" else "FLOP/s")
        assert throughput.value > 0
        assert m.timings and all(s > 0 for s in m.samples)


def test_fp32_runs_without_tf32_and_tf32_engages_it_or_says_why_not(gemm_run, gpu):
    _, by_dtype = gemm_run
    fp32 = by_dtype["fp32"]
    assert fp32.status == "ok", fp32.reason
    assert fp32.details["tf32_in_effect"] is False
    assert isinstance(fp32.details["matmul_fp32_precision"], str)
    if "tf32" not in by_dtype:
        pytest.skip(f"tf32 is not offered here: {unsupported_reason(gpu.device, 'tf32')}")
    tf32 = by_dtype["tf32"]
    if tf32.status == "skipped":
        assert "tf32" in (tf32.reason or "").lower(), tf32.reason
    else:
        assert tf32.status == "ok", tf32.reason
        assert tf32.details["tf32_in_effect"] is True
        assert isinstance(tf32.details["matmul_fp32_precision"], str)


def test_fp8_runs_with_and_without_fast_accumulation(gpu, tmp_path):
    reason = unsupported_reason(gpu.device, "fp8")
    if reason:
        pytest.skip(f"fp8 is not offered here: {reason}")
    run = run_on_gpu(tmp_path / "results.sqlite", ["gemm"],
                     {"shape": SHAPE, "fast_accum": "true,false"}, dtypes=["fp8"])
    by_mode = {m.case.param_dict["fast_accum"]: m for m in run.measurements}
    assert sorted(by_mode) == [False, True]
    for fast, m in by_mode.items():
        assert m.status == "ok", (fast, m.reason)
        assert m.details["fp8_fast_accum"] is fast
        assert m.details["fp8_format"] == fp8_torch_name(gpu.device)
        assert m.details["check_rel_error_full"] <= m.details["check_tolerance"]
        throughput = m.figure("throughput")
        assert throughput is not None and throughput.value > 0
