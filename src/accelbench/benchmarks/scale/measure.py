"""Measuring one training-at-scale case on every rank of the job.

In order, on every rank:
1. the plan: how the ranks are used and how the batch splits (`forms.plan`);
2. the memory plan: each rank's memory estimated (`sizing`) and the case refused, on
   every rank at once, where it would not fit;
3. loss parity: `parity_steps` steps of the parallel form against a single-device step on
   the same data and seed (`parity`); a mismatch fails the case before anything is timed;
4. timing: windows of `steps_per_window` steps through the timing core, each sample the
   slowest rank's (the ranks wait for each other in every step anyway);
5. the profiler over `profile_steps` more steps: the share of a step spent in
   communication not overlapped with compute (`accelbench profile`'s analysis, here of
   rank 0's trace; every rank's share in the details);
6. every rank's own figures gathered to rank 0, which stores the result.

Steps 3 to 6 run in the float32 math mode of the models family: TF32 off for matmuls,
convolutions and RNNs, set and read back on every rank (`mathmode.math_mode`), and
recorded in the details. TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (set in NVIDIA's PyTorch
containers, and inherited by torchrun's ranks) starts a process with TF32 matmuls: an
fp32 case left so would set TF32 throughput against the fp32 peak. An fp32 case whose
TF32 still reads back on is skipped, on every rank at once.

Figures: token/s in total (the case's value) and per device, MFU against the devices'
summed peak for the math that ran (fp32 with TF32 read back off, or bf16), with model
FLOPs counted as torchtitan does (6 x the parameters outside the input embedding + 12 x
layers x seq x hidden, per token), peak memory (the largest rank's) beside the estimate,
and the exposed communication share.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from accelbench.benchmarks.mathmode import MathMode, math_mode
from accelbench.benchmarks.models import checks, zoo
from accelbench.benchmarks.models.flops import transformer_flops
from accelbench.benchmarks.models.memory import PeakMemory
from accelbench.benchmarks.models.precision import MATH_OPS
from accelbench.benchmarks.models.results import Work, model_result
from accelbench.benchmarks.models.trainer import free_cached
from accelbench.benchmarks.scale import forms, parallel, parity, sizing
from accelbench.benchmarks.scale.declaration import (
    FsdpParams,
    Mesh2dParams,
    PpParams,
    ScaleParams,
    TpParams,
)
from accelbench.benchmarks.scale.details import LossParity, ScaleDetails
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure, Rate
from accelbench.core.registry import resolve_entry


@dataclass(frozen=True)
class _Rank:
    """One rank's own figures, gathered to rank 0 for the details."""

    step_s: float  # the median of its own seconds per step, each window
    solo_s: float  # its step on its share of the batch with no communication
    node: str
    peak_memory: int
    exposed: float | None  # its exposed communication share; None with no steps profiled


def fsdp(ctx: CaseContext, params: FsdpParams) -> CaseResult:
    return _measure(ctx, params, "fsdp")


def tensor_parallel(ctx: CaseContext, params: TpParams) -> CaseResult:
    return _measure(ctx, params, "tp")


def pipeline(ctx: CaseContext, params: PpParams) -> CaseResult:
    return _measure(ctx, params, "pp")


def mesh_2d(ctx: CaseContext, params: Mesh2dParams) -> CaseResult:
    return _measure(ctx, params, "fsdp+tp")


def _measure(ctx: CaseContext, params: ScaleParams, form: str) -> CaseResult:
    import torch

    parallel.require(torch, "mesh", *{"fsdp": ("fsdp",), "tp": ("tp",), "pp": ("pp",),
                                      "fsdp+tp": ("fsdp", "tp")}[form])
    if ctx.dist is None:
        raise CaseSkipped("runs on the ranks of a torch.distributed job")
    rank, world = ctx.dist.rank, ctx.dist.world_size
    spec = _spec(params)
    device = torch.device(ctx.device.torch_device)
    if isinstance(params, FsdpParams) and params.offload and device.type == "cpu":
        raise CaseSkipped("offload moves parameters from an accelerator to host memory; on "
                          "the CPU they are in host memory already")
    the_plan = forms.plan(form, params, world)
    problem = parallel.tp_problem(spec.arch, dict(spec.shape), the_plan.layout.tp)
    if problem:
        raise CaseSkipped(problem)
    if the_plan.layout.pp * the_plan.layout.stages_per_rank > spec.shape["layers"]:
        raise CaseSkipped(f"{the_plan.layout.pp * the_plan.layout.stages_per_rank} pipeline "
                          f"stages need as many blocks; {spec.name} has {spec.shape['layers']}")
    estimate, available, where = _memory_plan(torch, ctx, spec, the_plan, params, device)
    if ctx.coordinator.slowest(0.0 if sizing.fits(estimate, available) else 1.0) > 0:
        raise CaseSkipped(sizing.refusal(estimate, available, where))
    ref_spec, why = _reference_spec(spec, the_plan, params, available, where)
    if ctx.coordinator.slowest(1.0 if why else 0.0) > 0:  # refused on every rank at once
        raise CaseSkipped(why or "the single-device reference of the loss-parity check does "
                          "not fit on another rank")
    layers = ctx.coordinator.agree(ref_spec.shape["layers"])  # rank 0's, on every rank
    if layers != ref_spec.shape["layers"]:
        ref_spec = spec.with_overrides({"layers": layers})
    # The reference, the parity steps and the timed steps alike: TF32 is never asked for
    # (the dtypes are fp32 and bf16), and bf16 autocast leaves some of the math in float32.
    with math_mode(torch, False, MATH_OPS, ctx.device.platform) as mode:
        _check_math_mode(ctx, mode, params.dtype)
        ref = parity.reference(torch, ref_spec, the_plan, params.dtype, params.seq,
                               params.parity_steps, device)
        free_cached(torch, device)
        model: forms.Parallel | None = None
        try:
            model = forms.Parallel(torch, ref_spec, the_plan, params, device, rank, world)
            losses = [model.mean_loss(model.step()) for _ in range(params.parity_steps)]
            parity_details = parity.compare(losses, ref, params.dtype)
            if ref_spec is not spec:  # checked on fewer blocks: now build the case's model
                model.release()
                free_cached(torch, device)
                model = forms.Parallel(torch, spec, the_plan, params, device, rank, world)
            meter = PeakMemory(torch, device)
            result = _timed(ctx, params, model, meter, estimate, parity_details, ref)
        finally:
            if model is not None:
                model.release()
            if params.compile:
                torch._dynamo.reset()
    result.details.update(mode.details(MATH_OPS))
    return result


def _check_math_mode(ctx: CaseContext, mode: MathMode, dtype: str) -> None:
    """Skip an fp32 case whose matmuls still run TF32 (as `checks.check_math_mode` does:
    its MFU would be against the wrong peak), on every rank at once, so that none goes on
    to wait for the others in a collective. bf16 runs its matrix math in bf16 either way."""
    problem = mode.problem() if dtype == "fp32" else None
    if ctx.coordinator.slowest(1.0 if problem else 0.0) > 0:
        raise CaseSkipped(problem or "TF32 could not be switched off on another rank")


def _spec(params: ScaleParams) -> zoo.ModelSpec:
    try:
        spec = zoo.get_spec(params.model, params.config)
    except ValueError as exc:
        raise CaseFailed(f"model {params.model!r} cannot be built: {exc}") from None
    if params.seq > spec.shape["max_positions"]:
        raise CaseFailed(f"seq {params.seq} is longer than {spec.name}'s "
                         f"{spec.shape['max_positions']} positions")
    return spec


def _reference_spec(spec: zoo.ModelSpec, the_plan: forms.Plan, params: ScaleParams,
                    available: int, where: str) -> tuple[zoo.ModelSpec, str]:
    """The model the parity check runs on: the case's own where its single-device
    reference fits one device, else the same model with fewer blocks (halved until it
    fits, never fewer than the pipeline has stages); with why it is refused, where even
    that does not fit."""
    fewest = the_plan.layout.pp * the_plan.layout.stages_per_rank
    layers = spec.shape["layers"]
    while True:
        candidate = spec if layers == spec.shape["layers"] else spec.with_overrides(
            {"layers": layers})
        single = sizing.estimate(candidate, sizing.Layout(), batch=the_plan.global_batch,
                                 seq=params.seq, param_bytes=4,
                                 compute_bytes=2 if params.dtype == "bf16" else 4)
        if sizing.fits(single, available):
            return candidate, ""
        if layers <= fewest:
            return candidate, ("the single-device reference of the loss-parity check: "
                               + sizing.refusal(single, available, where))
        layers = max(fewest, layers // 2)


def _memory_plan(torch: Any, ctx: CaseContext, spec: zoo.ModelSpec, the_plan: forms.Plan,
                 params: ScaleParams, device: Any) -> tuple[sizing.Estimate, int, str]:
    bf16 = params.dtype == "bf16"
    estimate = sizing.estimate(spec, the_plan.layout, batch=the_plan.batch, seq=params.seq,
                               param_bytes=4, compute_bytes=2 if bf16 else 4)
    assert ctx.dist is not None
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    try:
        available, source = sizing.available_memory(device.type, ctx.dist.local_world_size,
                                                     cuda_free=free)
    except ValueError as exc:
        raise CaseFailed(f"the memory plan cannot read what a rank has: {exc}") from None
    return estimate, available, f"{device} ({source})"


def _timed(ctx: CaseContext, params: ScaleParams, model: forms.Parallel, meter: PeakMemory,
           estimate: sizing.Estimate, parity_details: LossParity, ref: parity.Reference
           ) -> CaseResult:
    torch, the_plan = model.torch, model.plan
    assert ctx.dist is not None
    steps = params.steps_per_window
    own: list[float] = []  # this rank's own seconds per step, each window

    def window() -> None:
        started = time.perf_counter()
        for _ in range(steps):
            model.step()
        _sync(torch, model.device)
        own.append((time.perf_counter() - started) / steps)

    timing = ctx.time(window)
    last = model.mean_loss(model.last_loss)
    checks.check_finite(last, "the training loss after timing")
    peak_memory, memory_details = meter.peak()
    exposed = _exposed_share(ctx, model, params.profile_steps)
    ranks = _gather(torch, _Rank(step_s=statistics.median(own), solo_s=ref.solo_seconds,
                                 node=_node(), peak_memory=peak_memory, exposed=exposed))
    spec, world, seq = model.spec, ctx.dist.world_size, params.seq
    sequences = the_plan.global_batch * steps
    flop_per_token = _flops(spec, seq)
    work = Work(samples=sequences, tokens=sequences * seq, steps=steps,
                flop=3 * flop_per_token.forward_per_sample * sequences)
    peak = ctx.peak_flops(params.dtype)  # fp32's only with TF32 read back off (above)
    result = model_result(
        timing, work, peak_flops=peak * world if peak else None,
        peak_memory=max(r.peak_memory for r in ranks), step_times=[s / steps for s in
                                                                     timing.samples],
        compile_time=None, time_name="window_time",
        details=ScaleDetails(
            mode="train", model=spec.name, parameters=sizing.parameter_count(spec),
            layers=spec.shape["layers"],
            world_size=world, nodes=ctx.dist.nodes,
            ranks_per_node=ctx.dist.local_world_size, parallel=the_plan.record(),
            scaling=the_plan.scaling, global_batch=the_plan.global_batch,
            batch_per_rank=the_plan.batch, loss_last=last,
            parity=parity_details, memory_estimate=estimate.to_dict(),
            memory=memory_details,
            peak_memory_scope="the largest rank's",
            model_flop_formula=f"{flop_per_token.formula} (torchtitan's count)",
            throughput_scope="aggregate over ranks; each sample the slowest rank's",
            rank_nodes=tuple(r.node for r in ranks),
            rank_step_s=tuple(r.step_s for r in ranks),
            rank_solo_s=tuple(r.solo_s for r in ranks),
            rank_peak_memory=tuple(r.peak_memory for r in ranks),
            rank_exposed_comm_share=tuple(r.exposed for r in ranks),
        ).to_dict())
    return _with_figures(result, sequences * seq / world, ranks)


def _with_figures(result: CaseResult, tokens_per_device: float, ranks: list[_Rank]
                  ) -> CaseResult:
    """token/s per device beside the total (taken over the same time), and rank 0's
    exposed communication share."""
    import dataclasses

    extra = []
    exposed = ranks[0].exposed
    if exposed is not None:
        extra.append(Figure("exposed_comm", 100.0 * exposed, "%", higher_is_better=False))
    rates = (*result.rates, Rate("tokens_per_device", tokens_per_device, "token/s",
                                 over="mean"))
    return dataclasses.replace(result, rates=rates, figures=(*result.figures, *extra))


def _flops(spec: zoo.ModelSpec, seq: int) -> Any:
    """Forward FLOPs per sequence: 2 x the matmul parameters (those outside lookups) + the
    attention's 4 x layers x seq x hidden, per token; x3 for training."""
    lookups = sizing.embedding_parameters(spec)
    if spec.arch == "gpt2":  # the token embedding is tied to the LM head, a matmul
        lookups -= spec.shape["vocab"] * spec.shape["hidden"]
    return transformer_flops(sizing.parameter_count(spec) - lookups, spec.shape["layers"],
                             spec.shape["hidden"], seq)


def _exposed_share(ctx: CaseContext, model: forms.Parallel, steps: int) -> float | None:
    """The share of the profiled steps' window in communication with no compute beside it
    (`accelbench profile`'s overlap analysis of this rank's trace); None with no steps."""
    if steps == 0:
        return None
    capture_module = "accelbench.profile.capture"
    schedule = resolve_entry(f"{capture_module}:Schedule")(wait=0, warmup=1, active=steps)
    profile_steps = resolve_entry(f"{capture_module}:profile_steps")
    analyze_file = resolve_entry("accelbench.profile.analysis:analyze_file")
    with tempfile.TemporaryDirectory(prefix="accelbench-scale-") as folder:
        capture = profile_steps(model.step, ctx.clock, model.device.type, schedule,
                                Path(folder))
        if not capture.trace_paths:
            return None
        analysis = analyze_file(capture.trace_paths[0])
    overlap, window = analysis.get("overlap"), analysis["window"]["duration_s"]
    if not overlap or window <= 0:
        return 0.0
    return float(min(1.0, overlap["exposed_s"] / window))


def _gather(torch: Any, mine: _Rank) -> list[_Rank]:
    """Every rank's figures, by rank; they travel as plain values, not as the class."""
    sent = astuple(mine)
    every = [sent] * torch.distributed.get_world_size()  # each replaced by that rank's
    torch.distributed.all_gather_object(every, sent)
    return [_Rank(*values) for values in every]


def _node() -> str:
    from accelbench.runner.nodes import node_name

    return node_name()


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
