"""The parameters the model benchmarks share (declarations only: no torch here)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.benchmarks.models.precision import MODEL_DTYPES
from accelbench.benchmarks.models.tasks import OPTIMIZER_FUSED, OPTIMIZERS
from accelbench.benchmarks.models.zoo import (
    HEAD_TASK,
    HEADS,
    MODEL_NAMES,
    MODELS,
    overrides_problem,
)
from accelbench.core.params import UNKEYED, Param

# The models a sequence length and an image size mean something to: a vision model's
# case has no `seq`, a language model's no `image`, the UNet's (its latent is its own
# shape) neither.
SEQ_MODELS = tuple(name for name, spec in MODELS.items() if spec.uses_seq)
IMAGE_MODELS = tuple(name for name, spec in MODELS.items() if spec.is_vision)


def model_params(batch: int, model: str = "bert-base") -> tuple[Param, ...]:
    return (
        Param("model", "str", model, help="model name; <arch>-tiny variants for tests",
              choices=MODEL_NAMES),
        Param("dtype", "str", "fp32", help="fp32, tf32 (TF32 math), fp16 (autocast with "
              "gradient scaling) or bf16 (autocast)", choices=MODEL_DTYPES),
        Param("cast", "bool", False, help="cast the whole model to fp16/bf16 instead of "
              "autocast, as SuperBench does (labelled in the results)"),
        Param("batch", "int", batch, help="samples per step (per rank with data parallelism)",
              minimum=1),
        Param("seq", "int", 128, help="sequence length (language models and the LSTM)",
              minimum=1, only_when=("model", SEQ_MODELS), outside=UNKEYED),
        Param("image", "int", 224, help="image height and width (vision models)", minimum=8,
              only_when=("model", IMAGE_MODELS), outside=UNKEYED),
        Param("compile", "bool", False, help="torch.compile the model; compile time reported "
              "apart"),
        Param("channels_last", "bool", False, help="channels-last memory format (CNNs only)"),
        Param("h2d", "bool", False, help="copy the batch from pinned host memory every step"),
        Param("steps_per_window", "int", 4, help="steps per timed call: the device is "
              "synchronised once per window, never inside it", minimum=1, maximum=1000),
        Param("config", "str", "", help="shape overrides, e.g. layers=4,hidden=1024 (one "
              "value; repeat -p for several)", check=overrides_problem, grid=False),
    )


@dataclass(frozen=True)
class ModelParams:
    """The parameters of `model_params`: an `infer` case's, and the first of `train`'s."""

    model: str
    dtype: str
    cast: bool
    batch: int
    seq: int
    image: int
    compile: bool
    channels_last: bool
    h2d: bool
    steps_per_window: int
    config: str


FIND_BATCH = Param("find_batch", "bool", False, help="use the largest batch that fits, "
                   "searching up from `batch` (GPU: by trying; CPU: by a memory model)")

# Training only: what SuperBench's model benchmarks do differently, and its figure.
TRAIN_PARAMS = (
    Param("head", "str", HEAD_TASK, help="'' (default): the model's own head and loss "
          "(masked LM, next token, classes); superbench: BERT, GPT-2 and LLaMA as "
          "SuperBench trains them, a 100-class linear layer on the pooled output (BERT) or "
          "the last hidden state (decoders), cross-entropy against random labels kept on "
          "the device",
          choices=HEADS),
    Param("optimizer", "str", OPTIMIZER_FUSED, help="'' (default): fused AdamW/SGD where the "
          "build has them; superbench: SuperBench's settings in PyTorch's default implementation "
          "(SGD with Nesterov momentum)", choices=OPTIMIZERS),
    Param("superbench_steps", "int", 0, help="after the timed windows, time up to this many "
          "single steps as SuperBench does (synchronised before and after each) and report "
          "throughput_superbench, the mean of their per-step throughputs; 0: off",
          minimum=0, maximum=100_000),
)


@dataclass(frozen=True)
class TrainParams(ModelParams):
    """The parameters of a `train` or `train-ddp` case: `ModelParams`' and training's own."""

    find_batch: bool
    head: str
    optimizer: str
    superbench_steps: int
