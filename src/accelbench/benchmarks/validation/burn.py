"""Burn-in: sustained GEMM for `seconds`, checked as it runs, throughput per interval.

The GEMM benchmark's own operands (`benchmarks.micro.gemm`, an n x n x n product) are
multiplied back to back; every `check_every` calls a sampled block of the result is
checked against float64 with the GEMM benchmark's tolerance (a result that goes wrong
under load fails the check at once, with when it happened), and the throughput of each
interval is kept. Throughput that falls by more than `max_sag` from the first interval
to the last is reported as degradation (a warning, with the intervals): what a device
that throttles under sustained load shows. The device's telemetry (power, clocks,
throttle reasons) is read over the whole burn.

Defaults: bf16, n = 8192 on a GPU and 1024 on the CPU; intervals of a twelfth of the
burn, between 0.25 and 10 seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.benchmarks.mathmode import tf32_worker_env
from accelbench.benchmarks.validation.modes import math_mode, require_precision
from accelbench.benchmarks.validation.verdict import TOLERANCE_SCALE, Verdict, conclude
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

BURN_DTYPES = ("fp32", "tf32", "fp16", "bf16")
GPU_SIZE, CPU_SIZE = 8192, 1024
BATCH_SECONDS = 0.05  # calls between two looks at the clock (and a device sync)


def auto_interval(seconds: float) -> float:
    return min(max(seconds / 12, 0.25), 10.0, seconds / 2)


@dataclass(frozen=True)
class BurnInParams:
    """The parameters of a burn-in case (`BENCHMARK.params`)."""

    seconds: float
    dtype: str
    size: int
    interval: float
    check_every: int
    max_sag: float
    tolerance_scale: float


def measure(ctx: CaseContext, params: BurnInParams) -> CaseResult:
    dtype, seconds = params.dtype, params.seconds
    require_precision(ctx.device, dtype)
    import torch

    from accelbench.benchmarks.micro.gemm import TOLERANCE, make_operands, relative_error
    from accelbench.core.dtypes import fp8_torch_name

    device = torch.device(ctx.device.torch_device)
    n = params.size or (CPU_SIZE if device.type == "cpu" else GPU_SIZE)
    interval = params.interval or auto_interval(seconds)
    tolerance = TOLERANCE[dtype] * params.tolerance_scale
    sync: Callable[[], Any] = (
        (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None))
    generator = torch.Generator().manual_seed(2)
    rows, cols = torch.randperm(n, generator=generator)[:16], torch.randperm(
        n, generator=generator)[:16]
    flop = 2.0 * n ** 3

    with math_mode(torch, dtype):
        ops = make_operands(torch, device, dtype, n, n, n, 1, 0, fp8_torch_name(ctx.device))

        def check(calls: int, elapsed: float, interval_index: int) -> float:
            error = relative_error(torch, ops, rows, cols)
            if not error <= tolerance:
                raise CaseFailed(
                    f"wrong result under load: relative error {error:.3g} exceeds "
                    f"{tolerance:.3g} for {dtype} at call {calls}, {elapsed:.1f} s into the "
                    f"burn-in (interval {interval_index + 1})",
                    figures=(Figure("error", error, "", higher_is_better=False),
                             Figure("tolerance", tolerance, "", higher_is_better=False)),
                    details={"calls": calls, "verdict": "fail"})
            return error

        run = sustain(ops.call, sync, check, seconds, interval, params.check_every, flop)
    if ctx.on_timed is not None:
        ctx.on_timed(run.start, run.end)
    intervals = run.intervals
    first, last, lowest, sag = throughput_sag(intervals, interval)
    peak = ctx.peak_flops(dtype)
    verdict = Verdict(run.worst, tolerance, "", None, extra=(
        Figure("throughput_first", first, "FLOP/s", peak=peak),
        Figure("throughput_last", last, "FLOP/s", peak=peak),
        Figure("throughput_min", lowest, "FLOP/s", peak=peak),
        Figure("sag", 100.0 * sag, "%", higher_is_better=False),
    ))
    warning = degradation(sag, params.max_sag)
    if warning:
        verdict = replace(verdict, warnings=(warning,))
    return conclude(verdict, {
        "n": n, "dtype": dtype, "seconds": run.end - run.start, "interval_s": interval,
        "calls": run.calls, "checks": run.checks, "check_every": params.check_every,
        "intervals": intervals, "max_sag": params.max_sag,
        "check": "a sampled 16 x 16 block against float64 (the GEMM benchmark's check)",
    })


def throughput_sag(intervals: list[dict[str, float]], interval: float
                   ) -> tuple[float, float, float, float]:
    """(first, last, lowest throughput, sag): how far the last interval fell below the
    first, as a share of the first. A last interval much shorter than the nominal one (the
    remainder of the burn) is noise, not a sag, and is left out."""
    full = [i for i in intervals if i["seconds"] >= interval / 2] or intervals
    first, last = full[0]["throughput"], full[-1]["throughput"]
    sag = 1.0 - last / first if first > 0 else 0.0
    return first, last, min(i["throughput"] for i in full), sag


def degradation(sag: float, max_sag: float) -> str | None:
    """The warning of a burn-in whose throughput sagged by more than `max_sag`."""
    if sag <= max_sag:
        return None
    return (f"degraded: throughput fell {sag:.1%} from the first interval to the last "
            f"(more than {max_sag:.0%})")


@dataclass
class Sustained:
    """What a burn did: its intervals, calls and checks, the worst error checked."""

    start: float
    end: float = 0.0
    intervals: list[dict[str, float]] = field(default_factory=list)
    calls: int = 0
    checks: int = 0
    worst: float = 0.0


def sustain(call: Callable[[], Any], sync: Callable[[], Any],
            check: Callable[[int, float, int], float], seconds: float, interval: float,
            every: int, work: float) -> Sustained:
    """`call` back to back for `seconds`, `check(calls, elapsed, interval)` after every
    `every` calls and at the end, and the throughput (`work` per call) of each interval.
    Calls go in batches that grow until one lasts BATCH_SECONDS / 2, with a device sync
    after each (a look at the clock must see the device's work done)."""
    run = Sustained(time.perf_counter())
    batch = 1
    while time.perf_counter() - run.start < seconds:
        began, done = time.perf_counter(), 0
        while True:
            t0 = time.perf_counter()
            count = min(batch, every - run.calls % every)  # up to the next check
            for _ in range(count):
                call()
            sync()
            run.calls += count
            done += count
            if run.calls % every == 0:
                run.checks += 1
                elapsed = time.perf_counter() - run.start
                run.worst = max(run.worst, check(run.calls, elapsed, len(run.intervals)))
            if count == batch and time.perf_counter() - t0 < BATCH_SECONDS / 2:
                batch *= 2
            now = time.perf_counter()
            if now - began >= interval or now - run.start >= seconds:
                break
        elapsed = time.perf_counter() - began
        run.intervals.append({"start_s": began - run.start, "seconds": elapsed,
                              "calls": done, "throughput": work * done / elapsed})
    run.end = time.perf_counter()
    run.checks += 1
    run.worst = max(run.worst, check(run.calls, run.end - run.start, len(run.intervals) - 1))
    return run


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be a positive number"


def _fraction(value: Any) -> str | None:
    return None if 0 < value < 1 else "must be a fraction between 0 and 1 (exclusive)"


def _burn_time(params: Mapping[str, Any]) -> float:
    return float(params.get("seconds", 0.0))


BENCHMARK = Benchmark(
    name="burn-in",
    family="validation",
    summary="Sustained GEMM for SECONDS with a correctness check every few calls and the "
    "throughput per interval; a wrong result fails, a sagging throughput is reported",
    entry="accelbench.benchmarks.validation.burn:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes"),
    params=(
        Param("seconds", "float", 60.0, help="how long to burn", check=_positive),
        Param("dtype", "str", "bf16", help="precision of the GEMM", choices=BURN_DTYPES),
        Param("size", "int", 0, help=f"n of the n x n x n GEMM (0: {GPU_SIZE} on GPUs, "
              f"{CPU_SIZE} on the CPU)", minimum=0),
        Param("interval", "float", 0.0, help="seconds per throughput interval (0: a twelfth "
              "of the burn, 0.25 to 10 s)", minimum=0.0),
        Param("check_every", "int", 20, help="calls between correctness checks", minimum=1,
              quiet_default=True),
        Param("max_sag", "float", 0.1, help="fall in throughput from the first interval to "
              "the last beyond which the burn-in reports degradation", check=_fraction,
              quiet_default=True),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    extra_time=_burn_time,
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=BurnInParams,
)
