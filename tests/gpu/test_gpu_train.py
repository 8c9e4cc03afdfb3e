"""Training bert-base in bf16 on the GPU: throughput, tokens, model FLOPs and MFU."""

from __future__ import annotations

import math

import pytest
from gpu_runs import run_on_gpu

from accelbench.core.peaks import lookup

pytestmark = pytest.mark.gpu

SEQ = 128


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    store = tmp_path_factory.mktemp("train") / "results.sqlite"
    run = run_on_gpu(store, ["train"], {"model": "bert-base", "dtype": "bf16", "batch": "8",
                                        "seq": str(SEQ), "steps_per_window": "2"})
    (m,) = run.measurements
    return m


def test_bert_base_trains_in_bf16_with_a_finite_loss(trained):
    assert trained.status == "ok", trained.reason
    details = trained.details
    assert details["model"] == "bert-base" and details["precision"] == "bf16 autocast"
    assert details["batch"] == 8 and details["seq"] == SEQ
    assert math.isfinite(details["loss_first"]) and math.isfinite(details["loss_last"])
    assert details["loss_scaling"] is False  # bf16 needs no gradient scaler
    assert details["peak_memory_source"] == "torch.cuda.max_memory_allocated"
    assert trained.figure("peak_memory").value > 0


def test_throughput_tokens_and_mfu_agree_with_one_another(trained, gpu):
    throughput, tokens = trained.figure("throughput"), trained.figure("tokens")
    model_flops, mfu = trained.figure("model_flops"), trained.figure("mfu")
    assert throughput.unit == "sample/s" and throughput.value > 0
    assert tokens.value == pytest.approx(throughput.value * SEQ, rel=1e-9)
    peaks = lookup(gpu.device)
    peak = peaks.dense_flops("bf16") if peaks else None
    assert model_flops.peak == peak
    if peak is None:
        assert mfu is None  # no published peak: no MFU
        pytest.skip(f"{gpu.device.name} has no published bf16 peak: no MFU to check")
    # MFU is the model FLOP rate as a share of the device's dense bf16 peak.
    assert mfu.unit == "%"
    assert mfu.value == pytest.approx(100 * model_flops.value / peak, rel=1e-6)
    assert 0 < mfu.value < 100
