"""Text generation: prefill and decode timed apart, logits checked against eager fp32."""

from __future__ import annotations

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.models import generate

BENCH = REGISTRY.get("generate")
GPT2 = {"model": "gpt2-tiny", "batch": 2, "prompt": 8, "new_tokens": 4}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("model", ["gpt2-tiny", "llama-tiny"])
def test_generation_reports_prefill_and_decode_apart(execute, model) -> None:
    m = execute(BENCH, **{**GPT2, "model": model})
    assert m.status == "ok", m.reason
    assert m.primary.name == "tokens" and m.primary.unit == "token/s"
    ttft, tpot = m.figure("ttft").value, m.figure("tpot").value
    assert ttft > 0 and tpot > 0
    assert m.figure("ttft_p90").value >= ttft and m.figure("tpot_p90").value >= tpot
    assert m.figure("decode_tokens").value == pytest.approx(2 / tpot)
    assert m.figure("prefill_tokens").value == pytest.approx(2 * 8 / ttft)
    # One timed call generates batch x new_tokens tokens.
    assert m.rates[0].amount == 2 * 4
    assert m.details["parity"]["ok"] and m.details["parity"]["top1"] == 1.0
    assert (m.details["prompt"], m.details["new_tokens"]) == (8, 4)


def test_a_wrong_kv_cache_path_fails_the_parity_check(execute, monkeypatch) -> None:
    real = generate.Decoder.__call__

    def forgetful(self, ids, cache):  # decodes every token without what came before
        out, _ = real(self, ids, None)
        return out, cache

    monkeypatch.setattr(generate.Decoder, "__call__", forgetful)
    m = execute(BENCH, **GPT2)
    assert m.status == "failed"
    assert m.reason.startswith("parity with eager fp32 failed: ")
    assert "cosine" in m.reason and not m.timings


def test_generation_skips_what_it_does_not_measure(execute) -> None:
    encoder = execute(BENCH, **{**GPT2, "model": "bert-tiny"})
    assert encoder.status == "skipped" and "decoder language model" in encoder.reason
    onnx = execute(BENCH, **GPT2, engine="onnxruntime")
    assert onnx.status == "skipped" and "infer-engine" in onnx.reason


def test_the_default_model_is_generated_not_skipped(execute) -> None:
    # The default model, made small through its config: random weights, no download.
    m = execute(BENCH, config="layers=1,hidden=32,heads=2", prompt=4, new_tokens=2)
    assert m.status == "ok", m.reason
    assert m.case.param_dict["model"] == generate.DEFAULT_MODEL
