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
from dataclasses import replace
from typing import Any

from accelbench.benchmarks.validation.modes import require_precision
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


def measure(ctx: CaseContext, params: dict[str, Any]) -> CaseResult:
    dtype, seconds = params["dtype"], params["seconds"]
    require_precision(ctx.device, dtype)
    import torch

    from accelbench.benchmarks.micro.gemm import (
        TOLERANCE,
        make_operands,
        matmul_precision,
        relative_error,
    )
    from accelbench.core.dtypes import fp8_torch_name

    device = torch.device(ctx.device.torch_device)
    n = params["size"] or (CPU_SIZE if device.type == "cpu" else GPU_SIZE)
    interval = params["interval"] or auto_interval(seconds)
    tolerance = TOLERANCE[dtype] * params["tolerance_scale"]
    sync: Callable[[], Any] = (
        (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None))
    generator = torch.Generator().manual_seed(2)
    rows, cols = torch.randperm(n, generator=generator)[:16], torch.randperm(
        n, generator=generator)[:16]
    flop = 2.0 * n ** 3
    intervals: list[dict[str, float]] = []
    worst = 0.0
    checks = calls = 0
    with matmul_precision(torch, dtype):
        ops = make_operands(torch, device, dtype, n, n, n, 1, 0, fp8_torch_name(ctx.device))
        start = time.perf_counter()
        batch = 1
        while time.perf_counter() - start < seconds:
            began, done = time.perf_counter(), 0
            while True:
                t0 = time.perf_counter()
                for _ in range(batch):
                    ops.call()
                sync()
                calls += batch
                done += batch
                if calls // params["check_every"] > checks:
                    checks = calls // params["check_every"]
                    error = relative_error(torch, ops, rows, cols)
                    worst = max(worst, error)
                    if not error <= tolerance:
                        _wrong(error, tolerance, dtype, calls, len(intervals), started=start,
                               intervals=intervals, flop=flop)
                if time.perf_counter() - t0 < BATCH_SECONDS / 2:
                    batch *= 2
                now = time.perf_counter()
                if now - began >= interval or now - start >= seconds:
                    break
            elapsed = time.perf_counter() - began
            intervals.append({"start_s": began - start, "seconds": elapsed, "calls": done,
                              "throughput": flop * done / elapsed})
        end = time.perf_counter()
        final = relative_error(torch, ops, rows, cols)
        checks += 1
        worst = max(worst, final)
        if not final <= tolerance:
            _wrong(final, tolerance, dtype, calls, len(intervals), started=start,
                   intervals=intervals, flop=flop)
    if ctx.on_timed is not None:
        ctx.on_timed(start, end)
    # A last interval much shorter than the others is noise, not a sag.
    full = [i for i in intervals if i["seconds"] >= interval / 2] or intervals
    first, last = full[0]["throughput"], full[-1]["throughput"]
    sag = 1.0 - last / first if first > 0 else 0.0
    peak = ctx.peak_flops(dtype)
    verdict = Verdict(worst, tolerance, "", None, extra=(
        Figure("throughput_first", first, "FLOP/s", peak=peak),
        Figure("throughput_last", last, "FLOP/s", peak=peak),
        Figure("throughput_min", min(i["throughput"] for i in full), "FLOP/s", peak=peak),
        Figure("sag", 100.0 * sag, "%", higher_is_better=False),
    ))
    if sag > params["max_sag"]:
        verdict = replace(verdict, warnings=(
            f"degraded: throughput fell {sag:.1%} from the first interval to the last "
            f"(more than {params['max_sag']:.0%})",))
    return conclude(verdict, {
        "n": n, "dtype": dtype, "seconds": end - start, "interval_s": interval,
        "calls": calls, "checks": checks, "check_every": params["check_every"],
        "intervals": intervals, "max_sag": params["max_sag"],
        "check": "a sampled 16 x 16 block against float64 (the GEMM benchmark's check)",
    })


def _wrong(error: float, tolerance: float, dtype: str, calls: int, interval: int, *,
           started: float, intervals: list[dict[str, float]], flop: float) -> None:
    after = time.perf_counter() - started
    raise CaseFailed(
        f"wrong result under load: relative error {error:.3g} exceeds {tolerance:.3g} for "
        f"{dtype} at call {calls}, {after:.1f} s into the burn-in (interval {interval + 1})",
        figures=(Figure("error", error, "", higher_is_better=False),
                 Figure("tolerance", tolerance, "", higher_is_better=False)),
        details={"intervals": intervals, "calls": calls, "verdict": "fail"})


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
)
