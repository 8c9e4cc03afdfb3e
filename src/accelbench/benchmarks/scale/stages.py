"""A zoo model cut into pipeline stages, and the schedule that runs them
(`torch.distributed.pipelining`).

The blocks are shared out as evenly as they go (earlier stages take the extra ones); the
first stage also holds the embeddings, the last the final norm and the LM head. A stage's
forward is the model's own forward taken apart: LLaMA's rotary embedding is computed on
every stage from the positions (it has no weights; before transformers 4.43 each block
computes its own), and attention is causal through PyTorch's scaled-dot-product attention
with no mask, as the whole model runs it. A block's output is its hidden states, alone or
at the head of a tuple, as the transformers release returns them (`block_output`).

Schedules: GPipe (all forwards, then all backwards), 1F1B (one forward, one backward in
steady state: at most `stages` microbatches' activations in flight) and interleaved 1F1B
(two stages per rank, a smaller bubble). The loss of each microbatch is the next-token
cross-entropy, averaged over its tokens; the schedule scales the gradients by the number
of microbatches, so a step's gradient is that of the mean loss over the whole batch. A
token embedding tied to the LM head (GPT-2's) lives on the first and the last stage; the
two ranks sum their parts of its gradient every step (as Megatron-LM does), so that both
copies take the tied model's update.

On Gloo, each stage's first exchange with its neighbours (which a schedule makes before its
first step, so that NCCL sets up its communicators) is made to receive what it is sent:
PyTorch 2.9 sends a stage's index as an int64 scalar and receives it into one float32,
which NCCL never checks and Gloo aborts the process on ("Received data size doesn't match
expected size. 8 vs 4").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.scale.parallel import blocks

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

STAGES_PER_RANK = {"gpipe": 1, "1f1b": 1, "interleaved-1f1b": 2}


def split(layers: int, stages: int) -> list[tuple[int, int]]:
    """[start, end) of each stage's blocks, as even as they go, earlier stages larger."""
    if stages > layers:
        raise ValueError(f"{stages} pipeline stages need at least {stages} blocks; the model "
                         f"has {layers}")
    base, extra = divmod(layers, stages)
    bounds, start = [], 0
    for stage in range(stages):
        end = start + base + (1 if stage < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def stage_ranks(rank: int, ranks: int, schedule: str) -> list[int]:
    """The stages a rank runs: its own, and with interleaving also rank + ranks (looped)."""
    return [rank + ranks * loop for loop in range(STAGES_PER_RANK[schedule])]


def causal_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Next-token cross-entropy, as transformers' causal LM loss computes it."""
    import torch

    vocab = logits.shape[-1]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, vocab).float(), labels[:, 1:].reshape(-1))


def block_output(out: Tensor | tuple[Tensor, ...]) -> Tensor:
    """A block's hidden states: transformers' LLaMA blocks return them alone from 4.54 on,
    its GPT-2 blocks from a 5.x release on (5.0 still a tuple), and earlier releases a
    tuple that starts with them (attention weights or a cache after them)."""
    return out[0] if isinstance(out, tuple) else out


def make_stage_module(model: Any, arch: str, bounds: tuple[int, int], first: bool,
                      last: bool) -> nn.Module:
    from torch import nn

    class Stage(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            start, end = bounds
            self.embed: Any
            self.positions: Any
            self.rotary: Any = None
            self.layers = nn.ModuleList(list(blocks(model, arch))[start:end])
            if arch == "llama":
                base = model.model
                self.embed = base.embed_tokens if first else None
                # Before transformers 4.43 each block computes it from the positions.
                self.rotary = getattr(base, "rotary_emb", None)
                self.positions = None
            else:
                base = model.transformer
                self.embed = base.wte if first else None
                self.positions = base.wpe if first else None
            self.norm: Any = (base.norm if arch == "llama" else base.ln_f) if last else None
            self.head: Any = model.lm_head if last else None

        def forward(self, x: Tensor) -> Tensor:
            import torch

            positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
            if self.embed is not None:
                x = self.embed(x)
                if self.positions is not None:
                    x = x + self.positions(positions)
            kwargs: dict[str, Any] = {}
            if arch == "llama":
                kwargs = {"position_ids": positions, "attention_mask": None}
                if self.rotary is not None:  # before 4.43 attention takes no such argument
                    kwargs["position_embeddings"] = self.rotary(x, positions)
            for layer in self.layers:
                x = block_output(layer(x, **kwargs))
            if self.head is not None and self.norm is not None:
                x = self.head(self.norm(x))
            return x

    return Stage()


@dataclass
class Pipeline:
    """This rank's stages and the schedule that runs a step across every rank."""

    schedule: Any
    modules: Sequence[nn.Module]
    first: bool  # holds stage 0: feeds the batch in
    last: bool  # holds the last stage: gets the labels, computes the losses
    # An input embedding tied to the LM head (GPT-2), held by the first and the last
    # stage's ranks apart, and the group of those two ranks: each computes part of its
    # gradient, which they sum before the optimizer step, as the tied model would.
    tied: Any = None
    tied_group: Any = None

    def step(self, batch: Tensor) -> list[Tensor]:
        """One step's forwards and backwards; the microbatches' losses on the last stage
        (an empty list elsewhere)."""
        losses: list[Tensor] = []
        kwargs: dict[str, Any] = {}
        if self.last:
            kwargs = {"target": batch, "losses": losses}
        if self.first:
            self.schedule.step(batch, **kwargs)
        else:
            self.schedule.step(**kwargs)
        if self.tied is not None and self.tied_group is not None and (self.first or self.last):
            import torch

            torch.distributed.all_reduce(self.tied.grad, group=self.tied_group)
        return losses


def build(model: Any, arch: str, rank: int, ranks: int, schedule: str,
          microbatches: int, device: torch.device,
          loss_fn: Callable[[Tensor, Tensor], Tensor] = causal_lm_loss) -> Pipeline:
    from torch.distributed import pipelining

    per_rank = STAGES_PER_RANK[schedule]
    stages = ranks * per_rank
    bounds = split(len(blocks(model, arch)), stages)
    mine = stage_ranks(rank, ranks, schedule)
    modules = [make_stage_module(model, arch, bounds[s], s == 0, s == stages - 1).to(device)
               for s in mine]
    pipeline_stages: list[Any] = [pipelining.PipelineStage(m, s, stages, device)
                                  for m, s in zip(modules, mine, strict=True)]
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_backend() == "gloo":
        for stage in pipeline_stages:
            matched_first_exchange(stage)
    runner: Any
    if schedule == "interleaved-1f1b":
        runner = pipelining.ScheduleInterleaved1F1B(pipeline_stages, n_microbatches=microbatches,
                                                    loss_fn=loss_fn)
    else:
        kind = pipelining.ScheduleGPipe if schedule == "gpipe" else pipelining.Schedule1F1B
        runner = kind(pipeline_stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    tied, group = _tied_embedding(model, arch, ranks)
    return Pipeline(runner, modules, first=0 in mine, last=stages - 1 in mine, tied=tied,
                    tied_group=group)


def matched_first_exchange(stage: Any) -> None:
    """Make `stage`'s first exchange with its neighbours receive into tensors like the
    ones it sends (see the module's docstring); a PyTorch whose stages have no such
    exchange, or already match, is left as it is."""
    made_by = getattr(stage, "_get_init_p2p_neighbors_ops", None)
    if made_by is None:
        return
    import torch
    import torch.distributed as dist

    def matched() -> list[Any]:
        ops = made_by()
        sent = [op.tensor for op in ops if op.op is dist.isend]
        for op in ops:
            if op.op is dist.irecv and sent and (op.tensor.dtype, op.tensor.shape) != (
                    sent[0].dtype, sent[0].shape):
                op.tensor = torch.zeros_like(sent[0])
        return ops

    stage._get_init_p2p_neighbors_ops = matched


def _tied_embedding(model: Any, arch: str, ranks: int) -> tuple[Any, Any]:
    """The weight the input embedding shares with the LM head, and a group of the first
    and last ranks (made on every rank, as new_group requires), where they are two."""
    import torch

    embedding = model.model.embed_tokens if arch == "llama" else model.transformer.wte
    if ranks < 2 or embedding.weight is not model.lm_head.weight:
        return None, None
    return embedding.weight, torch.distributed.new_group([0, ranks - 1])
