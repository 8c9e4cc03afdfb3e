"""The details a training-at-scale case stores beside its figures (`measure` writes them,
`scaling` and `view` read them back), as typed records: the parallel form
(`ParallelForm`), the loss-parity check (`LossParity`) and the whole (`ScaleDetails`).

`to_dict` writes the keys, values and order every stored record of these benchmarks
has. `from_details` reads a stored record tolerantly: records of older releases and
records put together by hand hold only some keys, and each value that is missing or of
another kind reads as None, never raising; what a reader then shows or skips is its own
rule. The models family's own keys (`models.results.model_result`: throughput, timed
calls, ...) and the float32 math mode's (`mathmode.MathMode.details`: TF32 in effect,
each op's precision as read back, ...) follow these in the stored details and are not
part of this record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from accelbench.core.stored import (
    finite,
    finites,
    integer,
    integers,
    mapping,
    number,
    strings,
    text,
)

__all__ = ["MEMORY_KEYS", "LossParity", "ParallelForm", "ScaleDetails"]

# What the peak-memory meter (`models.memory.PeakMemory.peak`) adds to the details.
MEMORY_KEYS = ("peak_memory_source", "peak_memory_reserved")


@dataclass(frozen=True)
class ParallelForm:
    """How the ranks were used (`forms.Plan`): the form, its degrees, the micro-steps per
    optimizer step and, for a pipeline, its schedule and microbatches. A value a stored
    record lacks is None, and `to_dict` leaves out what is None (a pipeline's schedule
    is written only for a pipeline)."""

    form: str | None = None
    dp: int | None = None
    tp: int | None = None
    pp: int | None = None
    accumulate: int | None = None
    schedule: str | None = None
    microbatches: int | None = None

    def to_dict(self) -> dict[str, object]:
        values = {"form": self.form, "dp": self.dp, "tp": self.tp, "pp": self.pp,
                  "accumulate": self.accumulate, "schedule": self.schedule,
                  "microbatches": self.microbatches}
        return {k: v for k, v in values.items() if v is not None}

    @classmethod
    def from_dict(cls, raw: object) -> ParallelForm | None:
        """None where `raw` is not a mapping."""
        found = mapping(raw)
        if found is None:
            return None
        return cls(text(found.get("form")), integer(found.get("dp")), integer(found.get("tp")),
                   integer(found.get("pp")), integer(found.get("accumulate")),
                   text(found.get("schedule")), integer(found.get("microbatches")))


@dataclass(frozen=True)
class LossParity:
    """The loss-parity check (`parity`): each checked step's loss against the single-device
    reference's, the worst relative difference, the tolerance, and the reference's
    blocks (fewer than the case's where the whole model did not fit one device)."""

    steps: int | None = None
    losses: tuple[float, ...] = ()
    reference_losses: tuple[float, ...] = ()
    worst_relative_difference: float | None = None
    tolerance: float | None = None
    reference_layers: int | None = None
    rule: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"steps": self.steps, "losses": list(self.losses),
                "reference_losses": list(self.reference_losses),
                "worst_relative_difference": self.worst_relative_difference,
                "tolerance": self.tolerance, "reference_layers": self.reference_layers,
                "rule": self.rule}

    @classmethod
    def from_dict(cls, raw: object) -> LossParity | None:
        """None where `raw` is not a mapping."""
        found = mapping(raw)
        if found is None:
            return None
        return cls(integer(found.get("steps")), finites(found.get("losses")) or (),
                   finites(found.get("reference_losses")) or (),
                   number(found.get("worst_relative_difference")),
                   number(found.get("tolerance")), integer(found.get("reference_layers")),
                   text(found.get("rule")))


@dataclass(frozen=True)
class ScaleDetails:
    """What one training-at-scale case did: the model, the job's shape and parallel form,
    the loss-parity check, the memory estimate and meter, and each rank's figures (by
    global rank: its node, step and solo step time, peak memory, exposed communication
    share)."""

    mode: str | None = None
    model: str | None = None
    parameters: int | None = None
    layers: int | None = None
    world_size: int | None = None
    nodes: int | None = None
    ranks_per_node: int | None = None
    parallel: ParallelForm | None = None
    scaling: str | None = None  # "weak" or "strong"
    global_batch: int | None = None
    batch_per_rank: int | None = None
    loss_last: float | None = None
    parity: LossParity | None = None
    # `sizing.Estimate.to_dict()`, bytes per component and their total, as written
    memory_estimate: Mapping[str, object] | None = None
    # What the peak-memory meter said of the peak (MEMORY_KEYS), as written
    memory: Mapping[str, object] = field(default_factory=dict)
    peak_memory_scope: str | None = None
    model_flop_formula: str | None = None
    throughput_scope: str | None = None
    rank_nodes: tuple[str, ...] | None = None
    rank_step_s: tuple[float, ...] | None = None
    rank_solo_s: tuple[float, ...] | None = None
    rank_peak_memory: tuple[int, ...] | None = None
    rank_exposed_comm_share: tuple[float | None, ...] | None = None

    @property
    def estimated_total(self) -> float | None:
        """The memory estimate's total bytes per rank; None without a number for it."""
        return number(self.memory_estimate.get("total")) if self.memory_estimate else None

    @property
    def peak_memory_source(self) -> str:
        """What the peak memory was read from; "" where the record does not say."""
        return str(self.memory.get("peak_memory_source", ""))

    def to_dict(self) -> dict[str, object]:
        def listed(values: tuple[object, ...] | None) -> list[object] | None:
            return None if values is None else list(values)

        return {
            "mode": self.mode, "model": self.model, "parameters": self.parameters,
            "layers": self.layers, "world_size": self.world_size, "nodes": self.nodes,
            "ranks_per_node": self.ranks_per_node,
            "parallel": self.parallel.to_dict() if self.parallel is not None else None,
            "scaling": self.scaling, "global_batch": self.global_batch,
            "batch_per_rank": self.batch_per_rank, "loss_last": self.loss_last,
            "parity": self.parity.to_dict() if self.parity is not None else None,
            "memory_estimate": (dict(self.memory_estimate)
                                if self.memory_estimate is not None else None),
            **self.memory,
            "peak_memory_scope": self.peak_memory_scope,
            "model_flop_formula": self.model_flop_formula,
            "throughput_scope": self.throughput_scope,
            "rank_nodes": listed(self.rank_nodes),
            "rank_step_s": listed(self.rank_step_s),
            "rank_solo_s": listed(self.rank_solo_s),
            "rank_peak_memory": listed(self.rank_peak_memory),
            "rank_exposed_comm_share": listed(self.rank_exposed_comm_share),
        }

    @classmethod
    def from_details(cls, details: Mapping[str, object]) -> ScaleDetails:
        """The details of a stored training-at-scale case, each key it lacks as None."""
        return cls(
            mode=text(details.get("mode")),
            model=text(details.get("model")),
            parameters=integer(details.get("parameters")),
            layers=integer(details.get("layers")),
            world_size=integer(details.get("world_size")),
            nodes=integer(details.get("nodes")),
            ranks_per_node=integer(details.get("ranks_per_node")),
            parallel=ParallelForm.from_dict(details.get("parallel")),
            scaling=text(details.get("scaling")),
            global_batch=integer(details.get("global_batch")),
            batch_per_rank=integer(details.get("batch_per_rank")),
            loss_last=number(details.get("loss_last")),
            parity=LossParity.from_dict(details.get("parity")),
            memory_estimate=mapping(details.get("memory_estimate")),
            memory={k: details[k] for k in MEMORY_KEYS if k in details},
            peak_memory_scope=text(details.get("peak_memory_scope")),
            model_flop_formula=text(details.get("model_flop_formula")),
            throughput_scope=text(details.get("throughput_scope")),
            rank_nodes=strings(details.get("rank_nodes")),
            rank_step_s=finites(details.get("rank_step_s")),
            rank_solo_s=finites(details.get("rank_solo_s")),
            rank_peak_memory=integers(details.get("rank_peak_memory")),
            rank_exposed_comm_share=_shares(details.get("rank_exposed_comm_share")),
        )


def _shares(raw: object) -> tuple[float | None, ...] | None:
    """Each rank's exposed communication share, None for a rank that profiled none."""
    if not isinstance(raw, (list, tuple)):
        return None
    found = tuple(finite(v) for v in raw)
    if any(f is None and v is not None for f, v in zip(found, raw, strict=True)):
        return None
    return found
