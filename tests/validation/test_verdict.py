"""Tolerances, comparisons and verdicts: what every check's conclusion rests on."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing._comparison import _DTYPE_PRECISIONS

from accelbench.benchmarks.validation.verdict import (
    TOLERANCE_SCALE,
    TORCH_TESTING,
    Verdict,
    compare,
    conclude,
    exact_verdict,
    limit_verdict,
    tensors_verdict,
    tolerance_for,
)
from accelbench.core.measurement import CaseFailed, Figure
from accelbench.errors import UserError


@pytest.mark.parametrize(("name", "dtype"), [("fp64", torch.float64), ("fp32", torch.float32),
                                             ("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_the_default_tolerances_are_torch_testings(name, dtype):
    assert TORCH_TESTING[name] == _DTYPE_PRECISIONS[dtype]
    tolerance = tolerance_for(name)
    assert (tolerance.rtol, tolerance.atol) == _DTYPE_PRECISIONS[dtype]
    assert "torch.testing" in tolerance.basis


def test_tf32_and_fp8_state_their_tolerance_and_a_scale_multiplies_both():
    for name in ("tf32", "fp8"):
        assert "stated" in tolerance_for(name).basis
    scaled = tolerance_for("fp16", scale=4.0, factor=2.0, why="because")
    assert (scaled.rtol, scaled.atol) == pytest.approx((8e-3, 8e-5))
    assert "x2: because" in scaled.basis and scaled.scale == 4.0


def test_an_element_passes_within_atol_plus_rtol_times_its_magnitude():
    tol = tolerance_for("fp32")
    want = torch.tensor([1.0, 100.0, 0.0], dtype=torch.float64)
    allowed = tol.atol + tol.rtol * want.abs()
    inside = compare(torch, "x", (want + 0.9 * allowed).float(), want, tol)
    assert inside.passed and 0.5 < inside.used <= 1.0
    outside = compare(torch, "x", want + 2.0 * allowed, want, tol)
    assert outside.outside == 3 and outside.used == pytest.approx(2.0)
    # Against a stated magnitude, the same error passes where |expected| is 0.
    big = torch.full_like(want, 1e6)
    assert compare(torch, "x", want + 2.0 * allowed, want, tol, big).passed


def test_a_non_finite_result_fails_and_matching_infinities_do_not():
    tol = tolerance_for("fp32")
    want = torch.tensor([1.0, math.inf, 3.0], dtype=torch.float64)
    assert compare(torch, "x", want.clone(), want, tol).passed
    bad = compare(torch, "x", torch.tensor([math.nan, math.inf, 3.0]), want, tol)
    assert bad.nonfinite == 1 and bad.outside == 1 and math.isinf(bad.used)
    verdict = tensors_verdict([bad], tol, "op")
    assert verdict.problem is not None and "not finite" in verdict.problem
    assert verdict.error is None and not [f for f in verdict.figures() if f.name == "error"]


def test_a_result_of_another_shape_fails_with_both_shapes():
    with pytest.raises(CaseFailed, match=r"x: shape \(2,\), expected \(3,\)"):
        compare(torch, "x", torch.zeros(2), torch.zeros(3), tolerance_for("fp32"))


def test_the_worst_element_decides_the_figures_and_every_failing_result_is_named():
    tol = tolerance_for("fp16")
    want = torch.ones(4, dtype=torch.float64)
    good = compare(torch, "good", want + 1e-4, want, tol)
    bad = compare(torch, "bad", want + 0.01, want, tol)
    verdict = tensors_verdict([good, bad], tol, "matmul in fp16")
    assert verdict.problem is not None
    assert verdict.problem.startswith("wrong result: matmul in fp16: 4 of 4 elements of bad")
    assert "good" not in verdict.problem
    assert verdict.error == pytest.approx(0.01)
    assert verdict.tolerance == pytest.approx(tol.atol + tol.rtol)
    assert verdict.margin == pytest.approx(100 * (1 - 0.01 / (tol.atol + tol.rtol)))


def test_margin_is_100_without_error_and_absent_when_nothing_is_allowed():
    assert Verdict(0.0, 1e-3).margin == 100.0
    assert Verdict(5e-4, 1e-3).margin == pytest.approx(50.0)
    assert exact_verdict(0, "words", "bad").margin is None
    assert [f.name for f in exact_verdict(3, "words", "bad").figures()] == ["error",
                                                                           "tolerance"]
    assert limit_verdict(math.nan, 1.0, "", "no").problem == "no"
    assert limit_verdict(0.5, 1.0, "", "no").passed


def test_a_pass_is_a_result_without_timing_and_a_fail_keeps_its_figures():
    extra = Figure("final_loss", 0.1, "")
    result = conclude(Verdict(1e-6, 1e-5, extra=(extra,)), {"op": "x"})
    assert result.timing is None and result.time_name == ""
    assert [f.name for f in result.figures] == ["error", "tolerance", "margin", "final_loss"]
    assert result.details == {"op": "x", "verdict": "pass"}
    with pytest.raises(CaseFailed) as failed:
        conclude(Verdict(2e-5, 1e-5, problem="too far"), {"op": "x"})
    assert str(failed.value) == "too far"
    assert [f.name for f in failed.value.figures] == ["error", "tolerance", "margin"]
    assert failed.value.details["verdict"] == "fail"


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "abc"])
def test_the_tolerance_scale_must_be_a_positive_finite_number(text):
    with pytest.raises(UserError, match="tolerance_scale"):
        TOLERANCE_SCALE.parse(text, "numerics")
    assert TOLERANCE_SCALE.parse("0.5") == 0.5
