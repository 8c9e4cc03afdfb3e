"""A case's parallel form on this job, and the training step it runs.

`Layout` says how the ranks are used (data-parallel shards x tensor-parallel x pipeline
stages) and how a step's batch is split; `Parallel` holds the model built in that form,
its optimizer and this rank's share of the batch, and `step()` trains once.

Every form starts from the same model, built from the same seed as the single-device
reference, and trains with the same optimizer (AdamW, lr 1e-3) on the same global batch:
a data-parallel rank takes its slice of it (gradients averaged by FSDP's reduce-scatter),
tensor-parallel ranks all take the whole of it, and a pipeline splits it into microbatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.models import zoo
from accelbench.benchmarks.scale import parallel, stages
from accelbench.benchmarks.scale.declaration import (
    FsdpParams,
    Mesh2dParams,
    PpParams,
    ScaleParams,
    TpParams,
)
from accelbench.benchmarks.scale.details import ParallelForm
from accelbench.benchmarks.scale.sizing import Layout
from accelbench.core.measurement import CaseSkipped

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

LR = 1e-3  # large enough that the checked steps change the loss
SEED = 0
DATA_SEED = 1234


@dataclass(frozen=True)
class Plan:
    """The form (`fsdp`, `tp`, `pp` or `fsdp+tp`), its layout, and the batch of a step."""

    form: str
    layout: Layout
    batch: int  # sequences per micro-step on each data-parallel rank
    accumulate: int  # micro-steps per optimizer step
    scaling: str  # "weak": batch fixed per rank; "strong": global batch fixed

    @property
    def global_batch(self) -> int:
        return self.batch * self.layout.dp * self.accumulate

    def record(self) -> ParallelForm:
        """What the case's details keep of it; a pipeline's schedule only for a pipeline."""
        lay = self.layout
        piped = lay.pp > 1 or self.form == "pp"
        return ParallelForm(self.form, lay.dp, lay.tp, lay.pp, self.accumulate,
                            lay.schedule if piped else None,
                            lay.microbatches if piped else None)

    def to_dict(self) -> dict[str, object]:
        return self.record().to_dict()


def plan(form: str, params: ScaleParams, world: int) -> Plan:
    """The layout of `form` over `world` ranks; CaseSkipped where the numbers don't divide."""
    tp = params.tp if isinstance(params, Mesh2dParams) else (world if form == "tp" else 1)
    if world % tp:
        raise CaseSkipped(f"a 2-D mesh of tp={tp} needs a multiple of {tp} ranks, not {world}")
    pp = world if form == "pp" else 1
    dp = world // (tp * pp)
    # Settings that only some forms' benchmarks declare; the other forms run at their
    # defaults.
    sharded = params if isinstance(params, FsdpParams) else None  # train-fsdp, train-2d
    accumulate = sharded.accumulate if sharded else 1
    schedule, microbatches = ((params.schedule, params.microbatches)
                              if isinstance(params, PpParams) else ("1f1b", 1))
    sequence_parallel = (isinstance(params, (TpParams, Mesh2dParams))
                         and params.sequence_parallel)
    batch, scaling = params.batch, "weak"
    if params.global_batch:
        share = dp * accumulate
        if params.global_batch % share:
            raise CaseSkipped(f"global_batch {params.global_batch} does not split into "
                              f"{dp} data-parallel ranks x {accumulate} accumulation steps")
        batch, scaling = params.global_batch // share, "strong"
    if form == "pp" and batch % microbatches:
        raise CaseSkipped(f"a batch of {batch} does not split into {microbatches} microbatches")
    layout = Layout(dp=dp, tp=tp, pp=pp, fsdp=form in ("fsdp", "fsdp+tp"),
                    reshard_after_forward=sharded.reshard if sharded else True,
                    sequence_parallel=sequence_parallel,
                    checkpointing=params.checkpoint, microbatches=microbatches,
                    schedule=schedule, stages_per_rank=stages.STAGES_PER_RANK[schedule],
                    cpu_offload=sharded.offload if sharded else False)
    return Plan(form, layout, batch, accumulate, scaling)


def global_batch(torch: Any, spec: zoo.ModelSpec, sequences: int, seq: int,
                 device: torch.device) -> Tensor:
    """The same token ids on every rank: a fixed seed, drawn on the CPU."""
    generator = torch.Generator().manual_seed(DATA_SEED)
    ids = torch.randint(0, spec.shape["vocab"], (sequences, seq), generator=generator)
    return ids.to(device)


def build_model(torch: Any, spec: zoo.ModelSpec, device: torch.device | str) -> nn.Module:
    """The model from the fixed seed, dropout off, in train mode."""
    torch.manual_seed(SEED)
    with torch.device(device):
        model = zoo.build(spec)
    parallel.no_dropout(model)
    model.train()
    return model


def optimizer(torch: Any, params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=LR)


class Parallel:
    """The model in its parallel form on this rank, and one training step of it."""

    def __init__(self, torch: Any, spec: zoo.ModelSpec, the_plan: Plan, params: ScaleParams,
                 device: torch.device, rank: int, world: int) -> None:
        from torch.distributed.device_mesh import init_device_mesh

        self.torch, self.spec, self.plan, self.device = torch, spec, the_plan, device
        # Process groups this form made beside the job's own (a 2-D mesh's dimensions, a
        # pipeline's tied-weight pair): ended with it, so that a job of many cases does
        # not keep a communicator (and its device buffers) per case.
        self._groups: list[Any] = []
        lay = the_plan.layout
        bf16 = params.dtype == "bf16"
        # FSDP alone moves each rank's shard to the device: the whole model stays on the host.
        model = build_model(torch, spec, "cpu")
        if not lay.fsdp or lay.tp > 1:
            model.to(device)
        if the_plan.form == "fsdp+tp":
            mesh = init_device_mesh(device.type, (lay.dp, lay.tp), mesh_dim_names=("dp", "tp"))
            dp_mesh, tp_mesh = mesh["dp"], mesh["tp"]
            self.dp_rank = mesh.get_local_rank("dp")
            self._groups += [mesh.get_group("dp"), mesh.get_group("tp")]
        else:
            mesh = init_device_mesh(device.type, (world,))
            dp_mesh = tp_mesh = mesh
            self.dp_rank = rank if lay.dp > 1 else 0
        if lay.tp > 1 or the_plan.form == "tp":
            parallel.tensor_parallel(model, tp_mesh, lay.sequence_parallel)
        if lay.checkpointing:
            parallel.checkpoint_blocks(model, spec.arch)
        if params.compile:
            parallel.compile_blocks(model, spec.arch)
        self.pipeline: stages.Pipeline | None = None
        if lay.fsdp:
            assert isinstance(params, FsdpParams)  # the forms that shard with FSDP
            reduce = params.reduce_dtype or "fp32"  # given with bf16 only
            policies = parallel.fsdp_policies(torch, params.dtype, reduce, params.offload)
            parallel.shard(model, spec.arch, dp_mesh, lay.reshard_after_forward, policies)
            trained: list[Any] = list(model.parameters())
        elif the_plan.form == "pp":
            self.pipeline = stages.build(model, spec.arch, rank, world, lay.schedule,
                                         lay.microbatches, device)
            self._groups.append(self.pipeline.tied_group)
            trained = [p for m in self.pipeline.modules for p in m.parameters()]
        else:
            trained = list(model.parameters())
        self.model = model
        self.optimizer = optimizer(torch, trained)
        # Autocast where FSDP's mixed-precision policy does not set the compute dtype.
        self.autocast = bf16 and not lay.fsdp
        ids = global_batch(torch, spec, the_plan.global_batch, params.seq, device)
        self.batch = ids.chunk(lay.dp)[self.dp_rank].chunk(the_plan.accumulate)
        self.last_loss: Tensor | None = None

    def step(self) -> Tensor | None:
        """One optimizer step; this rank's loss (None on pipeline ranks without the last
        stage). Nothing waits for the device."""
        torch = self.torch
        if self.pipeline is not None:
            with self._autocast():
                losses = self.pipeline.step(self.batch[0])
            loss = torch.stack(losses).mean().detach() if losses else None
        else:
            total = None
            for index, micro in enumerate(self.batch):
                sync = getattr(self.model, "set_requires_gradient_sync", None)
                if sync is not None:  # FSDP: reduce-scatter on the last micro-step only
                    sync(index == len(self.batch) - 1)
                with self._autocast():
                    micro_loss = self.model(input_ids=micro, labels=micro).loss
                (micro_loss / len(self.batch)).backward()
                part = micro_loss.detach() / len(self.batch)
                total = part if total is None else total + part
            loss = total
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.last_loss = loss
        return loss

    def mean_loss(self, loss: Tensor | None) -> float:
        """The step's loss over the whole global batch, read on every rank (synchronises:
        for checks only). Ranks that hold a loss average theirs: the data-parallel ranks'
        slices are equal, and tensor-parallel ranks hold the same loss."""
        torch = self.torch
        both = torch.zeros(2, dtype=torch.float64, device=self.device)
        if loss is not None:
            both[0], both[1] = float(loss), 1.0
        torch.distributed.all_reduce(both)
        return float(both[0] / both[1])

    def _autocast(self) -> Any:
        import contextlib

        if not self.autocast:
            return contextlib.nullcontext()
        return self.torch.autocast(self.device.type, dtype=self.torch.bfloat16)

    def release(self) -> None:
        """Drop the model, its state and the groups it made (on every rank alike)."""
        self.model = self.optimizer = self.pipeline = None  # type: ignore[assignment]
        self.batch = self.last_loss = None  # type: ignore[assignment]
        dist = self.torch.distributed
        world = dist.group.WORLD
        for group in dict.fromkeys(g for g in self._groups if g is not None and g != world):
            dist.destroy_process_group(group)
        self._groups = []

