"""Per-rank memory estimates: exact parameter counts against built models, and the
activation, sharding and pipeline arithmetic checked against figures worked by hand."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from accelbench.benchmarks.models import zoo
from accelbench.benchmarks.scale.sizing import (
    Estimate,
    Layout,
    available_memory,
    embedding_parameters,
    estimate,
    fits,
    parameter_count,
    refusal,
)

GIB = 1 << 30
TINY_SPECS = [("llama-tiny", ""), ("gpt2-tiny", ""), ("llama-tiny", "layers=3,hidden=64"),
              ("gpt2-tiny", "layers=3,hidden=64,vocab=96")]


def _fp32(spec: zoo.ModelSpec, layout: Layout, batch: int, seq: int) -> Estimate:
    return estimate(spec, layout, batch=batch, seq=seq, param_bytes=4, compute_bytes=4)


def _bf16_acts(spec: zoo.ModelSpec, layout: Layout, batch: int, seq: int) -> Estimate:
    return estimate(spec, layout, batch=batch, seq=seq, param_bytes=4, compute_bytes=2)


# -- parameters --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "overrides"), TINY_SPECS)
def test_parameter_count_is_exact_for_the_built_model(name: str, overrides: str) -> None:
    import torch

    spec = zoo.get_spec(name, overrides)
    model = zoo.build(spec)
    assert parameter_count(spec) == sum(p.numel() for p in model.parameters())
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    assert embedding_parameters(spec) == sum(m.weight.numel() for m in embeddings)


def test_parameter_counts_of_full_shapes() -> None:
    # LLaMA 2 7B by hand: embedding and head 2 * 32000*4096 = 262,144,000; a layer has
    # 4*4096^2 (q, k, v, o) + 3*4096*11008 (gate, up, down) + 2*4096 (norms) = 202,383,360;
    # 32 of them = 6,476,267,520; final norm 4096: 6,738,415,616, the published 6.74B.
    assert parameter_count(zoo.get_spec("llama-7b")) == 6_738_415_616
    # GPT-2 small: the published 124,439,808 (tied head); its embeddings are
    # (50257 + 1024) * 768 = 39,383,808.
    assert parameter_count(zoo.get_spec("gpt2-small")) == 124_439_808
    assert embedding_parameters(zoo.get_spec("gpt2-small")) == 39_383_808


def test_other_architectures_are_refused() -> None:
    with pytest.raises(ValueError, match="llama and gpt2 only"):
        parameter_count(zoo.get_spec("bert-tiny"))
    with pytest.raises(ValueError, match="llama and gpt2 only"):
        _fp32(zoo.get_spec("vit-tiny"), Layout(), 1, 16)


# -- sharding ----------------------------------------------------------------------------


def test_fsdp_shards_the_state_over_dp_and_replication_does_not() -> None:
    spec, n = zoo.get_spec("llama-1b"), 1_235_814_400
    sharded = [_fp32(spec, Layout(dp=dp, fsdp=True), 2, 256) for dp in (1, 2, 4, 8)]
    assert [e.parameters for e in sharded] == [4 * n, 2 * n, n, n // 2]
    assert [e.optimizer for e in sharded] == [8 * n, 4 * n, 2 * n, n]
    assert all(a.total > b.total for a, b in itertools.pairwise(sharded))
    replicated = {_fp32(spec, Layout(dp=dp), 2, 256).total for dp in (1, 2, 4, 8)}
    assert len(replicated) == 1
    # Replication gathers nothing; FSDP gathers the largest unit twice (prefetch), here the
    # embedding, 128256*2048 = 262,668,288 parameters at 4 B.
    assert _fp32(spec, Layout(dp=8), 2, 256).gathered == 0
    assert sharded[-1].gathered == 2 * 262_668_288 * 4


def test_keeping_the_gathered_model_after_forward_costs_a_whole_unsharded_copy() -> None:
    spec = zoo.get_spec("llama-1b")
    resharded = _fp32(spec, Layout(dp=8, fsdp=True), 2, 256)
    kept = _fp32(spec, Layout(dp=8, fsdp=True, reshard_after_forward=False), 2, 256)
    assert kept.gathered - resharded.gathered == 4 * 1_235_814_400


# -- activations (Korthikanti et al. 2022) ----------------------------------------------
# GPT-2 small, one sequence of 1024 in 2-byte activations: s*b*h = 1024*768 = 786,432 and
# 5*a*s/h = 5*12*1024/768 = 80. Per layer: 786,432 * (34 + 80) = 89,653,248 B; 12 layers:
# 1,075,838,976 B.
GPT2_LAYER = 89_653_248
GPT2_ALL_LAYERS = 1_075_838_976


def test_activations_follow_the_paper_without_parallelism() -> None:
    got = _bf16_acts(zoo.get_spec("gpt2-small"), Layout(), 1, 1024)
    assert got.activations == GPT2_ALL_LAYERS
    # Twice the bytes in fp32.
    assert _fp32(zoo.get_spec("gpt2-small"), Layout(), 1, 1024).activations == \
        2 * GPT2_ALL_LAYERS


def test_tensor_parallelism_divides_activations_and_sequence_parallelism_more() -> None:
    spec = zoo.get_spec("gpt2-small")
    # t=2: 786,432 * (10 + 24/2 + 80/2) * 12 = 786,432 * 62 * 12.
    tp = _bf16_acts(spec, Layout(tp=2), 1, 1024)
    assert tp.activations == 786_432 * 62 * 12
    # With sequence parallelism every term is split: 786,432 / 2 * 114 * 12.
    sp = _bf16_acts(spec, Layout(tp=2, sequence_parallel=True), 1, 1024)
    assert sp.activations == 393_216 * 114 * 12
    assert sp.activations < tp.activations < GPT2_ALL_LAYERS


def test_checkpointing_keeps_layer_inputs_and_one_layer() -> None:
    spec = zoo.get_spec("gpt2-small")
    # 12 inputs of 2*s*b*h = 1,572,864 B, plus one layer recomputed in full.
    got = _bf16_acts(spec, Layout(checkpointing=True), 1, 1024)
    assert got.activations == 12 * 1_572_864 + GPT2_LAYER
    # Sequence parallel shards the kept inputs too.
    sp = _bf16_acts(spec, Layout(tp=2, sequence_parallel=True, checkpointing=True), 1, 1024)
    assert sp.activations == 12 * 786_432 + GPT2_LAYER // 2


def test_llama_mlp_is_counted_at_its_width() -> None:
    # LLaMA 7B, b=1, s=512: s*b*h = 2,097,152; attention and norms 15, SwiGLU MLP
    # 2 + 8*11008/4096 = 23.5, scores 5*32*512/4096 = 20: 58.5 per layer at 2 bytes.
    got = _bf16_acts(zoo.get_spec("llama-7b"), Layout(), 1, 512)
    assert got.activations == 2_097_152 * 58.5 * 32
    assert "SwiGLU" in got.formula and "Korthikanti" in got.formula


# -- pipelines ---------------------------------------------------------------------------


def test_gpipe_holds_every_microbatch_and_1f1b_at_most_pp() -> None:
    spec = zoo.get_spec("gpt2-small")
    # Two sequences per microbatch: 2 * 89,653,248 B a layer, 6 layers a stage.
    per_microbatch = 6 * 2 * GPT2_LAYER

    def held(schedule: str, microbatches: int) -> int:
        layout = Layout(pp=2, microbatches=microbatches, schedule=schedule)
        return _bf16_acts(spec, layout, 2 * microbatches, 1024).activations

    assert [held("gpipe", m) for m in (1, 2, 4, 8)] == \
        [per_microbatch * m for m in (1, 2, 4, 8)]
    assert [held("1f1b", m) for m in (1, 2, 4, 8)] == \
        [per_microbatch, 2 * per_microbatch, 2 * per_microbatch, 2 * per_microbatch]


def test_interleaving_holds_more_than_1f1b_by_megatrons_factor() -> None:
    # 16 layers over pp=4: 1F1B's first rank holds 4 microbatches of 4 layers = 16 layers'
    # worth. Interleaved with 2 stages a rank: 4*2 + 4 - 1 = 11 chunks of 2 layers = 22,
    # that is 16 * (1 + (pp-1)/(pp*v)) = 16 * 1.375.
    spec = zoo.get_spec("llama-tiny", "layers=16")
    one = _fp32(spec, Layout(pp=4, microbatches=8), 8, 32)
    inter = _fp32(spec, Layout(pp=4, microbatches=8, schedule="interleaved-1f1b",
                               stages_per_rank=2), 8, 32)
    assert inter.activations * 16 == one.activations * 22


def test_a_pipeline_stage_holds_its_share_of_the_layers() -> None:
    spec = zoo.get_spec("llama-7b")
    whole = _fp32(spec, Layout(), 4, 512)
    staged = _fp32(spec, Layout(pp=4, microbatches=4), 4, 512)
    # The first rank counts: 4 microbatches of 8 layers in flight there outweigh the last
    # rank's logits. It holds 8 layers and the embedding: 8*202,383,360 + 131,072,000.
    assert "the first rank" in staged.formula
    assert staged.parameters == 4 * 1_750_138_880
    assert staged.parameters < whole.parameters // 3


def test_a_tied_head_is_a_copy_on_the_last_rank_which_counts_when_its_logits_dominate() -> None:
    # LLaMA 3.2 1B over pp=2, short sequences: the last rank's logits (128 tokens * 128256
    # * 8 B = 131 MB) outweigh the first rank's extra microbatch of 8 layers (about 124 MB).
    # It holds 8 layers of 60,821,504 parameters (q, o 2048x2048; k, v 2048x512;
    # gate, up, down 3*2048*8192; two norms), the final norm 2048 and its own copy of the
    # tied head 128256*2048 = 262,668,288: 749,242,368 parameters.
    spec = zoo.get_spec("llama-1b")
    got = _bf16_acts(spec, Layout(pp=2, microbatches=8), 8, 128)
    assert "the last rank" in got.formula
    assert got.parameters == 4 * 749_242_368
    assert got.workspace == 128 * 128_256 * 8


# -- a 7B model on an 80 GiB device ------------------------------------------------------


def test_llama_7b_in_fp32_needs_sharding_to_fit_80_gib() -> None:
    spec = zoo.get_spec("llama-7b")
    alone = _fp32(spec, Layout(), 1, 512)
    # fp32 weights 4 + gradients 4 + AdamW's two moments 8 = 16 B a parameter: 107.8e9 B,
    # and activations (2 * 2,097,152 * 58.5 * 32 = 7.85e9 B) come on top.
    assert alone.parameters + alone.gradients + alone.optimizer == 16 * 6_738_415_616
    assert alone.total > 7e9 * 16
    assert not fits(alone, 80 * GIB)
    # FSDP over 8: 107.8e9 / 8 = 13.5e9, activations 7.85e9 unsharded, two gathered layers
    # of 202.4e6 parameters at 4 B = 1.6e9, logits 512*32000*8 = 0.13e9: about 23.1e9 B,
    # under 90% of 80 GiB (77.3e9 B).
    sharded = _fp32(spec, Layout(dp=8, fsdp=True), 1, 512)
    assert 22e9 < sharded.total < 24e9
    assert fits(sharded, 80 * GIB)


def test_cpu_offload_moves_the_state_to_the_host() -> None:
    spec = zoo.get_spec("llama-7b")
    on_device = _fp32(spec, Layout(dp=8, fsdp=True), 1, 512)
    offloaded = _fp32(spec, Layout(dp=8, fsdp=True, cpu_offload=True), 1, 512)
    assert offloaded.parameters == offloaded.gradients == offloaded.optimizer == 0
    assert offloaded.host == on_device.parameters + on_device.gradients + on_device.optimizer
    assert offloaded.total == on_device.activations + on_device.gathered + on_device.workspace
    stored = json.loads(json.dumps(offloaded.to_dict()))
    assert stored["host"] == offloaded.host and "CPU offload" in stored["formula"]


def test_workspace_holds_fp32_logits_and_their_gradient_split_by_tp() -> None:
    spec = zoo.get_spec("gpt2-small")
    # 4 * 128 tokens * 50257 vocabulary * (4 + 4) B.
    assert _fp32(spec, Layout(), 4, 128).workspace == 4 * 128 * 50257 * 8
    assert _fp32(spec, Layout(tp=2), 4, 128).workspace == 4 * 128 * 50257 * 4


def test_inconsistent_layouts_are_refused() -> None:
    with pytest.raises(ValueError, match="interleaved"):
        Layout(pp=2, stages_per_rank=2)
    with pytest.raises(ValueError, match="schedule"):
        Layout(schedule="zero-bubble")
    with pytest.raises(ValueError, match="at least 1"):
        Layout(dp=0)
    with pytest.raises(ValueError, match="fsdp"):
        Layout(cpu_offload=True)


# -- refusing, and the memory there is ---------------------------------------------------


def test_refusal_is_one_line_naming_every_component() -> None:
    alone = _fp32(zoo.get_spec("llama-7b"), Layout(), 1, 512)
    line = refusal(alone, 80 * GIB, "cuda:0 (free device memory)")
    assert "\n" not in line
    assert line.startswith("does not fit: needs about 108 GiB per rank")
    for name in ("parameters", "gradients", "optimizer", "activations", "gathered",
                 "workspace"):
        assert f"{name} " in line
    assert "72.0 GiB usable on cuda:0" in line and "90% of 80.0 GiB" in line
    assert "shard further" in line


MEMINFO = """MemTotal:       65536000 kB
MemFree:         1024000 kB
MemAvailable:   32768000 kB
Buffers:          100000 kB
"""


def test_available_memory_on_cpu_shares_memavailable_between_ranks(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    per_rank, source = available_memory("cpu", 4, meminfo_path=str(meminfo))
    assert per_rank == 32768000 * 1024 // 4
    assert "MemAvailable" in source and "4 local rank" in source
    assert available_memory("cpu", 1, meminfo_path=str(meminfo))[0] == 32768000 * 1024


@pytest.mark.parametrize("text", ["MemTotal: 65536000 kB\n", "MemAvailable: lots kB\n",
                                  "MemAvailable 32768000 kB\n", "MemAvailable: ²768 kB\n",
                                  "\udcff\x00garbage"])
def test_available_memory_refuses_a_garbled_meminfo(tmp_path: Path, text: str) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_bytes(text.encode(errors="surrogateescape"))
    with pytest.raises(ValueError, match="MemAvailable"):
        available_memory("cpu", 2, meminfo_path=str(meminfo))
    with pytest.raises(ValueError, match="cannot read"):
        available_memory("cpu", 2, meminfo_path=str(tmp_path / "absent"))


def test_available_memory_on_a_gpu_is_its_free_memory() -> None:
    assert available_memory("cuda", 8, cuda_free=70 * GIB) == (70 * GIB, "free device memory")
    with pytest.raises(ValueError, match="mem_get_info"):
        available_memory("cuda", 1)
    with pytest.raises(ValueError, match="device type"):
        available_memory("mps", 1, cuda_free=GIB)
