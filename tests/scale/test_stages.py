"""A pipeline stage computes what the whole model computes, whatever its transformers
release returns from a block: a tensor (transformers 4.54 on), a tuple of the hidden
states and more (4.53 and before), and, before 4.43, LLaMA blocks that compute their own
rotary embedding from the positions (the model holds none). Run for real on the CPU."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from accelbench.benchmarks.models import zoo
from accelbench.benchmarks.scale import forms, parallel, stages

pytestmark = pytest.mark.torch_api


def _model(name: str) -> Any:
    import torch

    return forms.build_model(torch, zoo.get_spec(name), "cpu")


def _ids(model: Any) -> Any:
    import torch

    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, model.config.vocab_size, (2, 16), generator=generator)


def _whole_stage(model: Any, arch: str) -> Any:
    """One stage that holds every block, the embeddings and the head."""
    layers = len(parallel.blocks(model, arch))
    return stages.make_stage_module(model, arch, (0, layers), first=True, last=True)


def _assert_stage_is_the_model(model: Any, arch: str, expected: Any) -> None:
    import torch

    with torch.no_grad():
        got = _whole_stage(model, arch)(_ids(model))
    torch.testing.assert_close(got, expected)


def _logits(model: Any) -> Any:
    import torch

    with torch.no_grad():
        return model(input_ids=_ids(model)).logits


def _tuple_blocks(model: Any, arch: str) -> None:
    """Each block returns (hidden states, None), as transformers 4.53 and before do."""
    from torch import nn

    class TupleBlock(nn.Module):
        def __init__(self, block: nn.Module) -> None:
            super().__init__()
            self.block = block

        def forward(self, hidden_states: Any, **kwargs: Any) -> tuple[Any, None]:
            out = self.block(hidden_states, **kwargs)
            return (out[0] if isinstance(out, tuple) else out), None

    layers = parallel.blocks(model, arch)
    for index, block in enumerate(layers):
        layers[index] = TupleBlock(block)


@pytest.mark.parametrize(("name", "arch"), [("llama-tiny", "llama"), ("gpt2-tiny", "gpt2")])
def test_a_stage_of_blocks_that_return_a_tensor_is_the_whole_model(name: str, arch: str
                                                                    ) -> None:
    model = _model(name)
    _assert_stage_is_the_model(model, arch, _logits(model))


@pytest.mark.parametrize(("name", "arch"), [("llama-tiny", "llama"), ("gpt2-tiny", "gpt2")])
def test_a_stage_of_blocks_that_return_a_tuple_is_the_whole_model(name: str, arch: str
                                                                   ) -> None:
    model = _model(name)
    expected = _logits(model)
    _tuple_blocks(model, arch)
    _assert_stage_is_the_model(model, arch, expected)


def test_a_stage_of_llama_blocks_with_their_own_rotary_embedding_is_the_whole_model() -> None:
    """LLaMA as transformers 4.40 to 4.42 build it: the model holds no rotary embedding,
    each block computes it from position_ids, takes no position_embeddings argument (its
    attention has no **kwargs) and returns a tuple."""
    from torch import nn

    model = _model("llama-tiny")
    expected = _logits(model)
    rotary = model.model.rotary_emb

    class OwnRotaryBlock(nn.Module):
        def __init__(self, block: nn.Module) -> None:
            super().__init__()
            self.block = block

        def forward(self, hidden_states: Any, attention_mask: Any = None,
                    position_ids: Any = None, past_key_value: Any = None,
                    output_attentions: bool = False, use_cache: bool = False,
                    cache_position: Any = None) -> tuple[Any]:
            out = self.block(hidden_states, attention_mask=attention_mask,
                             position_ids=position_ids,
                             position_embeddings=rotary(hidden_states, position_ids))
            return (out[0] if isinstance(out, tuple) else out),

    layers = model.model.layers
    for index, block in enumerate(layers):
        layers[index] = OwnRotaryBlock(block)
    del model.model.rotary_emb
    _assert_stage_is_the_model(model, "llama", expected)


def test_a_stage_s_first_exchange_receives_into_what_its_neighbour_sends() -> None:
    # PyTorch 2.9 sends the stage index as an int64 scalar and receives it into a float32
    # of one element: Gloo aborts on the size. The receive is made like the send.
    import torch
    import torch.distributed as dist

    def made() -> list[SimpleNamespace]:
        return [SimpleNamespace(op=dist.irecv, tensor=torch.zeros(1)),
                SimpleNamespace(op=dist.isend, tensor=torch.tensor(1)),
                SimpleNamespace(op=dist.isend, tensor=torch.tensor(1)),
                SimpleNamespace(op=dist.irecv, tensor=torch.zeros(1))]

    stage = SimpleNamespace(_get_init_p2p_neighbors_ops=made)
    stages.matched_first_exchange(stage)
    ops = stage._get_init_p2p_neighbors_ops()
    assert [(op.tensor.dtype, tuple(op.tensor.shape)) for op in ops] == [
        (torch.int64, ())] * 4
    stages.matched_first_exchange(SimpleNamespace())  # no such exchange: nothing to do
