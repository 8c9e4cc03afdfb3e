"""Output parity: each check on outputs made to fail it alone."""

from __future__ import annotations

import math

import pytest
import torch

from accelbench.benchmarks.models.engines import parity

TOL = parity.Tolerance(max_rel=1e-3, cosine=0.9999, top1=0.99)


def _logits() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(8, 5, 16, generator=gen)


def test_identical_outputs_pass_with_zero_error() -> None:
    ref = _logits()
    check = parity.measure(torch, ref, ref.clone(), TOL, classes=True)
    assert check.ok and check.failures == ()
    assert (check.max_abs, check.max_rel, check.top1) == (0.0, 0.0, 1.0)
    assert check.cosine == pytest.approx(1.0)


def test_a_scaled_output_fails_the_error_alone() -> None:
    ref = _logits()
    check = parity.measure(torch, ref, ref * 1.01, TOL, classes=True)
    assert check.cosine == pytest.approx(1.0) and check.top1 == 1.0
    assert check.max_rel == pytest.approx(0.01, rel=1e-4)
    [failure] = check.failures
    assert failure.startswith("max relative error 0.01 > 0.001")


def test_an_output_in_another_direction_fails_the_cosine_alone() -> None:
    # A large reference element keeps the scale-relative error small while many small
    # elements change sign: the direction moves, the largest error does not.
    ref = torch.full((4, 100), 0.01)
    ref[0, 0] = 100.0
    out = ref.clone()
    out[1:] = -0.01
    out[0, 1:] = -0.01
    tol = parity.Tolerance(max_rel=1e-3, cosine=0.99999999, top1=0.0)
    check = parity.measure(torch, ref, out, tol, classes=False)
    assert check.max_rel <= tol.max_rel
    assert check.top1 is None
    [failure] = check.failures
    assert failure.startswith("cosine similarity")


def test_swapped_near_ties_fail_the_top1_agreement_alone() -> None:
    ref = torch.zeros(10, 4)
    ref[:, 0], ref[:, 1], ref[:, 2] = 10.0, 9.9999, 5.0
    out = ref.clone()
    out[:3, 0], out[:3, 1] = 9.9999, 10.0  # three rows of ten now pick class 1
    check = parity.measure(torch, ref, out, TOL, classes=True)
    assert check.max_rel == pytest.approx(1e-5, rel=1e-2) and check.cosine > 0.99999
    assert check.top1 == pytest.approx(0.7)
    [failure] = check.failures
    assert failure == "top-1 agreement 70.0% < 99%"


def test_non_finite_or_misshapen_outputs_fail_every_figure() -> None:
    ref = _logits()
    bad = ref.clone()
    bad[0, 0, 0] = math.nan
    check = parity.measure(torch, ref, bad, TOL, classes=True)
    assert not check.ok and math.isinf(check.max_abs)
    assert check.to_dict()["max_abs"] == "inf"  # stored records are JSON
    short = parity.measure(torch, ref, ref[:4], TOL, classes=True)
    assert not short.ok and short.top1 == 0.0


def test_the_reason_gives_every_figure_and_what_was_out_of_tolerance() -> None:
    ref = _logits()
    check = parity.measure(torch, ref, ref * 2, TOL, classes=True)
    reason = check.reason()
    assert reason.startswith("parity with eager fp32 failed: max relative error 1 > 0.001")
    for figure in ("max abs error", "max relative error 1", "cosine 1.000000",
                   "top-1 agreement 100.0%"):
        assert figure in reason


@pytest.mark.parametrize(("engine", "dtype", "kind"), [
    ("eager", "fp32", "eager"), ("compile", "bf16", "graph"),
    ("onnxruntime", "fp16", "graph"), ("int8", "fp32", "int8"),
])
def test_tolerances_are_per_engine_kind_and_precision(engine, dtype, kind) -> None:
    assert parity.kind(engine) == kind
    assert parity.tolerance(engine, dtype) is parity.TOLERANCES[(kind, dtype)]
    # Looser for lower precisions and graph engines, never looser than int8's.
    assert parity.tolerance("eager", "fp32").max_rel <= parity.tolerance(engine, dtype).max_rel
