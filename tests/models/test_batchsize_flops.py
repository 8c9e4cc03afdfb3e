"""The batch-size search and the model-FLOP formulas, checked by hand."""

from __future__ import annotations

import pytest

from accelbench.benchmarks.models import batchsize, flops, zoo


def _fits_below(limit: int):
    return lambda batch: batch <= limit


@pytest.mark.parametrize(
    ("start", "limit", "expected"),
    [
        (8, 100, range(95, 101)),  # doubles to 64, fails at 128, bisects to within 1/16
        (8, 64, [64]),
        (256, 37, range(35, 38)),  # the start fails: halves down, then bisects
        (1, 1, [1]),
        (1, 0, [0]),  # nothing fits
        (4, 10_000, [batchsize.MAX_BATCH]),  # capped
    ],
)
def test_search_doubles_then_bisects(start: int, limit: int, expected) -> None:
    found = batchsize.search(_fits_below(limit), start)
    assert found.batch in expected
    assert all(ok == (batch <= limit) for batch, ok in found.tried)
    assert len(found.tried) <= 16


def test_search_tries_in_order_and_stops_at_the_cap() -> None:
    found = batchsize.search(_fits_below(10**9), 1000, limit=4096)
    assert [b for b, _ in found.tried] == [1000, 2000, 4000, 4096]


def test_transformer_flops_follow_the_stated_formula() -> None:
    estimate = flops.transformer_flops(n_params=1000, layers=2, hidden=8, seq=16)
    per_token = 2 * 1000 + 4 * 2 * 16 * 8
    assert estimate.forward_per_sample == per_token * 16
    assert estimate.per_step(samples=3, training=True) == 3 * 3 * per_token * 16
    assert estimate.per_step(samples=3, training=False) == 3 * per_token * 16


@pytest.mark.slow
def test_lm_parameters_count_a_tied_head_once_and_skip_lookups() -> None:
    import torch

    with torch.device("meta"):
        gpt2 = zoo.build(zoo.MODELS["gpt2-small"])
        llama = zoo.build(zoo.MODELS["llama-7b"])
    # GPT-2: everything but the 1024 learned positions (the tied token embedding is the head).
    assert flops.matmul_parameters(torch, gpt2) == 124_439_808 - 1024 * 768
    # LLaMA-7B: the untied input embedding is a lookup; the LM head is a matmul.
    assert flops.matmul_parameters(torch, llama) == 6_738_415_616 - 32000 * 4096


def test_lstm_flops_by_hand() -> None:
    estimate = flops.lstm_flops(inputs=4, hidden=3, layers=2, classes=5, seq=7)
    by_hand = 7 * (8 * 3 * (4 + 3) + 8 * 3 * (3 + 3)) + 2 * 3 * 5
    assert estimate.forward_per_sample == by_hand


def test_cnn_flops_are_counted_on_the_meta_device() -> None:
    import torch

    estimate = flops.counted_flops(torch, zoo.MODELS["resnet50"], image=224)
    assert estimate.forward_per_sample == pytest.approx(8.18e9, rel=0.01)  # 4.09 GMACs
    vit = flops.counted_flops(torch, zoo.MODELS["vit-b16"], image=224)
    assert vit.forward_per_sample == pytest.approx(35.1e9, rel=0.01)  # 17.6 GMACs
