"""The canary: an engine that computes what eager PyTorch computes passes; one with
wrong weights fails; dummy or unknown weights are skipped, and said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.benchmarks.llm.engines.canary import (
    canary_prompts,
    check,
    compare,
    eager_device,
)
from accelbench.benchmarks.llm.engines.endpoint import Endpoint, inprocess_endpoint
from accelbench.benchmarks.llm.engines.inprocess import running_engine
from accelbench.benchmarks.llm.engines.model_dir import model_dir

# Eager PyTorch and the in-process engine on a model made here: seconds on a CPU.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir("llama-tiny", root=tmp_path_factory.mktemp("models"))


def test_a_right_engine_passes_and_a_wrong_one_fails(tiny: Path) -> None:
    import torch

    with running_engine(tiny, dtype="float32") as engine:
        endpoint = inprocess_endpoint(engine)
        right = check(endpoint, max_tokens=8)
        assert right.ok and not right.skipped, right.detail
        assert (right.prompts, right.tokens) == (3, 24)
        with engine.manager.pause(), torch.no_grad():
            generator = torch.Generator().manual_seed(1)
            for p in engine.model.model.layers[-1].mlp.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * 0.5)
        wrong = check(endpoint, max_tokens=8)
    assert not wrong.ok
    assert "disagrees with eager PyTorch" in wrong.detail and "\n" not in wrong.detail
    assert wrong.mismatches


def test_near_ties_are_accepted_and_said(tiny: Path) -> None:
    prompts = canary_prompts(512)[:1]
    outputs = [[3, 4, 5, 6]]  # not what the model says, at every step
    strict = compare(tiny, prompts, outputs, max_tokens=4, tolerance=0.0)
    assert not strict.ok and len(strict.mismatches) >= 3
    lenient = compare(tiny, prompts, outputs, max_tokens=4, tolerance=float("inf"))
    assert lenient.ok and lenient.near_ties >= 3 and "near-tie" in lenient.detail


def test_short_output_fails(tiny: Path) -> None:
    result = compare(tiny, canary_prompts(512)[:1], [[]], max_tokens=4, tolerance=1.0)
    assert not result.ok and "gave 0 tokens of 4" in result.detail


def test_skipped_without_local_weights(tmp_path: Path) -> None:
    url = Endpoint(url="http://127.0.0.1:9", model="m", name="vllm", version="0")
    result = check(url)
    assert result.ok and result.skipped and "weights are not local" in result.detail
    dummy = model_dir("llama-tiny", weights=False, root=tmp_path)
    result = check(Endpoint(url="http://127.0.0.1:9", model="m", name="vllm", version="0",
                            options={"weights": False}, weights=dummy))
    assert result.skipped and "dummy weights" in result.detail


def test_eager_runs_beside_the_engine_only_where_it_fits(tiny: Path) -> None:
    need = (tiny / "model.safetensors").stat().st_size * 5 // 4  # float32 already
    assert eager_device(tiny, "cuda:1", free_bytes=need + 1) == "cuda:1"
    assert eager_device(tiny, "cuda:1", free_bytes=need // 2) == "cpu"
    assert eager_device(tiny, "cpu") == "cpu"
