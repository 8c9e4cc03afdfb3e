"""The figures a device computes: GEMM throughput per dtype, memory read/write/copy
bandwidth, launch latency, and a small transformer's training throughput.

GEMM and copy run the micro benchmarks' own measure functions (the result checked
against float64, or the copy compared, before anything is timed; fp32 with TF32 off and
tf32 with it on, read back, as benchmarks.mathmode sets them). Every timed value is the
median of its samples, each sample being the work of a block of calls over the block's
time (core.timing), except `train`, whose value is all the model FLOPs over all the
timed time (a slow step is part of training).
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.benchmarks.qualify.figures_base import (
    MIB,
    Reading,
    cpu_context,
    cpu_threads,
    device_context,
    gpu_indices,
    gpu_subject,
    on_device,
    share_of,
)
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseSkipped

GPU_GEMM_N = 8192  # square GEMM on a GPU, made smaller only where one call would not fit
CPU_GEMM_N = 4096  # the largest square GEMM tried on the CPU
MIN_GEMM_N = 128
# A GEMM's size is halved while a call would take more than this share of a subject's
# budget: on a GPU only where one call of 8192 would not fit (fp64 on a card with little
# fp64), so that a gate's figure is that of the same GEMM at every budget.
CALL_SHARE = {"cuda": 1 / 3, "cpu": 1 / 10}
GPU_MEMORY_MIB = 1024  # at least; 8x the L2 where that is more (MI300's Infinity Cache)
CPU_MEMORY_MIB = 256  # at least; 4x the last-level cache where that is more
MEDIAN_OF_SAMPLES = "median of the samples (each: a block of calls' work over its time)"


def subjects(ctx: CaseContext) -> list[int | None]:
    """The GPUs of the node by index, or [None] for the CPU."""
    return list(gpu_indices(ctx)) or [None]


def subject_context(ctx: CaseContext, index: int | None, share: float,
                    host_clock: bool = False) -> CaseContext:
    if index is None:
        return cpu_context(ctx, share)
    return device_context(ctx, index, share, host_clock=host_clock)


def place(index: int | None) -> contextlib.AbstractContextManager[None]:
    return on_device(index) if index is not None else contextlib.nullcontext()


def name(index: int | None) -> str:
    return "cpu" if index is None else gpu_subject(index)


def per_sample(amount: float, seconds: Sequence[float], scale: float) -> tuple[float, ...]:
    """Each sample's rate: `amount` of work per call over its seconds per call, / scale."""
    return tuple(amount / s / scale if s > 0 else math.inf for s in seconds)


def cores(ctx: CaseContext) -> int:
    return cpu_threads() if ctx.device.type == "cpu" else 1


# ------------------------------------------------------------------------------- GEMM


def gemm(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """A square GEMM of the figure's dtype on each device, checked, then timed."""
    import torch

    from accelbench.benchmarks.micro import gemm as micro
    from accelbench.core.dtypes import fp8_torch_name, unsupported_reason

    dtype = figure.removeprefix("gemm-")
    lacking = unsupported_reason(ctx.device, dtype)  # a node's GPUs are of one model
    if lacking:
        raise CaseSkipped(lacking)
    if dtype == "fp8" and not hasattr(torch, "_scaled_mm"):
        raise CaseSkipped(f"this PyTorch ({torch.__version__}) has no fp8 matmul "
                          "(torch._scaled_mm)")
    indices = subjects(ctx)
    share = share_of(seconds, len(indices))
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    sizes: dict[str, int] = {}
    checks: dict[str, Any] = {}
    for index in indices:
        sub = subject_context(ctx, index, share)
        lacking = unsupported_reason(sub.device, dtype)
        if lacking:
            raise CaseSkipped(f"{name(index)}: {lacking}")
        with place(index):
            try:
                n = gemm_size(torch, sub, dtype, share, fp8_torch_name(sub.device))
                result = micro.measure(sub, micro.GemmParams(str(n), dtype, 1))
            except (RuntimeError, NotImplementedError) as exc:
                if dtype != "fp8":
                    raise
                raise CaseSkipped(f"fp8 matmul (torch._scaled_mm) does not run on "
                                  f"{sub.device.name}: {_line(exc)}") from exc
        assert result.timing is not None
        subject = name(index)
        samples[subject] = per_sample(result.rates[0].amount, result.timing.samples, 1e12)
        values[subject] = statistics.median(samples[subject])
        sizes[subject] = n
        checks[subject] = {k: result.details.get(k) for k in (
            "check_rel_error_full", "tf32_in_effect", "fp8_format") if k in result.details}
    return Reading(figure, values, samples, details={
        "dtype": dtype, "n": sizes, "flop_per_call": "2*n^3", "derived": MEDIAN_OF_SAMPLES,
        "seconds": seconds, "seconds_per_subject": share, "checks": checks,
        "op": "torch._scaled_mm" if dtype == "fp8" else "torch.matmul"}, cores=cores(ctx))


def gemm_size(torch: Any, ctx: CaseContext, dtype: str, share: float, fp8_name: str) -> int:
    """The largest square size (halving from 8192 on a GPU, 4096 on the CPU) whose call
    a probe GEMM predicts to take at most its CALL_SHARE of the subject's share."""
    from accelbench.benchmarks.micro.gemm import make_operands

    gpu = ctx.device.type == "cuda"
    device = torch.device(ctx.device.torch_device)
    probe = 1024 if gpu else 256
    ops = make_operands(torch, device, dtype, probe, probe, probe, 1, 0, fp8_name)

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize(device)

    ops.call()
    sync()
    fastest = math.inf
    for _ in range(3):
        started = time.perf_counter()
        ops.call()
        sync()
        fastest = min(fastest, time.perf_counter() - started)
    flop_rate = 2.0 * probe ** 3 / max(fastest, 1e-9)
    n = GPU_GEMM_N if gpu else CPU_GEMM_N
    while n > MIN_GEMM_N and 2.0 * n ** 3 / flop_rate > share * CALL_SHARE[ctx.device.type]:
        n //= 2
    return n


# ----------------------------------------------------------------------------- memory


def memory_mib(ctx: CaseContext, size_mib: float | None) -> int:
    """One buffer's MiB: as asked, else well beyond the caches."""
    if size_mib is not None:
        return max(1, round(size_mib))
    if ctx.device.type == "cuda":
        return max(GPU_MEMORY_MIB, 8 * (ctx.device.l2_cache_bytes or 0) // MIB)
    from accelbench.runner.devices import cpu_llc_bytes

    return max(CPU_MEMORY_MIB, 4 * cpu_llc_bytes() // MIB)


def memory(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """Read (a sum), write (a fill) or copy one large float32 buffer on each device; copy
    counts the bytes read plus the bytes written, as STREAM and BabelStream do."""
    import torch

    from accelbench.benchmarks.micro import memory as micro

    op = figure.removeprefix("memory-")
    indices = subjects(ctx)
    share = share_of(seconds, len(indices))
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    mib = memory_mib(ctx, size_mib)
    for index in indices:
        sub = subject_context(ctx, index, share)
        with place(index):
            if op == "copy":
                result = micro.measure(sub, micro.MemoryParams("copy", mib, True))
                assert result.timing is not None
                seconds_per_call, moved = result.timing.samples, result.rates[0].amount
            else:
                seconds_per_call, moved = _read_or_write(torch, sub, op, mib * MIB // 4)
        subject = name(index)
        samples[subject] = per_sample(moved, seconds_per_call, 1e9)
        values[subject] = statistics.median(samples[subject])
    return Reading(figure, values, samples, details={
        "op": {"read": "torch.sum of the buffer", "write": "fill_ of the buffer",
               "copy": "copy_ between two buffers"}[op],
        "buffer_mib": mib, "element": "float32",
        "bytes_per_call": f"{2 if op == 'copy' else 1} * buffer bytes",
        "derived": MEDIAN_OF_SAMPLES, "seconds": seconds, "seconds_per_subject": share},
        cores=cores(ctx))


def _read_or_write(torch: Any, ctx: CaseContext, op: str, count: int
                   ) -> tuple[tuple[float, ...], int]:
    device = torch.device(ctx.device.torch_device)
    x = torch.ones(count, dtype=torch.float32, device=device)
    call: Callable[[], Any]
    if op == "read":
        out = torch.zeros((), dtype=torch.float32, device=device)
        call = functools.partial(torch.sum, x, dim=0, out=out)
        call()
        got = float(out)
        ok = abs(got - count) <= 1e-3 * count
    else:
        call = functools.partial(x.fill_, 2.0)
        call()
        got = float(x.sum(dtype=torch.float64))
        ok = got == 2.0 * count
    if not ok:
        raise CaseFailed(f"wrong result: the memory {op} left {got:g} where "
                         f"{count * (1 if op == 'read' else 2):g} was due")
    return ctx.time(call).samples, count * 4


# ----------------------------------------------------------------------------- launch


def launch(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """A GPU's time to launch a one-element add and wait for it (a synchronise after each
    call); on the CPU, the dispatch of that add (PyTorch's operator overhead)."""
    import torch

    indices = subjects(ctx)
    share = share_of(seconds, len(indices))
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    for index in indices:
        sub = subject_context(ctx, index, share, host_clock=True)
        with place(index):
            x = torch.zeros(1, dtype=torch.int64, device=sub.device.torch_device)
            fn: Callable[[], Any]
            if index is None:
                fn = functools.partial(x.add_, 1)
            else:
                def fn(x: Any = x, index: int = index) -> None:
                    x.add_(1)
                    torch.cuda.synchronize(index)
            before = int(x.item())
            for _ in range(3):
                fn()
            if int(x.item()) - before != 3:
                raise CaseFailed("wrong result: 3 launches of x.add_(1) did not add 3")
            timing = sub.time(fn)
        subject = name(index)
        samples[subject] = tuple(s * 1e6 for s in timing.samples)
        values[subject] = statistics.median(samples[subject])
    return Reading(figure, values, samples, details={
        "op": "x.add_(1) on a 1-element int64 tensor"
              + ("" if indices == [None] else ", then torch.cuda.synchronize"),
        "derived": "median of the samples (each: a block of calls' mean time per call)",
        "seconds": seconds, "seconds_per_subject": share}, cores=cores(ctx))


# ------------------------------------------------------------------------------ train

# A GPT-2-small-shaped model on a GPU, bf16 autocast; a small one on the CPU, fp32.
GPU_MODEL = ("gpt2-small", "", 8, 1024)  # (zoo model, overrides, batch, sequence)
CPU_MODEL = ("gpt2-tiny", "hidden=128,heads=4", 8, 64)


def train(ctx: CaseContext, figure: str, seconds: float, size_mib: float | None) -> Reading:
    """A small GPT-style transformer (random weights, built from its config) trained on
    each device for its share of `seconds`; model FLOPs (models.flops: 6*N + 12*L*T*d per
    token) per second."""
    import torch

    from accelbench.benchmarks.models import flops, zoo
    from accelbench.benchmarks.models.precision import Precision
    from accelbench.benchmarks.models.trainer import ModelSetup, Trainer, free_cached
    from accelbench.core.dtypes import unsupported_reason

    indices = subjects(ctx)
    share = share_of(seconds, len(indices))
    model, overrides, batch, seq = CPU_MODEL if indices == [None] else GPU_MODEL
    spec = zoo.get_spec(model, overrides)
    values: dict[str, float] = {}
    samples: dict[str, tuple[float, ...]] = {}
    runs: dict[str, dict[str, Any]] = {}
    precision = "fp32"  # on the CPU; bf16 autocast on a GPU (fp16 where it has no bf16)
    if indices != [None]:
        precision = "fp16" if unsupported_reason(ctx.device, "bf16") else "bf16"
    setup = ModelSetup(spec, Precision(precision), batch, seq)
    per_step = 0.0
    for index in indices:
        device = "cpu" if index is None else f"cuda:{index}"
        with place(index):
            trainer = Trainer(torch, setup, device)
            try:
                per_step = flops.model_flops(torch, spec, trainer.module, seq, 224).per_step(
                    batch, training=True)
                run = _train_for(ctx, trainer, share)
            finally:
                trainer.release()
                free_cached(torch, device)
        subject = name(index)
        steps, elapsed = sum(run[0]), sum(run[1])
        samples[subject] = tuple(per_step * k / s / 1e12 for k, s in zip(*run, strict=True))
        values[subject] = per_step * steps / elapsed / 1e12
        runs[subject] = {"steps": steps, "seconds": elapsed,
                         "tokens_per_s": batch * seq * steps / elapsed}
    return Reading(figure, values, samples, details={
        "model": model, "shape": dict(spec.shape), "batch": batch, "seq": seq,
        "precision": Precision(precision).label, "flop_per_step": per_step,
        "flop_formula": "6*N + 12*L*T*d per token (models.flops), N the matmul parameters",
        "derived": "all model FLOPs over all timed seconds (samples: per block of steps)",
        "runs": runs, "seconds": seconds, "seconds_per_subject": share}, cores=cores(ctx))


def _train_for(ctx: CaseContext, trainer: Any, share: float
               ) -> tuple[list[int], list[float]]:
    """Steps in blocks of about a tenth of the share, each block timed to its end; two
    warm-up steps first. Returns (steps per block, seconds per block)."""
    trainer.steps(1)
    trainer.sync()
    started = time.perf_counter()
    trainer.steps(1)
    trainer.sync()
    one = max(time.perf_counter() - started, 1e-6)
    block = max(1, int(0.1 * share / one))
    counts: list[int] = []
    spent: list[float] = []
    window = time.perf_counter()
    deadline = window + 0.8 * share
    while not counts or (len(counts) < 100 and time.perf_counter() < deadline):
        started = time.perf_counter()
        trainer.steps(block)
        trainer.sync()
        counts.append(block)
        spent.append(time.perf_counter() - started)
    if ctx.on_timed is not None:
        ctx.on_timed(window, time.perf_counter())
    loss = trainer.last_loss
    if loss is None or not math.isfinite(float(loss)):
        raise CaseFailed(f"training diverged: the last loss is {loss}")
    return counts, spent


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
