"""Per-rank memory of a training case at scale, estimated from the model's shape alone.

Before a distributed case runs, its parallel form (`Layout`) and the model's shape give
what one rank will hold (`Estimate`): a case that cannot fit is refused with one line
(`refusal`) instead of running out of memory, and the estimate is stored beside the
measured peak. Pure arithmetic, no torch; LLaMA and GPT-2 only, the models these forms
are written for. Activations follow Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models" (per layer and microbatch, 2-byte values):
s*b*h*(34 + 5*a*s/h); with tensor parallelism t, s*b*h*(10 + 24/t + 5*a*s/(h*t)); with
sequence parallelism as well, s*b*h/t*(34 + 5*a*s/h). The paper's 34 = attention 11 +
norms 4 + a 4h-wide GELU MLP 19; LLaMA's SwiGLU MLP of width I keeps 2 + 8*I/h instead.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from accelbench.benchmarks.models.zoo import ModelSpec
from accelbench.core.units import format_bytes
from accelbench.core.untrusted import is_decimal

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
LOGIT_BYTES = 4 * 2  # the logits and their gradient, both fp32 (the loss upcasts)


@dataclass(frozen=True)
class Layout:
    """The parallel form of a case: how a model and its batch are shared out over ranks."""

    dp: int = 1  # data-parallel ranks; FSDP shards parameters, gradients and state over them
    tp: int = 1  # tensor-parallel degree
    pp: int = 1  # pipeline stages (ranks)
    fsdp: bool = False  # False with dp > 1: plain replication, every rank holds everything
    reshard_after_forward: bool = True
    sequence_parallel: bool = False
    checkpointing: bool = False  # activation checkpointing per block
    microbatches: int = 1  # pipeline microbatches per step
    schedule: str = "1f1b"
    stages_per_rank: int = 1  # 2 for interleaved 1F1B
    cpu_offload: bool = False  # FSDP's: parameters, gradients and state live in host memory

    def __post_init__(self) -> None:
        if min(self.dp, self.tp, self.pp, self.microbatches, self.stages_per_rank) < 1:
            raise ValueError(f"a layout's degrees must be at least 1: {self}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown pipeline schedule {self.schedule!r} ({SCHEDULES})")
        if self.stages_per_rank > 1 and self.schedule != "interleaved-1f1b":
            raise ValueError("more than one stage per rank needs the interleaved-1f1b schedule")
        if self.cpu_offload and not self.fsdp:
            raise ValueError("CPU offload is FSDP's: it needs fsdp")


@dataclass(frozen=True)
class Estimate:
    """Bytes one rank holds on its device, per component; `host`: offloaded to host memory."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    gathered: int  # transient unsharded parameters that FSDP all-gathers
    workspace: int  # logits and their gradient
    total: int
    formula: str  # how it was counted, stored with the results
    host: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Parts:
    """A model's parameters by where they sit: the pieces a stage or FSDP unit holds."""

    embedding: int  # the input embedding(s): tokens, and GPT-2's positions
    block: int  # one transformer layer
    head: int  # the final norm, and the LM head's weight unless it is tied
    head_weight: int  # vocab x hidden, the LM head's weight, tied or not
    tied: bool


def _parts(spec: ModelSpec) -> _Parts:
    if spec.arch not in ("llama", "gpt2"):
        raise ValueError(f"{spec.name}: memory estimates cover llama and gpt2 only, "
                         f"not {spec.arch}")
    s = spec.shape
    h, vocab = s["hidden"], s["vocab"]
    if spec.arch == "llama":
        width = s["heads"] * (h // s["heads"])
        kv = s["kv_heads"] * (h // s["heads"])
        block = h * width * 2 + h * kv * 2 + 3 * h * s["intermediate"] + 2 * h
        tied = bool(s.get("tied", False))
        return _Parts(vocab * h, block, h + (0 if tied else vocab * h), vocab * h, tied)
    # GPT-2: two LayerNorms, c_attn h->3h, c_proj h->h, c_fc h->4h, c_proj 4h->h, biased
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    return _Parts((vocab + s["max_positions"]) * h, block, 2 * h, vocab * h, True)


def parameter_count(spec: ModelSpec) -> int:
    """Exact parameters of the built LLaMA or GPT-2 model (a tied head counted once)."""
    p = _parts(spec)
    return p.embedding + spec.shape["layers"] * p.block + p.head


def embedding_parameters(spec: ModelSpec) -> int:
    """The input embeddings' parameters, which torchtitan's MFU leaves out of 6*N."""
    return _parts(spec).embedding


@dataclass(frozen=True)
class _Rank:
    """What one pipeline rank holds: the first (embeddings) or the last (head)."""

    name: str
    parameters: int
    largest_unit: int  # the largest piece FSDP gathers at once: a block, embedding, head
    chunks: int  # stage-chunks of activations in flight (microbatch x virtual stage)
    logits: bool


def _ranks(spec: ModelSpec, layout: Layout) -> tuple[list[_Rank], int]:
    """The first and last pipeline ranks, and the layers of one stage-chunk."""
    p, pp, v, m = _parts(spec), layout.pp, layout.stages_per_rank, layout.microbatches
    if pp == 1:  # the batch is the microbatch: one in flight, through every layer
        return [_Rank("the only rank", parameter_count(spec),
                      max(p.block, p.embedding, p.head), 1, True)], spec.shape["layers"]
    chunk = math.ceil(spec.shape["layers"] / (pp * v))  # earlier stages take the extras
    blocks = v * chunk * p.block
    head = p.head + (p.head_weight if p.tied else 0)  # a tied head is a copy on the last rank
    if layout.schedule == "gpipe":
        first, last = m * v, m * v
    elif layout.schedule == "1f1b":
        first, last = min(pp, m), 1
    else:  # Megatron's interleaved warm-up, plus the one forward ahead of each backward
        first, last = min(pp * v + pp - 1, m * v), min((v - 1) * pp + 1, m * v)
    return [_Rank("the first rank", blocks + p.embedding, max(p.block, p.embedding), first,
                  False),
            _Rank("the last rank", blocks + head, max(p.block, head), last, True)], chunk


def _per_layer(spec: ModelSpec, layout: Layout, b: int, seq: int) -> tuple[Fraction, Fraction]:
    """(a layer's activations, its input alone) for one microbatch, in 2-byte units."""
    s, t, sp = spec.shape, layout.tp, layout.sequence_parallel
    h = s["hidden"]
    if spec.arch == "llama":  # input; gate, up, silu(gate), their product: I wide each
        mlp, mlp_replicated = 2 + Fraction(8 * s["intermediate"], h), Fraction(2)
    else:  # input 2, GELU input and output 8 + 8, dropout mask 1
        mlp, mlp_replicated = Fraction(19), Fraction(3)
    full = 15 + mlp  # + attention 11 and two norms 4 (the paper's, dropout masks included)
    replicated = 7 + mlp_replicated  # norms 4, attention's input 2 and its dropout mask 1
    scores = Fraction(5 * s["heads"] * seq, h)
    sbh = seq * b * h
    if sp:
        return sbh * (full + scores) / t, Fraction(2 * sbh, t)
    return sbh * (replicated + (full - replicated + scores) / t), Fraction(2 * sbh)


def _count(spec: ModelSpec, layout: Layout, rank: _Rank, chunk: int, b: int, seq: int,
           param_bytes: int, compute_bytes: int, opt_bytes: int) -> Estimate:
    shard = layout.tp * (layout.dp if layout.fsdp else 1)
    params = math.ceil(rank.parameters / shard)
    weights, optimizer = params * param_bytes, params * opt_bytes
    host = 2 * weights + optimizer if layout.cpu_offload else 0
    if layout.cpu_offload:
        weights, optimizer = 0, 0
    full, kept = (x * compute_bytes / 2 for x in _per_layer(spec, layout, b, seq))
    held = rank.chunks * chunk
    activations = math.ceil(held * kept + full if layout.checkpointing else held * full)
    gathered = 0
    if layout.fsdp:
        units = 2 * rank.largest_unit + (0 if layout.reshard_after_forward else rank.parameters)
        gathered = math.ceil(units * param_bytes / layout.tp)
    workspace = math.ceil(b * seq * spec.shape["vocab"] * LOGIT_BYTES / layout.tp) \
        if rank.logits else 0
    return Estimate(weights, weights, optimizer, activations, gathered, workspace,
                    2 * weights + optimizer + activations + gathered + workspace,
                    _formula(spec, layout, rank, held, b, seq, shard, param_bytes,
                             compute_bytes, opt_bytes), host)


def _formula(spec: ModelSpec, layout: Layout, rank: _Rank, held: int, b: int, seq: int,
             shard: int, param_bytes: int, compute_bytes: int, opt_bytes: int) -> str:
    tp, mlp = layout.tp, ("2 + 8*I/h (SwiGLU)" if spec.arch == "llama" else "19 (GELU)")
    act = ("s*b*h/t*(15 + mlp + 5*a*s/h)" if layout.sequence_parallel
           else "s*b*h*(r + (15 + mlp - r + 5*a*s/h)/t), r = 7 + the MLP's input")
    flight = f"{layout.schedule} bound, {layout.microbatches} microbatches" if layout.pp > 1 \
        else "one microbatch"
    text = (f"{spec.name}, dp={layout.dp}{' fsdp' if layout.fsdp else ''} tp={tp} "
            f"pp={layout.pp}, {rank.name} ({rank.parameters} parameters): parameters and "
            f"gradients {param_bytes} B, optimizer state {opt_bytes} B per parameter, / {shard}"
            f" (tp x fsdp's dp; TP's replicated norms counted as sharded); activations "
            f"(Korthikanti et al. 2022) {act}, mlp = {mlp}, t={tp}, b={b}, s={seq}, in "
            f"2-byte figures x {compute_bytes}/2, {held} layer-microbatches held ({flight})")
    if layout.checkpointing:
        text += (f"; checkpointed: each layer's input 2*s*b*h{'/t' * layout.sequence_parallel}"
                 " plus one layer's whole during its recompute")
    text += "; the 5*a*s/h scores term is kept: an upper bound where fused attention keeps none"
    if layout.fsdp:
        text += (f"; gathered: 2 x the largest unit ({rank.largest_unit} parameters, "
                 f"prefetch){'' if layout.reshard_after_forward else ' + the rank unsharded'}"
                 f" at {param_bytes} B / tp")
    if rank.logits:
        text += f"; workspace: fp32 logits and their gradient, b*s*vocab*8 B / tp={tp}"
    if layout.cpu_offload:
        text += "; CPU offload: parameters, gradients and optimizer state under host"
    return text


def estimate(spec: ModelSpec, layout: Layout, *, batch: int, seq: int, param_bytes: int,
             compute_bytes: int, optimizer_bytes_per_param: int = 8) -> Estimate:
    """One rank's memory: the larger of the pipeline's first and last rank.

    `batch`: a data-parallel rank's sequences per step (a pipeline splits them into
    `layout.microbatches`); `param_bytes`: parameters and gradients' storage (4 for fp32);
    `compute_bytes`: activations' element size (2 under bf16 or fp16)."""
    b = math.ceil(batch / layout.microbatches) if layout.pp > 1 else batch
    ranks, chunk = _ranks(spec, layout)
    counted = [_count(spec, layout, rank, chunk, b, seq, param_bytes, compute_bytes,
                      optimizer_bytes_per_param) for rank in ranks]
    return max(counted, key=lambda e: e.total)


def fits(estimate: Estimate, available: int, margin: float = 0.9) -> bool:
    """Whether the estimate fits in `margin` of the available bytes."""
    return estimate.total <= available * margin


def refusal(estimate: Estimate, available: int, where: str, margin: float = 0.9) -> str:
    """The one line that refuses a case which does not fit, with what it would need."""
    names = ("parameters", "gradients", "optimizer", "activations", "gathered", "workspace")
    parts = ", ".join(f"{n} {format_bytes(getattr(estimate, n))}" for n in names)
    return (f"does not fit: needs about {format_bytes(estimate.total)} per rank ({parts}), "
            f"{format_bytes(available * margin)} usable on {where} ({margin:.0%} of "
            f"{format_bytes(available)}); shard further (more ranks, fsdp, tp or pp), "
            f"checkpoint activations or lower the batch")


def available_memory(device_type: str, local_ranks: int, *, meminfo_path: str = "/proc/meminfo",
                     cuda_free: int | None = None) -> tuple[int, str]:
    """Bytes one rank may use, and where that figure came from: a GPU's free memory (the
    caller reads torch.cuda.mem_get_info; ROCm builds too), or on the CPU the host's
    MemAvailable shared by the ranks of this node."""
    if local_ranks < 1:
        raise ValueError(f"local ranks must be at least 1, not {local_ranks}")
    if device_type == "cuda":
        if cuda_free is None:
            raise ValueError("the device's free memory is needed (torch.cuda.mem_get_info)")
        return cuda_free, "free device memory"
    if device_type != "cpu":
        raise ValueError(f"no memory reading for device type {device_type!r}")
    try:
        text = Path(meminfo_path).read_text(errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read {meminfo_path}: {exc.strerror}") from exc
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields = value.split()
        if key == "MemAvailable" and len(fields) == 2 and is_decimal(fields[0]) \
                and fields[1] == "kB":
            total = int(fields[0]) * 1024
            return total // local_ranks, (f"MemAvailable {format_bytes(total)} shared by "
                                          f"{local_ranks} local rank(s)")
    raise ValueError(f"{meminfo_path} has no readable MemAvailable line")
