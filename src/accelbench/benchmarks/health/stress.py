"""The `stress` benchmark: sustained power and thermal load for a stated time, judged as
DCGM's targeted stress and RVS's GST and IET judge it.

A GEMM runs back to back (the burn-in's loop, checked on a sampled block against float64
every few calls) while a second stream (a thread on the CPU) copies a large buffer
without pause, so the compute units and the memory are loaded at once. The device's
telemetry is sampled by the case itself over the whole run, and each GPU's ECC counters
are read before and after.

Findings:
- a result that goes wrong under load fails at once (the burn-in's check);
- a slowdown (a thermal or hardware one: env.telemetry.throttle) active in more than
  `max_throttled` of the readings fails. A GPU held at its power limit (NVML's
  SwPowerCap, the SMU's PPT) or by its sync-boost group is a healthy GPU under full
  load: those reasons are recorded, not judged, as DCGM's diagnostic judges them;
- an uncorrectable ECC count that rose during the run fails, a corrected one warns;
- throughput that fell more than `max_sag` from the first interval to the last warns.
The GFX clock is recorded (its first and last fifths), not judged: a GPU boosts while it
is cool and settles, as it warms at its power limit, to the lower clock that limit
sustains. DCGM's targeted stress and RVS's GST judge no clock either: DCGM fails on the
throughput reached (nvvs/plugin_src/targetedstress/TargetedStress_wrapper.cpp,
CheckGpuPerf) and on the slowdown reasons (nvvs/src/DcgmRecorder.cpp,
CheckForClocksEvent), GST counts intervals below its throughput target as violations
(gst.so/src/gst_worker.cpp, check_gflops_violation). What a falling clock costs shows in
the throughput, and why it falls in the reasons. The amd-smi CLI says THROTTLED without
a reason: where that is all there is, throttling is not judged.
What could not be read (no telemetry source, no vendor library) is said as a finding
that passes with the reason: the stress ran, and that part was not judged. The details
name what was judged and what was not (`judged`, `not_judged`); a pass that judged
neither throttling nor ECC (the CPU) is a pass of the load alone, shown as
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
from accelbench.env.telemetry.throttle import active_reasons, is_slowdown, says_why

COPY_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}
NOT_JUDGED = "not judged"
NOT_RECORDED = "not recorded"
TELEMETRY_INTERVAL_S = 0.5


@dataclass(frozen=True)
class StressParams:
    """The parameters of a stress case (`BENCHMARK.params`)."""

    seconds: float
    dtype: str
    size: int
    copy_bytes: int
    max_throttled: float
    max_sag: float


THROTTLE_RULE = ("a thermal or hardware slowdown (NVML's HW slowdown, SW and HW thermal "
                 "slowdown, HW power brake; AMD's thermal, VR-hot and PROCHOT limits) active "
                 "in at most {limit:.0%} of the readings under load; the power limit, sync "
                 "boost and clock settings are recorded, not judged, as DCGM's diagnostic "
                 "judges them")
CLOCK_RULE = ("recorded, not judged: a GPU that settles from its boost clock to the clock "
              "its power limit sustains is healthy; the throughput and the slowdown reasons "
              "judge the load, as DCGM's targeted stress and RVS's GST do")


@dataclass(frozen=True)
class Throttling:
    """What the THROTTLE channel said over a run: its readings, how many of them had a
    slowdown active, how many others had a reason active that does not say why (the
    amd-smi CLI's THROTTLED), and the reasons seen active, slowdowns and others apart."""

    readings: int
    slowed: int
    unexplained: int
    slowdowns: tuple[str, ...]
    others: tuple[str, ...]

    @property
    def share(self) -> float:
        """The share of the readings with a slowdown active."""
        return self.slowed / self.readings


def throttling(series: Series) -> Throttling | None:
    """The run's throttle readings, judged reason by reason; None without any."""
    masks = [int(v) for v in series.channel(THROTTLE) if v is not None]
    if not masks:
        return None
    slowed = unexplained = 0
    seen: dict[str, None] = {}  # in the order first seen
    for mask in masks:
        names = active_reasons(mask, series.throttle_names).values()
        if any(is_slowdown(name) for name in names):
            slowed += 1
        elif not all(says_why(name) for name in names):
            unexplained += 1
        seen.update(dict.fromkeys(names))
    return Throttling(len(masks), slowed, unexplained,
                      tuple(n for n in seen if is_slowdown(n)),
                      tuple(n for n in seen if not is_slowdown(n)))


def slowdown_share(series: Series) -> float | None:
    """The share of readings with a slowdown active; None without throttle readings."""
    found = throttling(series)
    return found.share if found is not None else None


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
    out: list[Finding] = [_throttling_finding(series, missing, params.max_throttled)]
    clock = clock_sag(series) if series is not None else None
    if clock is None:
        out.append(Finding("clock", PASS, CLOCK_RULE, f"{NOT_RECORDED}: under ten GFX clock "
                           "readings"))
    else:
        first, last, fell = clock
        out.append(Finding("clock", PASS, CLOCK_RULE, f"GFX clock {first:.0f} MHz in the "
                           f"first fifth, {last:.0f} MHz in the last",
                           {"first_mhz": first, "last_mhz": last, "sag": fell}))
    out += _ecc_findings(before, after)
    max_sag = params.max_sag
    out.append(Finding("throughput", WARN if sag > max_sag else PASS,
                       f"throughput falls at most {max_sag:.0%} from the first interval to "
                       "the last", f"throughput fell {max(sag, 0.0):.1%}", {"sag": sag},
                       "ACCEL_THROUGHPUT_SAG"))
    return out


def _throttling_finding(series: Series | None, missing: str | None, limit: float
                        ) -> Finding:
    rule = THROTTLE_RULE.format(limit=limit)
    found = throttling(series) if series is not None else None
    if found is None:
        return Finding("throttling", PASS, rule, f"{NOT_JUDGED}: no throttle readings "
                       f"({missing or 'the telemetry has no throttle channel'})")
    reading = {"slowdown_share": found.share, "slowdowns": list(found.slowdowns),
               "others": list(found.others)}
    unexplained = found.unexplained / found.readings
    if found.share <= limit and unexplained > limit:
        # A slowdown cannot be told from the power limit: neither passed nor failed.
        return Finding("throttling", PASS, rule, f"{NOT_JUDGED}: held in {unexplained:.0%} "
                       f"of {found.readings} readings by {', '.join(found.others)}, which "
                       "does not say why", {**reading, "unexplained_share": unexplained})
    what = f"slowdown ({', '.join(found.slowdowns)})" if found.slowed else "no slowdown"
    share = f" in {found.share:.0%} of" if found.slowed else " in"
    recorded = (f"; {', '.join(found.others)} active: recorded, not judged"
                if found.others else "")
    return Finding("throttling", FAIL if found.share > limit else PASS, rule,
                   f"{what}{share} {found.readings} readings{recorded}", reading,
                   "ACCEL_THROTTLE")


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
DEVICE_FINDINGS = ("throttling", "ecc")
# Findings that record, and judge nothing: neither judged nor not judged.
RECORDS = frozenset({"clock"})


def verdict_scope(findings: Sequence[Finding]) -> dict[str, Any]:
    """What the findings judged and did not (`judged`, `not_judged`: "result" is the
    checked GEMM), and `verdict_scope` where a device finding was not judged: "load only"
    where none was, else the ones left out."""
    kinds = {_kind(f) for f in findings} - RECORDS
    unjudged = sorted({_kind(f) for f in findings if f.message.startswith(NOT_JUDGED)}
                      & kinds)
    judged = ["result", *sorted(kinds - set(unjudged))]
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
    "checked under load; fails on a wrong result, a thermal or hardware slowdown beyond a "
    "share of the readings, or an ECC count that rises",
    entry="accelbench.benchmarks.health.stress:measure",
    interleaves=False,  # a copy thread of its own runs beside the GEMM
    sources=("accelbench.benchmarks.validation.burn", "accelbench.benchmarks.health.findings",
             "accelbench.env.telemetry.throttle"),
    params=(
        Param("seconds", "float", 60.0, help="how long to stress", minimum=1.0),
        Param("dtype", "str", "bf16", help="precision of the GEMM",
              choices=("fp32", "tf32", "fp16", "bf16")),
        Param("size", "int", 0, help="n of the n x n x n GEMM (0: the burn-in's)", minimum=0),
        SizeParam("copy_bytes", "int", 0, help="bytes of the buffer copied beside it; K/M/G "
                  "suffixes (0: 64 MiB on the CPU, 1 GiB on GPUs)", minimum=0),
        Param("max_throttled", "float", 0.1, help="share of the readings that may show a "
              "thermal or hardware slowdown", check=_fraction),
        Param("max_sag", "float", 0.1, help="fall in throughput that warns", check=_fraction),
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    extra_time=_stress_time,
    views=("accelbench.benchmarks.health.view:sections",),
    typed=StressParams,
)
