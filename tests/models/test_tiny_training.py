"""Every architecture trains and infers for real on the CPU, in its tiny variant."""

from __future__ import annotations

import math

import pytest

from accelbench.benchmarks.models import infer, zoo
from accelbench.benchmarks.models.precision import Precision
from accelbench.benchmarks.models.trainer import ModelSetup, Trainer

TINY_MODELS = [name for name in zoo.MODEL_NAMES if name.endswith("-tiny")]
STEPS = 4


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", TINY_MODELS)
def test_training_lowers_a_finite_loss_on_a_fixed_batch(name: str, dtype: str) -> None:
    import torch

    setup = ModelSetup(zoo.MODELS[name], Precision(dtype), batch=4, seq=16, image=32)
    trainer = Trainer(torch, setup, "cpu")
    losses = trainer.losses(STEPS)
    assert all(math.isfinite(loss) for loss in losses), losses
    assert losses[-1] < losses[0], losses
    if dtype == "bf16":  # autocast really ran the model in bfloat16
        with trainer.autocast():
            x = trainer.batch.tensors.get("x")
            if x is not None:
                assert trainer.module(x).dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", TINY_MODELS)
def test_inference_measures_throughput_and_latency(execute, name: str, dtype: str) -> None:
    measurement = execute(infer.BENCHMARK, model=name, dtype=dtype, batch=2, seq=16, image=32,
                          steps_per_window=1)
    assert measurement.status == "ok", measurement.reason
    throughput = measurement.figure("throughput")
    assert throughput.unit == "sample/s" and throughput.value > 0
    p50, p90, p99 = (measurement.figure(f"p{q}").value for q in (50, 90, 99))
    assert 0 < p50 <= p90 <= p99
    assert measurement.details["mode"] == "inference"
    assert (measurement.figure("tokens") is not None) == zoo.MODELS[name].is_language_model
