"""From a model case's timing to its figures: throughput, tokens, MFU, percentiles, memory.

Throughput is total samples over total timed time: the timing core's samples are the
seconds per timed call (a window of steps), each averaged over the calls of one sample,
so the total time is their sum times the calls per sample: the rates are taken over
the mean time per call (`Rate.over = "mean"`), which is exactly total over total.

`throughput_superbench` is SuperBench's figure, beside it: single steps each timed on
its own (synchronised before and after), and the mean over those steps of samples per
step / step time. A mean of rates weighs fast steps more than slow ones, so it is never
below the total over total of the same steps and exceeds it when step times vary; and
each step pays a synchronisation that back-to-back windows do not.
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


@dataclass(frozen=True)
class PerStep:
    """Single steps timed on their own, for SuperBench's throughput."""

    samples: int  # per step (all ranks' with data parallelism)
    seconds: tuple[float, ...]  # one per step
    stopped: str  # why the steps stopped: "steps" (as many as asked) or "time budget"


def mean_step_throughput(samples_per_step: float, step_seconds: Sequence[float]) -> float:
    """SuperBench's throughput: the mean over steps of samples per step / step time."""
    if not step_seconds or min(step_seconds) <= 0:
        raise ValueError("need at least one step, each with a positive time")
    return statistics.fmean(samples_per_step / s for s in step_seconds)


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
    per_step: PerStep | None = None,
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
    extra: dict[str, Any] = {}
    if per_step is not None:
        figures.append(Figure("throughput_superbench",
                              mean_step_throughput(per_step.samples, per_step.seconds),
                              "sample/s"))
        extra = {
            "throughput_superbench": (
                "SuperBench's method: mean over single steps of samples per step / step "
                "time, each step synchronised before and after (host clock), timed after "
                "the timed windows"),
            "superbench_steps_timed": len(per_step.seconds),
            "superbench_steps_stopped": per_step.stopped,
            "superbench_step_mean_s": statistics.fmean(per_step.seconds),
            "superbench_samples_per_step": per_step.samples,
            "superbench_step_seconds": list(per_step.seconds),
        }
    if peak_memory is not None:
        figures.append(Figure("peak_memory", float(peak_memory), "B", higher_is_better=False))
    if compile_time is not None:
        figures.append(Figure("compile_time", compile_time, "s", higher_is_better=False))
    details = {
        **details,
        "throughput": "total samples / total timed time (sum over every timed window)",
        **extra,
        "steps_per_call": work.steps,
        "samples_per_call": work.samples,
        "model_flop_per_call": work.flop,
        "timed_calls": len(timing.samples) * timing.number,
        "timed_seconds": sum(timing.samples) * timing.number,
    }
    return CaseResult(timing, rates=tuple(rates), figures=tuple(figures), details=details,
                      time_name=time_name, warnings=warnings)
