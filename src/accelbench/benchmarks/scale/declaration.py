"""The declarations of the training-at-scale benchmarks: one per parallel form.

- `train-fsdp`: FSDP2 (`torch.distributed.fsdp.fully_shard`) over every rank;
- `train-tp`: tensor parallelism (`torch.distributed.tensor.parallel`) over every rank;
- `train-pp`: a pipeline (`torch.distributed.pipelining`), one stage per rank (two with
  the interleaved schedule);
- `train-2d`: FSDP across `dp` x tensor parallelism across `tp` on a 2-D DeviceMesh.

Every case checks first that a few steps of its form reach the loss of a single-device
step on the same data and seed (`parity`), estimates each rank's memory and refuses a
case that cannot fit (`sizing`), and only then is timed (`measure`).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.benchmarks.models import MODEL_SOURCES
from accelbench.benchmarks.models.zoo import MODEL_NAMES, get_spec, overrides_problem
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

ARCHS = ("llama", "gpt2")  # the decoder-only transformers these forms are written for
MODELS = tuple(n for n in MODEL_NAMES if get_spec(n).arch in ARCHS)
DTYPES = ("fp32", "bf16")
SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
SOURCES = (*MODEL_SOURCES, "accelbench.benchmarks.scale.parallel",
           "accelbench.benchmarks.scale.stages", "accelbench.benchmarks.scale.parity",
           "accelbench.benchmarks.scale.sizing")
VIEWS = ("accelbench.benchmarks.scale.view:sections",)

_COMMON = (
    Param("model", "str", "llama-tiny", help="a LLaMA-style or GPT-2 model of the zoo",
          choices=MODELS),
    Param("config", "str", "", help="shape overrides, e.g. layers=8,hidden=1024 (one value; "
          "repeat -p for several)", check=overrides_problem, grid=False),
    Param("dtype", "str", "fp32", help="fp32; bf16: bfloat16 compute (FSDP's mixed-precision "
          "policy where the form shards with FSDP, autocast otherwise)", choices=DTYPES),
    Param("batch", "int", 4, help="sequences per micro-step on each data-parallel rank (a "
          "pipeline splits them into its microbatches; weak scaling: the global batch grows "
          "with the ranks)", minimum=1),
    Param("global_batch", "int", 0, help="sequences per step over all data-parallel ranks "
          "(strong scaling: split between them); 0: batch x data-parallel ranks",
          minimum=0),
    Param("seq", "int", 128, help="sequence length in tokens", minimum=2),
    Param("checkpoint", "bool", False, help="activation checkpointing of every block "
          "(recomputed in backward)"),
    Param("compile", "bool", False, help="torch.compile every block"),
    Param("steps_per_window", "int", 2, help="training steps per timed call", minimum=1,
          maximum=1000),
    Param("parity_steps", "int", 3, help="steps compared with a single-device step on the "
          "same data and seed before timing", minimum=1, maximum=20),
    Param("profile_steps", "int", 2, help="steps profiled after timing for the share of a "
          "step spent in communication not overlapped with compute; 0: none", minimum=0,
          maximum=20),
)
_FSDP = (
    Param("reshard", "bool", True, help="reshard parameters after forward (FSDP's "
          "reshard_after_forward: less memory, one more all-gather in backward)"),
    Param("reduce_dtype", "str", "fp32", help="the dtype gradients are reduced in (FSDP's "
          "mixed-precision policy, with dtype bf16)", choices=DTYPES,
          only_when=("dtype", ("bf16",))),
    Param("offload", "bool", False, help="keep parameters, gradients and optimizer state "
          "in host memory (FSDP's CPUOffloadPolicy; accelerators only)"),
    Param("accumulate", "int", 1, help="micro-steps of gradient accumulation per optimizer "
          "step (gradients reduced on the last only)", minimum=1, maximum=64),
)
_TP = (
    Param("sequence_parallel", "bool", False, help="shard the norms' activations along the "
          "sequence (sequence parallelism) between the tensor-parallel regions"),
)
_PP = (
    Param("schedule", "str", "1f1b", help="pipeline schedule: gpipe, 1f1b, "
          "interleaved-1f1b (two stages per rank)", choices=SCHEDULES),
    Param("microbatches", "int", 4, help="microbatches each step's batch is split into",
          minimum=1, maximum=256),
)
_MESH = (
    Param("tp", "int", 2, help="tensor-parallel ranks of the 2-D mesh; the data-parallel "
          "(FSDP) dimension is the rest", minimum=1),
)


@dataclass(frozen=True)
class ScaleParams:
    """The parameters every training-at-scale case has (`_COMMON`)."""

    model: str
    config: str
    dtype: str
    batch: int
    global_batch: int
    seq: int
    checkpoint: bool
    compile: bool
    steps_per_window: int
    parity_steps: int
    profile_steps: int


# Keyword-only: reduce_dtype, which a case may leave out, defaults to None, and fields
# without a default follow it.
@dataclass(frozen=True, kw_only=True)
class FsdpParams(ScaleParams):
    """The parameters of a train-fsdp case (`FSDP.params`)."""

    reshard: bool
    reduce_dtype: str | None = None
    offload: bool
    accumulate: int


@dataclass(frozen=True)
class TpParams(ScaleParams):
    """The parameters of a train-tp case (`TP.params`)."""

    sequence_parallel: bool


@dataclass(frozen=True)
class PpParams(ScaleParams):
    """The parameters of a train-pp case (`PP.params`)."""

    schedule: str
    microbatches: int


@dataclass(frozen=True)
class Mesh2dParams(FsdpParams):
    """The parameters of a train-2d case (`MESH_2D.params`): FSDP's, then the mesh's."""

    sequence_parallel: bool
    tp: int


def _benchmark(name: str, entry: str, summary: str, params: tuple[Param, ...],
               typed: type[ScaleParams]) -> Benchmark:
    return Benchmark(
        name=name,
        family="scale",
        summary=summary,
        entry=f"accelbench.benchmarks.scale.measure:{entry}",
        params=(*_COMMON, *params),
        devices=("cpu", "cuda"),
        timeout_s=900.0,
        distributed=True,
        sources=SOURCES,
        views=VIEWS,
        typed=typed,
    )


FSDP = _benchmark("train-fsdp", "fsdp", "Training with FSDP2 (fully_shard) across the ranks: "
                  "token/s per device and in total, MFU, peak memory per rank, exposed "
                  "communication", _FSDP, FsdpParams)
TP = _benchmark("train-tp", "tensor_parallel", "Training with tensor parallelism "
                "(colwise/rowwise plans, optional sequence parallelism) across the ranks", _TP,
                TpParams)
PP = _benchmark("train-pp", "pipeline", "Training with a pipeline of stages across the ranks "
                "(torch.distributed.pipelining: GPipe, 1F1B, interleaved 1F1B)", _PP, PpParams)
MESH_2D = _benchmark("train-2d", "mesh_2d", "Training on a 2-D mesh: FSDP2 across the "
                     "data-parallel dimension x tensor parallelism", (*_FSDP, *_TP, *_MESH),
                     Mesh2dParams)
BENCHMARKS = (FSDP, TP, PP, MESH_2D)
