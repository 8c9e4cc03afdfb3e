"""Mixed-precision training for real on the CPU (autocast fp16 with GradScaler("cpu"),
autocast bf16), and with the stack made wrong: a half-precision linear layer that
computes something else, a scaler that steps through an overflow."""

from __future__ import annotations

import pytest
import torch
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import amp

BENCH = amp.BENCHMARK


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_autocast_training_reaches_the_threshold_near_the_fp32_curve(dtype):
    m = run_check(BENCH, dtype=dtype)
    assert m.status == "ok", m.reason
    f = figures(m)
    assert f["final_loss"] <= f["loss_threshold"]
    assert f["error"] <= f["tolerance"] == amp.DISTANCE[dtype]
    curve, reference = m.details["loss_curve"], m.details["fp32_loss_curve"]
    assert len(curve) == len(reference) == 60
    assert curve[-1] < amp.LOSS_THRESHOLD * curve[0]
    assert m.details["overflow_step_skipped"] is (True if dtype == "fp16" else None)


@pytest.mark.slow
def test_a_half_precision_linear_layer_gone_wrong_leaves_the_fp32_curve(monkeypatch):
    real = torch.nn.functional.linear

    def linear(x, w, b=None):
        out = real(x, w, b)
        return out * 1.5 if out.dtype == torch.bfloat16 else out

    monkeypatch.setattr(torch.nn.functional, "linear", linear)
    m = run_check(BENCH, dtype="bf16")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("autocast bf16: the bf16 loss curve is ")
    assert "away from the fp32 curve, beyond 0.05" in m.reason
    assert figures(m)["error"] > 0.05


@pytest.mark.slow
def test_a_scaler_that_steps_through_an_overflow_fails(monkeypatch):
    def step(self, optimizer, *args, **kwargs):
        self.unscale_(optimizer)  # finds the inf, and steps anyway
        return optimizer.step()

    monkeypatch.setattr(torch.amp.GradScaler, "step", step)
    m = run_check(BENCH, dtype="fp16")
    assert m.status == "failed"
    assert m.reason is not None
    assert "GradScaler stepped despite an infinite gradient" in m.reason
    assert m.details["overflow_step_skipped"] is False


@pytest.mark.slow
def test_a_scaler_that_keeps_its_scale_after_an_overflow_fails(monkeypatch):
    real = torch.amp.GradScaler.update
    calls = []

    def update(self, new_scale=None):
        calls.append(1)
        scale = self.get_scale()
        real(self, new_scale)
        if self.get_scale() < scale:  # an overflow halved it: undo that
            real(self, scale)

    monkeypatch.setattr(torch.amp.GradScaler, "update", update)
    m = run_check(BENCH, dtype="fp16")
    assert calls and m.status == "failed"
    assert m.reason is not None
    assert "GradScaler's scale went from 65536 to 65536 after an overflow, not to 32768" in \
        m.reason
