"""The `stress` benchmark: sustained power and thermal load for a stated time, judged as
DCGM's targeted stress and RVS's GST and IET judge it.

A GEMM runs back to back (the burn-in's loop, checked on a sampled block against float64
every few calls) while a second stream (a thread on the CPU) copies a large buffer
without pause, so the compute units and the memory are loaded at once. The device's
telemetry is sampled by the case itself over the whole run, and each GPU's ECC counters
are read before and after.

Findings:
- a result that goes wrong under load fails at once (the burn-in's check);
- throttling (a clock-event reason that holds the clock down: power, thermal, slowdown)
  active in more than `max_throttled` of the readings fails;
- a GFX clock whose median over the last fifth of the run is more than `max_clock_sag`
  below its median over the first fifth fails (a device that cannot hold its clock);
- an uncorrectable ECC count that rose during the run fails, a corrected one warns;
- throughput that fell more than `max_sag` from the first interval to the last warns.
What could not be read (no telemetry source, no vendor library) is said as a finding
that passes with the reason: the stress ran, and that part was not judged. The details
name what was judged and what was not (`judged`, `not_judged`); a pass that judged none
of throttling, clock and ECC (the CPU) is a pass of the load alone, shown as
"pass (load only)" (`verdict_scope`).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.collectives.sweep import SizeParam
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, conclude
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark
from accelbench.core.telemetry import GFX_CLOCK_MHZ, THROTTLE, Series

COPY_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}
NOT_JUDGED = "not judged"
TELEMETRY_INTERVAL_S = 0.5


@dataclass(frozen=True)
class StressParams:
    """The parameters of a stress case (`BENCHMARK.params`)."""

    seconds: float
    dtype: str
    size: int
    copy_bytes: int
    max_throttled: float
    max_clock_sag: float
    max_sag: float


def throttled_share(series: Series) -> float | None:
    """The share of readings with a clock-holding reason active; None without any."""
    values = [v for v in series.channel(THROTTLE) if v is not None]
    if not values:
        return None
    return sum(1 for v in values if int(v)) / len(values)


def clock_sag(series: Series) -> tuple[float, float, float] | None:
    """(first-fifth median, last-fifth median, sag as a share of the first) of the GFX
    clock; None with under ten readings."""
    clocks = [v for v in series.channel(GFX_CLOCK_MHZ) if v is not None]
    if len(clocks) < 10:
        return None
    fifth = len(clocks) // 5
    first, last = statistics.median(clocks[:fifth]), statistics.median(clocks[-fifth:])
    return first, last, (1.0 - last / first) if first > 0 else 0.0


def ecc_totals(gpu: Any) -> tuple[int, int] | None:
    """(corrected, uncorrectable + deferred) of one GPU reading, since the driver loaded:
    its "total" count where the library gives one, else the sum over blocks."""
    counts = [c for c in gpu.ecc or () if c.scope in (None, "volatile")]
    if not counts:
        return None
    totals = [c for c in counts if c.block == "total"] or counts
    return (sum(c.correctable or 0 for c in totals),
            sum((c.uncorrectable or 0) + (c.deferred or 0) for c in totals))


def judge(series: Series | None, missing: str | None, before: Sequence[Any],
          after: Sequence[Any], sag: float, params: StressParams) -> list[Finding]:
    """The stress's findings from its telemetry, the ECC readings before and after, and
    the throughput sag (see the module docstring for the rules)."""
    out: list[Finding] = []
    limit = params.max_throttled
    share = throttled_share(series) if series is not None else None
    throttle_rule = f"throttled in at most {limit:.0%} of the readings under load"
    if share is None:
        out.append(Finding("throttling", PASS, throttle_rule, f"{NOT_JUDGED}: no throttle "
                           f"readings ({missing or 'the telemetry has no throttle channel'})"))
    else:
        reasons = sorted(set(series.throttle_names.values())) if series else []
        out.append(Finding("throttling", FAIL if share > limit else PASS, throttle_rule,
                           f"throttled in {share:.0%} of {len(series.t) if series else 0} "
                           "readings" + (f" (reasons known: {', '.join(reasons[:6])})"
                                         if share > limit and reasons else ""),
                           {"throttled_share": share}, "ACCEL_THROTTLE"))
    clock = clock_sag(series) if series is not None else None
    clock_limit = params.max_clock_sag
    clock_rule = (f"the GFX clock holds: its last-fifth median at most {clock_limit:.0%} "
                  "below its first-fifth median")
    if clock is None:
        out.append(Finding("clock", PASS, clock_rule, f"{NOT_JUDGED}: under ten GFX clock "
                           "readings"))
    else:
        first, last, fell = clock
        out.append(Finding("clock", FAIL if fell > clock_limit else PASS, clock_rule,
                           f"GFX clock {first:.0f} MHz in the first fifth, {last:.0f} MHz in "
                           "the last", {"first_mhz": first, "last_mhz": last, "sag": fell},
                           "ACCEL_CLOCK_SAG"))
    out += _ecc_findings(before, after)
    max_sag = params.max_sag
    out.append(Finding("throughput", WARN if sag > max_sag else PASS,
                       f"throughput falls at most {max_sag:.0%} from the first interval to "
                       "the last", f"throughput fell {max(sag, 0.0):.1%}", {"sag": sag},
                       "ACCEL_THROUGHPUT_SAG"))
    return out


def _ecc_findings(before: Sequence[Any], after: Sequence[Any]) -> list[Finding]:
    rule = ("no uncorrectable ECC error during the stress (fails); no corrected one "
            "(warns)")
    if not before or not after:
        return [Finding("ecc", PASS, rule, f"{NOT_JUDGED}: no GPU ECC reading (amdsmi or NVML)")]
    out = []
    earlier = {g.index: ecc_totals(g) for g in before}
    for gpu in after:
        then, now = earlier.get(gpu.index), ecc_totals(gpu)
        if then is None or now is None:
            continue
        corrected, uncorrected = now[0] - then[0], now[1] - then[1]
        level = FAIL if uncorrected > 0 else WARN if corrected > 0 else PASS
        out.append(Finding(f"gpu{gpu.index}", level, rule,
                           f"ECC during the stress: {corrected} corrected, {uncorrected} "
                           "uncorrectable", {"corrected": corrected, "uncorrectable": uncorrected,
                                             "before": list(then), "after": list(now)},
                           "ACCEL_ECC_DBE" if uncorrected > 0 else "ACCEL_ECC_SBE"))
    return out or [Finding("ecc", PASS, rule, f"{NOT_JUDGED}: no GPU reports ECC counts")]


def measure(ctx: CaseContext, params: StressParams) -> CaseResult:
    import torch

    from accelbench.benchmarks.micro.gemm import TOLERANCE, make_operands, relative_error
    from accelbench.benchmarks.validation.burn import (
        CPU_SIZE,
        GPU_SIZE,
        auto_interval,
        sustain,
        throughput_sag,
    )
    from accelbench.benchmarks.validation.modes import math_mode, require_precision
    from accelbench.core.dtypes import fp8_torch_name
    from accelbench.core.measurement import CaseFailed

    dtype, seconds = params.dtype, params.seconds
    require_precision(ctx.device, dtype)
    device = torch.device(ctx.device.torch_device)
    n = params.size or (CPU_SIZE if device.type == "cpu" else GPU_SIZE)
    interval = auto_interval(seconds)
    tolerance = TOLERANCE[dtype]
    sync: Callable[[], Any] = (
        (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None))
    generator = torch.Generator().manual_seed(3)
    rows = torch.randperm(n, generator=generator)[:16]
    cols = torch.randperm(n, generator=generator)[:16]
    before = _gpus(ctx)
    sampler, missing = _sampler(ctx)
    copier = _Copier(torch, device, params.copy_bytes or COPY_BYTES[device.type])
    with math_mode(torch, dtype):
        ops = make_operands(torch, device, dtype, n, n, n, 1, 0, fp8_torch_name(ctx.device))

        def check(calls: int, elapsed: float, index: int) -> float:
            error = relative_error(torch, ops, rows, cols)
            if not error <= tolerance:
                raise CaseFailed(f"wrong result under stress: relative error {error:.3g} "
                                 f"exceeds {tolerance:.3g} for {dtype} at call {calls}, "
                                 f"{elapsed:.1f} s in", details={"verdict": FAIL})
            return error

        copier.start()
        try:
            run = sustain(ops.call, sync, check, seconds, interval, 20, 2.0 * n ** 3)
        finally:
            copied = copier.stop()
            series = sampler.stop() if sampler is not None else None
    if ctx.on_timed is not None:
        ctx.on_timed(run.start, run.end)
    first, last, lowest, sag = throughput_sag(run.intervals, interval)
    findings = judge(series, missing, before, _gpus(ctx), sag, params)
    scope = verdict_scope(findings)
    peak = ctx.peak_flops(dtype)
    figures = (Figure("throughput_first", first, "FLOP/s", peak=peak),
               Figure("throughput_last", last, "FLOP/s", peak=peak),
               Figure("throughput_min", lowest, "FLOP/s", peak=peak),
               Figure("copy_bandwidth", copied / (run.end - run.start), "B/s"))
    return conclude(findings, {
        "n": n, "dtype": dtype, "seconds": run.end - run.start, "calls": run.calls,
        "checks": run.checks, "intervals": run.intervals, "copied_bytes": copied,
        "telemetry_sources": list(series.sources) if series else [],
        **scope,
    }, None, figures)


# The findings of the device's own state under load; the result and the throughput are
# judged on every device.
DEVICE_FINDINGS = ("throttling", "clock", "ecc")


def verdict_scope(findings: Sequence[Finding]) -> dict[str, Any]:
    """What the findings judged and did not (`judged`, `not_judged`: "result" is the
    checked GEMM), and `verdict_scope` where a device finding was not judged: "load only"
    where none was, else the ones left out."""
    unjudged = sorted({_kind(f) for f in findings if f.message.startswith(NOT_JUDGED)})
    judged = ["result", *sorted({_kind(f) for f in findings} - set(unjudged))]
    scope: dict[str, Any] = {"judged": judged, "not_judged": unjudged}
    device_unjudged = [k for k in DEVICE_FINDINGS if k in unjudged]
    if len(device_unjudged) == len(DEVICE_FINDINGS):
        scope["verdict_scope"] = "load only"
    elif device_unjudged:
        scope["verdict_scope"] = f"{', '.join(device_unjudged)} not judged"
    return scope


def _kind(f: Finding) -> str:
    """A GPU's ECC finding is named after the GPU; its kind is ECC."""
    return "ecc" if f.subject.startswith("gpu") or f.subject == "ecc" else f.subject


def _gpus(ctx: CaseContext) -> tuple[Any, ...]:
    if ctx.device.type == "cpu":
        return ()
    from accelbench.benchmarks.health import gpu

    return gpu.read_gpus({"rocm": "amd", "cuda": "nvidia"}.get(ctx.device.platform)).gpus


def _sampler(ctx: CaseContext) -> tuple[Any, str | None]:
    """The device's telemetry, sampled from now on by the case itself."""
    from accelbench.env.telemetry import TelemetrySampler, open_sources, vendor_index

    try:
        sources, missing = open_sources(ctx.device.type, vendor_index(ctx.device.index))
    except Exception as exc:  # a vendor library that fails must not cost the stress
        return None, f"telemetry could not be opened: {exc}"
    why = "; ".join(f"{k}: {v}" for k, v in missing.items()) or None
    return TelemetrySampler(sources, missing, TELEMETRY_INTERVAL_S).start(), why


class _Copier:
    """A buffer copied back and forth without pause beside the GEMM: on its own stream
    on a GPU, on a thread on the CPU. `stop()` returns the bytes copied."""

    def __init__(self, torch: Any, device: Any, nbytes: int) -> None:
        self._torch, self._device = torch, device
        self._a = torch.ones(nbytes, dtype=torch.uint8, device=device)
        self._b = torch.empty_like(self._a)
        self._stop = threading.Event()
        self._copied = 0
        self._thread = threading.Thread(target=self._run, name="accelbench-stress-copy",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        torch = self._torch
        stream = torch.cuda.Stream(self._device) if self._device.type == "cuda" else None
        while not self._stop.is_set():
            if stream is not None:
                with torch.cuda.stream(stream):
                    self._b.copy_(self._a, non_blocking=True)
                stream.synchronize()
            else:
                self._b.copy_(self._a)
            self._copied += self._a.numel()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self._copied


def _stress_time(params: Mapping[str, Any]) -> float:
    return float(params.get("seconds", 0.0))


def _fraction(value: Any) -> str | None:
    return None if 0 <= value < 1 else "must be a fraction from 0 to below 1"


BENCHMARK = Benchmark(
    name="stress",
    family="health",
    summary="Sustained power and thermal stress: GEMM and a memory copy at once for SECONDS, "
    "checked under load; fails on a wrong result, throttling beyond a share, a sagging "
    "clock or an ECC count that rises",
    entry="accelbench.benchmarks.health.stress:measure",
    interleaves=False,  # a copy thread of its own runs beside the GEMM
    sources=("accelbench.benchmarks.validation.burn", "accelbench.benchmarks.health.findings"),
    params=(
        Param("seconds", "float", 60.0, help="how long to stress", minimum=1.0),
        Param("dtype", "str", "bf16", help="precision of the GEMM",
              choices=("fp32", "tf32", "fp16", "bf16")),
        Param("size", "int", 0, help="n of the n x n x n GEMM (0: the burn-in's)", minimum=0),
        SizeParam("copy_bytes", "int", 0, help="bytes of the buffer copied beside it; K/M/G "
                  "suffixes (0: 64 MiB on the CPU, 1 GiB on GPUs)", minimum=0),
        Param("max_throttled", "float", 0.1, help="share of the readings that may show "
              "throttling", check=_fraction),
        Param("max_clock_sag", "float", 0.1, help="fall of the GFX clock, last fifth against "
              "first, that fails", check=_fraction),
        Param("max_sag", "float", 0.1, help="fall in throughput that warns", check=_fraction),
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    extra_time=_stress_time,
    views=("accelbench.benchmarks.health.view:sections",),
    typed=StressParams,
)
