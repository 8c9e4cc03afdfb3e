"""Every architecture trains and infers for real on the CPU, in its tiny variant."""

from __future__ import annotations

import math

import pytest

from accelbench.benchmarks.models import infer, zoo
from accelbench.benchmarks.models.precision import Precision
from accelbench.benchmarks.models.trainer import ModelSetup, Trainer

TINY_MODELS = [name for name in zoo.MODEL_NAMES if name.endswith("-tiny")]
STEPS = 4


def _unsupported(name: str, dtype: str) -> str | None:
    """Why this CPU's kernels cannot run the model in `dtype` (oneDNN has no bf16 LSTM
    without AVX-512 BF16), or None."""
    import torch

    from accelbench.benchmarks.models import checks
    from accelbench.core.measurement import CaseSkipped

    setup = ModelSetup(zoo.MODELS[name], Precision(dtype), batch=4, seq=16, image=32)
    try:
        checks.check_lstm_precision(torch, setup, torch.device("cpu"))
    except CaseSkipped as exc:
        return str(exc)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", TINY_MODELS)
def test_training_lowers_a_finite_loss_on_a_fixed_batch(name: str, dtype: str) -> None:
    import torch

    unsupported = _unsupported(name, dtype)
    if unsupported:
        pytest.skip(unsupported)
    setup = ModelSetup(zoo.MODELS[name], Precision(dtype), batch=4, seq=16, image=32)
    trainer = Trainer(torch, setup, "cpu")
    losses = trainer.losses(STEPS)
    assert all(math.isfinite(loss) for loss in losses), losses
    assert losses[-1] < losses[0], losses
    if dtype == "bf16":  # autocast really ran the model in bfloat16
        assert trainer.batch is not None
        with trainer.autocast():
            x = trainer.batch.tensors.get("x")
            if x is not None:
                assert trainer.module(x).dtype == torch.bfloat16


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", TINY_MODELS)
def test_inference_measures_throughput_and_latency(execute, name: str, dtype: str) -> None:
    measurement = execute(infer.BENCHMARK, model=name, dtype=dtype, batch=2, seq=16, image=32,
                          steps_per_window=1)
    unsupported = _unsupported(name, dtype)
    if unsupported:  # the case says so, as tf32 on a CPU does, rather than crash
        assert (measurement.status, measurement.reason) == ("skipped", unsupported)
        return
    assert measurement.status == "ok", measurement.reason
    throughput = measurement.figure("throughput")
    assert throughput.unit == "sample/s" and throughput.value > 0
    p50, p90, p99 = (measurement.figure(f"p{q}").value for q in (50, 90, 99))
    assert 0 < p50 <= p90 <= p99
    assert measurement.details["mode"] == "inference"
    assert (measurement.figure("tokens") is not None) == zoo.MODELS[name].is_language_model


def test_an_lstm_precision_the_kernels_lack_skips_the_case(monkeypatch) -> None:
    import torch

    from accelbench.benchmarks.models import checks
    from accelbench.core.measurement import CaseSkipped

    class Unsupported(torch.nn.LSTM):
        def forward(self, *args, **kwargs):
            raise RuntimeError("could not create a primitive descriptor for the LSTM forward "
                               "propagation primitive.\nRun with ONEDNN_VERBOSE=all")

    monkeypatch.setattr(torch.nn, "LSTM", Unsupported)
    cpu = torch.device("cpu")
    for name, dtype in (("lstm-tiny", "fp32"), ("resnet-tiny", "bf16")):  # not probed
        checks.check_lstm_precision(torch, ModelSetup(zoo.MODELS[name], Precision(dtype), 2,
                                                      16, 32), cpu)
    with pytest.raises(CaseSkipped) as failed:
        checks.check_lstm_precision(torch, ModelSetup(zoo.MODELS["lstm-tiny"],
                                                      Precision("bf16"), 2, 16, 32), cpu)
    assert str(failed.value) == ("unsupported precision: bf16 LSTM on this CPU: could not "
                                 "create a primitive descriptor for the LSTM forward "
                                 "propagation primitive.")
