"""From a model case's timing to its figures: throughput, tokens, MFU, percentiles, memory.

Throughput is total samples over total timed time: the timing core's samples are the
seconds per timed call (a window of steps), each averaged over the calls of one sample,
so the total time is their sum times the calls per sample: the rates are taken over
the mean time per call (`Rate.over = "mean"`), which is exactly total over total.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core.measurement import CaseResult, Figure, Rate
from accelbench.core.timing import Timing

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Work:
    """What one timed call does."""

    samples: int
    tokens: int  # 0 when the model has no tokens
    flop: float  # model FLOPs
    steps: int


def mean_seconds_per_call(timing: Timing) -> float:
    return statistics.fmean(timing.samples)


def percentile_figures(seconds: Sequence[float]) -> tuple[Figure, ...]:
    """p50, p90, p99 of the given times (linear interpolation between order statistics)."""
    if not seconds:
        return ()
    ordered = sorted(seconds)
    return tuple(Figure(f"p{q}", _percentile(ordered, q), "s", higher_is_better=False)
                 for q in PERCENTILES)


def _percentile(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def model_result(
    timing: Timing,
    work: Work,
    *,
    peak_flops: float | None,
    peak_memory: int | None,
    step_times: Sequence[float],
    compile_time: float | None,
    details: dict[str, Any],
    time_name: str,
    warnings: tuple[str, ...] = (),
) -> CaseResult:
    rates = [Rate("throughput", work.samples, "sample/s", over="mean")]
    if work.tokens:
        rates.append(Rate("tokens", work.tokens, "token/s", over="mean"))
    rates.append(Rate("model_flops", work.flop, "FLOP/s", peak_flops, over="mean"))
    figures: list[Figure] = []
    achieved = work.flop / mean_seconds_per_call(timing)
    if peak_flops:
        figures.append(Figure("mfu", 100.0 * achieved / peak_flops, "%"))
    figures.extend(percentile_figures(step_times))
    if peak_memory is not None:
        figures.append(Figure("peak_memory", float(peak_memory), "B", higher_is_better=False))
    if compile_time is not None:
        figures.append(Figure("compile_time", compile_time, "s", higher_is_better=False))
    details = {
        **details,
        "throughput": "total samples / total timed time (sum over every timed window)",
        "steps_per_call": work.steps,
        "samples_per_call": work.samples,
        "model_flop_per_call": work.flop,
        "timed_calls": len(timing.samples) * timing.number,
        "timed_seconds": sum(timing.samples) * timing.number,
    }
    return CaseResult(timing, rates=tuple(rates), figures=tuple(figures), details=details,
                      time_name=time_name, warnings=warnings)
