"""Applying a parallel form to a zoo model with PyTorch's own APIs, in torchtitan's order:
tensor parallelism, then activation checkpointing, then torch.compile per block, then
FSDP2 (`fully_shard` on every block, then on the root).

- FSDP2: `torch.distributed.fsdp.fully_shard` over a 1-D mesh (or the data-parallel
  dimension of a 2-D one), with `reshard_after_forward`, a `MixedPrecisionPolicy`
  (bf16 parameters, gradients reduced in `reduce_dtype`) and `CPUOffloadPolicy`.
- Tensor parallelism (LLaMA): Megatron's plan through `parallelize_module`: q/k/v and the
  MLP's gate/up projections column-wise, o and down row-wise, so that each rank holds
  heads/tp heads and intermediate/tp of the MLP, and each block needs one all-reduce in
  forward after attention and one after the MLP. With sequence parallelism the norms run
  on a slice of the sequence (their inputs and outputs Shard(1)), the embedding's output
  is sequence-sharded and the LM head gathers it again, as in torchtitan's plan.
  GPT-2 fuses q, k and v into one Conv1D (`c_attn`), which PyTorch's plans cannot split by
  heads: its tensor-parallel cases are skipped, with that reason.

Dropout is switched off (p=0) everywhere, so that a parallel step computes the same
function as the single-device step it is checked against.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.core.measurement import CaseSkipped

if TYPE_CHECKING:
    from torch import nn

# The first PyTorch release with each public API this family uses.
NEEDS = {
    "fsdp": ("torch.distributed.fsdp", "fully_shard", "2.6"),
    "tp": ("torch.distributed.tensor.parallel", "parallelize_module", "2.5"),
    "pp": ("torch.distributed.pipelining", "PipelineStage", "2.5"),
    "mesh": ("torch.distributed.device_mesh", "init_device_mesh", "2.4"),
}


def require(torch: ModuleType, *apis: str) -> None:
    """CaseSkipped, with the release that has it, for an API this PyTorch lacks."""
    import importlib

    for api in apis:
        module, name, release = NEEDS[api]
        try:
            found = hasattr(importlib.import_module(module), name)
        except ImportError:
            found = False
        if not found:
            raise CaseSkipped(f"{module}.{name} is not in PyTorch {torch.__version__}: it "
                              f"needs PyTorch {release} or later")


def blocks(model: Any, arch: str) -> nn.ModuleList:
    """The transformer blocks of a zoo model (a transformers model), in order."""
    found: nn.ModuleList = model.model.layers if arch == "llama" else model.transformer.h
    return found


def no_dropout(model: nn.Module) -> None:
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def checkpoint_blocks(model: nn.Module, arch: str) -> None:
    """Every block recomputed in backward (non-reentrant checkpointing)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    layers = blocks(model, arch)
    for index, block in enumerate(layers):
        layers[index] = checkpoint_wrapper(block)


def compile_blocks(model: nn.Module, arch: str) -> None:
    for block in blocks(model, arch):
        block.compile()


def fsdp_policies(torch: ModuleType, dtype: str, reduce_dtype: str, offload: bool
                  ) -> dict[str, Any]:
    """fully_shard's keyword arguments for a precision and offload choice."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy

    kwargs: dict[str, Any] = {}
    if dtype == "bf16":
        reduce = torch.bfloat16 if reduce_dtype == "bf16" else torch.float32
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                   reduce_dtype=reduce)
    if offload:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    return kwargs


def shard(model: nn.Module, arch: str, mesh: Any, reshard: bool, policies: dict[str, Any]
          ) -> None:
    """FSDP2 on every block, then on the root (which holds the embeddings and the head)."""
    from torch.distributed.fsdp import fully_shard

    layers = blocks(model, arch)
    for index, block in enumerate(layers):
        # The last block's parameters are gathered again at once for backward.
        last = index == len(layers) - 1
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard and not last, **policies)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, **policies)


def tp_problem(arch: str, shape: dict[str, int], tp: int) -> str | None:
    """Why a model cannot be split `tp` ways by heads and MLP width, or None."""
    if tp == 1:
        return None
    if arch != "llama":
        return ("tensor parallelism: GPT-2 fuses q, k and v into one Conv1D (c_attn) that "
                "PyTorch's colwise plan cannot split by heads; use a LLaMA-style model")
    for key in ("heads", "kv_heads", "intermediate"):
        if shape[key] % tp:
            return (f"tensor parallelism over {tp} ranks needs {key} divisible by {tp} "
                    f"(it is {shape[key]}); change the shape with -p config={key}=...")
    return None


def tensor_parallel(model: nn.Module, mesh: Any, sequence_parallel: bool) -> None:
    """Megatron's plan on a LLaMA model over a 1-D mesh (see the module docstring)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    # Without sequence parallelism the blocks' inputs and outputs are whole (replicated)
    # tensors and only the projections are split; with it, they are sequence shards.
    out: dict[str, Any] = (
        {"output_layouts": Shard(1), "use_local_output": False} if sequence_parallel else {})
    plan: dict[str, Any] = {
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(**out),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(**out),
    }
    if sequence_parallel:
        plan.update({
            "input_layernorm": SequenceParallel(),
            "self_attn": PrepareModuleInput(
                input_kwarg_layouts={"hidden_states": Shard(1)},
                desired_input_kwarg_layouts={"hidden_states": Replicate()}),
            "post_attention_layernorm": SequenceParallel(),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                      desired_input_layouts=(Replicate(),)),
        })
        parallelize_module(model, mesh, {
            "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(),
                                                  output_layouts=Shard(1),
                                                  use_local_output=False),
            "model.norm": SequenceParallel(),
            "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        })
    for block in blocks(model, "llama"):
        parallelize_module(block, mesh, plan)
