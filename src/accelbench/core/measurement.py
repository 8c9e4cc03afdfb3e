"""Immutable result records, raw first: what a case measured, with figures derived from it.

A Measurement keeps what was measured: the per-call times of each worker process that
timed the case (`timings`), the work one call does (`rates`), and the figures that are not
derived from time (`measured`: peak memory, compile time). Its figures (throughput,
bandwidth, the time per call) are derived from those when first asked for, so every one
can be recomputed from the record.

Format history of `Measurement.to_dict` (FORMAT_VERSION):
  1: case, status, reason, samples (s/call), number (calls per sample), figures (derived
     when measured), warnings, details (with stop_reason and warmup_calls), started_at,
     duration_s, confidence.
  2: raw first. "timings": one entry per worker process that timed the case, each with
     its samples (s/call), number, warmup_calls and stop_reason; "rates": the work of one
     call (name, amount, unit, peak, over: "median" or "mean"); "time_name": the name of
     the per-call time figure; "measured": figures not derived from time; the case says
     which parameters a table shows ("shown"); "hosts": what the host was doing beside
     each process (env.host.HostReport.to_dict()). Figures are derived on load; an
     export's "figures" (each with its interval and contended flag), "interval" and
     "contended" are for other tools and are not read back.
  3: "telemetry": what the device and the host read beside each process, as compact
     time series (core.telemetry.Series.to_dict(), versioned itself): power, energy
     counter, clocks, temperature, throttle reasons, CPU package energy. Energy, power and
     work per joule figures and the throttled flag are derived from it when read; an
     export's "energy" and "throttled" are for other tools. Format 2 records have none.

A CPU case measured in several processes may carry details["host_speed"] ({"sd",
"readings", "reference"}: how much the host's reference speed moved between the
run's measuring processes), the floor under the spread of its processes (`core.between`);
records without it state their interval as before.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from accelbench.core.between import (
    METHOD_BETWEEN,
    METHOD_WITHIN,
    Spread,
    between_processes,
    geometric_mean,
)
from accelbench.core.case import Case
from accelbench.core.formats import upgrade
from accelbench.core.names import STATUS_FAILED, STATUS_OK, STATUS_SKIPPED
from accelbench.core.stats import Summary, summarize
from accelbench.core.timing import Timing, TimingPolicy
from accelbench.core.units import format_rel

if TYPE_CHECKING:
    from accelbench.core.energy import Energy
    from accelbench.core.telemetry import Series

FORMAT_VERSION = 3
# details[HOST_SPEED]: the host's speed spread beside a CPU case (see above); a value at
# or beyond MAX_HOST_SPEED_SD is not a speed spread but a damaged record, and is ignored.
HOST_SPEED = "host_speed"
# details[PER_CALL]: what one timed call of the case is, where it is a unit of work
# rather than a call (a serving engine's seconds per output token); its energy figure is
# then also named after it.
PER_CALL = "per_call"
PER_CALL_NAMES = {"output token": "token"}
# details[EXIT_CODE] of a failed case: the exit code of the user's error it failed on.
EXIT_CODE = "exit_code"
MAX_HOST_SPEED_SD = 1.0

__all__ = [
    "EXIT_CODE", "FORMAT_VERSION", "HOST_SPEED", "PER_CALL", "PER_CALL_NAMES", "STATUS_FAILED",
    "STATUS_OK", "STATUS_SKIPPED", "CaseFailed",
    "CaseResult", "CaseSkipped", "Figure", "Measurement", "Rate", "from_result",
    "merge_processes", "not_measured",
]


class _CaseOutcome(Exception):
    """A case that ends without a result, with its reason; it may keep what it measured
    on the way (the error a check found and its tolerance) and its details, which the
    record stores beside the reason."""

    def __init__(self, reason: str, *, figures: Sequence[Figure] = (),
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.figures = tuple(figures)
        self.details = dict(details or {})


class CaseSkipped(_CaseOutcome):
    """Raised by a benchmark when a case does not apply to this device (not a failure)."""


class CaseFailed(_CaseOutcome):
    """Raised by a benchmark for an expected failure with a clear reason
    (unsupported dtype, wrong result)."""


@dataclass(frozen=True)
class Figure:
    """One number with its unit; `peak` is the published peak in the same unit, and
    `low`/`high` the figure's confidence interval where it has one."""

    name: str
    value: float
    unit: str
    higher_is_better: bool = True
    peak: float | None = None
    low: float | None = None
    high: float | None = None

    @property
    def pct_of_peak(self) -> float | None:
        if self.peak is None or not self.peak or math.isnan(self.value):
            return None
        return 100.0 * self.value / self.peak

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "peak": self.peak,
            "pct_of_peak": self.pct_of_peak,
            "low": self.low,
            "high": self.high,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        return cls(d["name"], d["value"], d["unit"], d.get("higher_is_better", True),
                   d.get("peak"), d.get("low"), d.get("high"))


@dataclass(frozen=True)
class Rate:
    """Work done by one timed call, turned into a throughput figure by the harness."""

    name: str  # "throughput", "bandwidth", ...
    amount: float  # per call, in `unit` without the "/s"
    unit: str  # "FLOP/s", "B/s", "sample/s"
    peak: float | None = None  # published peak, same unit
    # "median": amount over the median time per call, robust to outliers (kernels);
    # "mean": amount over the mean, i.e. total work over total timed time (model training,
    # where a slow step is part of what the user waits for).
    over: str = "median"

    def __post_init__(self) -> None:
        if self.over not in ("median", "mean"):
            raise ValueError(f"rate {self.name}: over must be 'median' or 'mean'")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "amount": self.amount, "unit": self.unit,
                "peak": self.peak, "over": self.over}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rate:
        return cls(d["name"], float(d["amount"]), d["unit"], d.get("peak"),
                   d.get("over", "median"))


@dataclass(frozen=True)
class CaseResult:
    """What a benchmark's measure function returns. `timing` is None for a case that
    times nothing (a validation check): its figures are all in `figures`."""

    timing: Timing | None
    rates: tuple[Rate, ...] = ()
    figures: tuple[Figure, ...] = ()  # figures not derived from time (e.g. peak memory)
    details: dict[str, Any] = field(default_factory=dict)
    time_name: str = "time"  # name of the per-call time figure ("latency" for launch)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measurement:
    case: Case
    status: str
    reason: str | None = None
    # One Timing per worker process that timed the case, in the order they ran.
    timings: tuple[Timing, ...] = ()
    rates: tuple[Rate, ...] = ()
    time_name: str = "time"  # "": no time figure is derived (some format 1 records)
    measured: tuple[Figure, ...] = ()  # figures not derived from time
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # unix time
    duration_s: float = 0.0  # wall time of the whole case, set-up included
    confidence: float = 0.95
    # What the host was doing beside each process that measured the case
    # (env.host.HostReport.to_dict()), in the order they ran.
    hosts: tuple[dict[str, Any], ...] = ()
    # What the device and the host read beside each process (core.telemetry.Series
    # .to_dict()), in the order they ran; empty where nothing was sampled.
    telemetry: tuple[dict[str, Any], ...] = ()

    # -- derived, when first asked for ----------------------------------------------

    @cached_property
    def samples(self) -> tuple[float, ...]:
        """Seconds per call, every sample of every process."""
        return tuple(s for t in self.timings for s in t.samples)

    @property
    def number(self) -> int:
        """Calls per sample (of the first process)."""
        return self.timings[0].number if self.timings else 0

    @property
    def stop_reason(self) -> str | None:
        return self.timings[-1].stop_reason if self.timings else None

    @cached_property
    def stats(self) -> Summary | None:
        return summarize(self.samples, self.confidence) if self.samples else None

    @cached_property
    def spread(self) -> Spread | None:
        """The time per call and its stated interval: between the processes when the case
        was measured in several, else within its one process."""
        timed = [t for t in self.timings if t.samples]
        if len(timed) >= 2:
            return between_processes([statistics.median(t.samples) for t in timed],
                                     self.confidence, self.host_speed_sd)
        stats = self.stats
        if stats is None:
            return None
        return Spread(stats.median, stats.ci_low, stats.ci_high, len(timed), METHOD_WITHIN)

    @property
    def host_speed_sd(self) -> float:
        """How much the host's speed moved between the run's measuring processes (sd of
        log reference speed), recorded beside a CPU case as a floor under the spread of
        its processes (`core.between`); 0 where none was recorded."""
        found = self.details.get(HOST_SPEED)
        value = found.get("sd") if isinstance(found, dict) else None
        if (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and 0 <= value < MAX_HOST_SPEED_SD):
            return float(value)
        return 0.0

    @cached_property
    def _mean_spread(self) -> Spread | None:
        """The interval of a rate over the mean: between the processes' mean times per
        call, as its value is taken from them (`_mean_per_call`)."""
        means = [statistics.fmean(t.samples) for t in self.timings if t.samples]
        if len(means) >= 2 and min(means) > 0:
            return between_processes(means, self.confidence, self.host_speed_sd,
                                     METHOD_BETWEEN.replace("medians", "means"))
        return None

    @property
    def _mean_per_call(self) -> float:
        """Total time over total calls, the base of rates over the mean: in one process,
        the mean of its samples; over several, the geometric mean of the processes'
        means (as `spread` takes their medians), so that no process weighs more for
        having taken more samples."""
        timed = [t for t in self.timings if t.samples]
        means = [statistics.fmean(t.samples) for t in timed]
        if len(timed) >= 2 and min(means) > 0:
            return geometric_mean(means)
        if len(timed) >= 2:
            return float(statistics.median(means))
        return self.stats.mean if self.stats is not None else math.nan

    @cached_property
    def figures(self) -> tuple[Figure, ...]:
        """The rates over the time per call, the time per call, the measured figures, then
        the energy figures where telemetry read the power: mean power, energy per call and
        each rate's work per joule."""
        stats, spread = self.stats, self.spread
        if stats is None or spread is None:
            return self.measured
        derived = [_rate_figure(rate, self._mean_per_call,
                                self._mean_spread if rate.over == "mean" and self._mean_spread
                                else spread)
                   for rate in self.rates]
        if self.time_name:
            derived.append(Figure(self.time_name, spread.center, "s", False, None,
                                  spread.low, spread.high))
        return (*derived, *self.measured, *self._energy_figures(spread))

    @cached_property
    def series(self) -> tuple[Series, ...]:
        """The telemetry of each process that can be read back; one that cannot (written
        by a newer accelbench, or damaged) is left out and said in `telemetry_problems`,
        so the measurement itself stays readable."""
        return self._read_telemetry[0]

    @property
    def telemetry_problems(self) -> tuple[str, ...]:
        return self._read_telemetry[1]

    @cached_property
    def _read_telemetry(self) -> tuple[tuple[Series, ...], tuple[str, ...]]:
        from accelbench.core.telemetry import Series

        series, problems = [], []
        for index, data in enumerate(self.telemetry):
            try:
                series.append(Series.from_dict(data))
            except (ValueError, TypeError, KeyError) as exc:
                problems.append(f"telemetry of process {index + 1} left out: {exc}")
        return tuple(series), tuple(problems)

    @cached_property
    def energy(self) -> Energy | None:
        """Power, energy, clocks and throttling over the timed part, over the processes
        (core.energy.combine); None without readable telemetry."""
        from accelbench.core.energy import combine, summarize

        energy = combine([summarize(s) for s in self.series])
        if energy is not None and self.telemetry_problems:
            energy = replace(energy, notes=(*energy.notes, *self.telemetry_problems))
        return energy

    @property
    def throttled(self) -> bool:
        """The device throttled (a throttle reason was set, or its clock sagged) while
        any process timed the case."""
        return bool(self.energy is not None and self.energy.throttled)

    @property
    def throttle_reasons(self) -> tuple[str, ...]:
        return self.energy.throttle_reasons if self.energy is not None else ()

    @property
    def power_w(self) -> float | None:
        """Mean power over the timed part: the device's, or for a CPU case the CPU
        packages' (RAPL) where the device reads none."""
        energy = self.energy
        if energy is None:
            return None
        if energy.mean_power_w is not None:
            return energy.mean_power_w
        return energy.cpu_mean_power_w if self.case.device.startswith("cpu") else None

    def _energy_figures(self, spread: Spread) -> list[Figure]:
        """Mean power; and, where this process's device did all the work, energy per call
        and each rate's work per joule, over the same time per call as the rate (the mean
        for rates over the mean). A case on several ranks counts the work of all of them
        but reads the power of one device: it gets the power only."""
        power = self.power_w
        if power is None or not math.isfinite(power) or power <= 0:
            return []
        out = [Figure("power", power, "W", False)]
        world = self.case.param_dict.get("world_size", 1)
        if isinstance(world, int) and world > 1:
            return out

        def per_call(over: str) -> float:
            return power * (self._mean_per_call if over == "mean" else spread.center)

        out.append(Figure("energy_per_call", per_call(self.rates[0].over if self.rates
                                                       else "median"), "J", False))
        # A case whose "call" is one unit of work (an LLM engine's output token) names it.
        unit = self.details.get(PER_CALL)
        if isinstance(unit, str) and unit in PER_CALL_NAMES:
            out.append(Figure(f"energy_per_{PER_CALL_NAMES[unit]}", out[-1].value,
                              f"J/{PER_CALL_NAMES[unit]}", False))
        out += [Figure(f"{r.name}_per_joule", r.amount / per_call(r.over), _per_joule(r.unit),
                       True) for r in self.rates if per_call(r.over) > 0]
        return out

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def noisy(self) -> bool:
        return any(w.startswith("noisy") for w in self.warnings)

    @property
    def contended(self) -> bool:
        """Measured while the host was busy with other work (in any of its processes)."""
        return any(h.get("contended") for h in self.hosts)

    @property
    def contention(self) -> tuple[str, ...]:
        """What made the host busy, in plain words, once each."""
        return tuple(dict.fromkeys(r for h in self.hosts for r in h.get("reasons", ())))

    @property
    def primary(self) -> Figure | None:
        """The headline figure: the first rate if any, else the time."""
        return self.figures[0] if self.figures else None

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)

    def value_samples(self) -> list[float]:
        """The headline figure for each sample, so that samples of different runs of a
        case can be pooled: the figure scaled by each sample's time per call against the
        median of all of them (a rate ∝ 1/time, a time ∝ time), so that their median is
        the headline figure, whatever its base (the geometric mean of process medians, a
        mean).
        Empty when there is no finite headline figure."""
        figure = self.primary
        if figure is None or not math.isfinite(figure.value):
            return []
        positive = [t for t in self.samples if t > 0]
        if not positive:
            return [figure.value]
        median = float(statistics.median(positive))
        if figure.higher_is_better:
            return [figure.value * median / t for t in positive]
        return [figure.value * t / median for t in positive]

    # -- records --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The raw record, as stored (format FORMAT_VERSION)."""
        return {
            "format_version": FORMAT_VERSION,
            "case": self.case.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "timings": [_timing_dict(t) for t in self.timings],
            "rates": [r.to_dict() for r in self.rates],
            "time_name": self.time_name,
            "measured": [f.to_dict() for f in self.measured],
            "warnings": list(self.warnings),
            "details": self.details,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "confidence": self.confidence,
            "hosts": list(self.hosts),
            "telemetry": list(self.telemetry),
        }

    def export_dict(self) -> dict[str, Any]:
        """The raw record plus its derived figures, each with its interval, for other
        tools (`--json`, exports); loading it reads only the raw part."""
        spread = self.spread
        return {
            **self.to_dict(),
            "figures": [{**f.to_dict(), "contended": self.contended} for f in self.figures],
            "interval": None if spread is None else {
                "processes": spread.processes, "method": spread.method,
                "confidence": self.confidence},
            "contended": self.contended,
            "energy": None if self.energy is None else self.energy.to_dict(),
            "throttled": self.throttled,
        }

    @classmethod
    def from_dict(cls, d: object) -> Measurement:
        """A record of any format version this accelbench knows, upgraded.

        Raises StoreError when the version is unknown, ValueError/KeyError/TypeError when
        the record is malformed."""
        data = upgrade(d, "measurement record", FORMAT_VERSION, _UPGRADES)
        return cls(
            case=Case.from_dict(data["case"]),
            status=data["status"],
            reason=data.get("reason"),
            timings=tuple(_timing(t, data.get("confidence", 0.95))
                          for t in data.get("timings", ())),
            rates=tuple(replace(rate, name=figure_name_now(data["case"], rate.name))
                        for rate in map(Rate.from_dict, data.get("rates", ()))),
            time_name=str(data.get("time_name", "time")),
            measured=tuple(replace(f, name=figure_name_now(data["case"], f.name))
                           for f in map(Figure.from_dict, data.get("measured", ()))),
            warnings=tuple(data.get("warnings", ())),
            details=dict(data.get("details", {})),
            started_at=data.get("started_at", 0.0),
            duration_s=data.get("duration_s", 0.0),
            confidence=data.get("confidence", 0.95),
            hosts=tuple(dict(h) for h in data.get("hosts", ())),
            telemetry=tuple(dict(t) for t in data.get("telemetry", ())),
        )


def _rate_figure(rate: Rate, mean_per_call: float, spread: Spread) -> Figure:
    """A rate over the central (or mean) time per call; its interval comes from the
    interval of the time, a longer time giving the lower rate."""
    per_call = spread.center if rate.over == "median" else mean_per_call
    if not per_call > 0:
        return Figure(rate.name, math.nan, rate.unit, True, rate.peak)
    value = rate.amount / per_call
    # For a rate over the mean, the time's interval is carried over in proportion.
    scale = per_call / spread.center if spread.center > 0 else math.nan
    low = rate.amount / (spread.high * scale) if spread.high > 0 else None
    high = rate.amount / (spread.low * scale) if spread.low > 0 else None
    return Figure(rate.name, value, rate.unit, True, rate.peak, low, high)


def _timing_dict(t: Timing) -> dict[str, Any]:
    return {"samples": list(t.samples), "number": t.number, "warmup_calls": t.warmup_calls,
            "stop_reason": t.stop_reason, "settled": t.settled}


def _timing(d: dict[str, Any], confidence: float) -> Timing:
    return Timing(tuple(float(x) for x in d["samples"]), int(d["number"]),
                  int(d.get("warmup_calls", 0)), str(d.get("stop_reason", "")), confidence,
                  bool(d.get("settled", True)))


# -- upgrades ------------------------------------------------------------------------


_OFF = (False, 0, "")


def _upgrade_1(d: dict[str, Any]) -> dict[str, Any]:
    """Format 1 stored derived figures: [rates..., time per call, other figures...],
    rates over the median time except the model family's, which were over the mean.
    Recover the work per call from them; a record whose figures do not have that shape
    keeps them all as measured figures, exactly as stored."""
    case = dict(d["case"])
    params = dict(case.get("params", {}))
    if "shown" not in case:  # format 1 left the table to hide switches at an "off" value
        case["shown"] = sorted(k for k, v in params.items() if v not in _OFF)
    samples = [float(x) for x in d.get("samples", ())]
    details = dict(d.get("details", {}))
    stop_reason = details.pop("stop_reason", "")
    warmup_calls = details.pop("warmup_calls", 0)
    figures = [dict(f) for f in d.get("figures", ())]
    timings = ([{"samples": samples, "number": int(d.get("number", 1) or 1),
                 "warmup_calls": warmup_calls, "stop_reason": stop_reason}]
               if samples else [])
    rates, time_name, measured = _split_v1_figures(figures, samples, case.get("family"))
    return {
        **{k: v for k, v in d.items() if k not in ("samples", "number", "figures")},
        "format_version": 2,
        "case": case,
        "details": details,
        "timings": timings,
        "rates": rates or [],
        "time_name": time_name if time_name is not None else "",
        "measured": measured,
    }


def _split_v1_figures(
    figures: list[dict[str, Any]], samples: Sequence[float], family: object
) -> tuple[list[dict[str, Any]] | None, str | None, list[dict[str, Any]]]:
    if not samples:
        return None, None, figures
    stats = summarize(samples)
    over = "mean" if family == "model" else "median"
    per_call = stats.mean if over == "mean" else stats.median
    for index, f in enumerate(figures):
        if not all(isinstance(g.get("value"), (int, float)) for g in figures[:index + 1]):
            break
        if (f.get("unit") == "s" and f.get("higher_is_better") is False
                and math.isclose(float(f["value"]), stats.median, rel_tol=1e-9)):
            before = figures[:index]
            if all(str(r.get("unit", "")).endswith("/s") for r in before) and per_call > 0:
                rates = [{"name": r["name"], "amount": float(r["value"]) * per_call,
                          "unit": r["unit"], "peak": r.get("peak"), "over": over}
                         for r in before]
                return rates, f["name"], figures[index + 1:]
            break
    # No time figure where format 1 put it: keep every figure as it was, and no time
    # figure is derived for this record.
    return None, None, figures


def _per_joule(unit: str) -> str:
    """"FLOP/s" -> "FLOP/J": the work of a rate, per joule."""
    return unit[:-2] + "/J" if unit.endswith("/s") else f"{unit}/J"


# Figures renamed to say how they count bytes, per (benchmark, its `op` or None, name
# before): a host<->device copy's bytes moved once are a transfer rate, not a bandwidth
# (which counts bytes read plus written, as STREAM does); the copy matrix's and a managed
# buffer's first touch likewise.
_FIGURES_BEFORE = {
    ("memory", "h2d", "bandwidth"): "transfer_rate",
    ("memory", "d2h", "bandwidth"): "transfer_rate",
    ("copy-matrix", None, "min_bandwidth"): "min_transfer_rate",
    ("copy-matrix", None, "median_bandwidth"): "median_transfer_rate",
    ("unified-memory", "first-touch", "bandwidth"): "transfer_rate",
    ("unified-memory", "cpu-touch", "bandwidth"): "transfer_rate",
}


def figure_name_now(case: dict[str, Any], name: str) -> str:
    """The name a stored case's figure `name` has now (`_FIGURES_BEFORE`)."""
    benchmark, params = case.get("benchmark"), case.get("params")
    op = params.get("op") if isinstance(params, dict) else None
    if not isinstance(benchmark, str):
        return name
    return _FIGURES_BEFORE.get((benchmark, op if isinstance(op, str) else None, name),
                               _FIGURES_BEFORE.get((benchmark, None, name), name))


_UPGRADES = {1: _upgrade_1, 2: lambda d: {**d, "format_version": 3, "telemetry": []}}


def from_result(
    case: Case, result: CaseResult, warnings: tuple[str, ...], started_at: float, duration_s: float
) -> Measurement:
    """The measurement of a benchmark's raw result (one worker process's timing)."""
    timing = result.timing
    return Measurement(
        case=case,
        status=STATUS_OK,
        timings=(timing,) if timing is not None else (),
        rates=result.rates,
        time_name=result.time_name,
        measured=result.figures,
        warnings=tuple(result.warnings) + warnings,
        details=dict(result.details),
        started_at=started_at,
        duration_s=duration_s,
        confidence=timing.confidence if timing is not None else 0.95,
    )


def merge_processes(parts: Sequence[Measurement], policy: TimingPolicy | None = None,
                    planned: int | None = None,
                    host_speed: dict[str, Any] | None = None) -> Measurement:
    """One case measured in several worker processes, in order, as one measurement.

    A failure or skip in any process is the case's outcome (the first one, with which
    process it was). Otherwise the timings of every process are kept side by side; the
    work per call is the first process's, and each measured figure the median over the
    processes. The warnings about noise and contention are said once for the whole case,
    from the raw timings and host readings: a process's own "did not converge" is not
    the figure's uncertainty once there are several, the interval between them is.
    `planned` is how many processes were to measure the case (default: as many as there
    are parts); `host_speed`, how much the host's speed moved between the run's
    processes, is kept as details[HOST_SPEED] where several processes measured it."""
    if not parts:
        raise ValueError("no measurement to merge")
    n = len(parts)
    planned = planned or n
    duration = sum(p.duration_s for p in parts)
    for index, part in enumerate(parts):
        if part.status != STATUS_OK:
            where = f" (in process {index + 1} of {planned})" if planned > 1 else ""
            return replace(part, reason=f"{part.reason or part.status}{where}",
                           started_at=parts[0].started_at, duration_s=duration)
    if n == 1:
        return parts[0]
    first = parts[0]
    details = {**first.details, "processes": n}
    if host_speed is not None:
        details[HOST_SPEED] = dict(host_speed)
    said = list(dict.fromkeys(w for p in parts for w in p.details.get("library_warnings", ())))
    if said:  # what the libraries warned of in any process, each line once
        details["library_warnings"] = said
    merged = replace(
        first,
        timings=tuple(t for p in parts for t in p.timings),
        measured=tuple(_median_figure([p.figure(f.name) for p in parts], f)
                       for f in first.measured),
        details=details,
        duration_s=duration,
        hosts=tuple(h for p in parts for h in p.hosts),
        telemetry=tuple(t for p in parts for t in p.telemetry),
    )
    own = [w for p in parts for w in p.warnings if not w.startswith(_PER_PROCESS)]
    return replace(merged, warnings=tuple(dict.fromkeys([*own, *_case_warnings(merged,
                                                                               policy)])))


# Warnings each process says of itself, said once for the case when processes are merged.
_PER_PROCESS = ("noisy: median CI", "noisy: IQR", "contended:")


def _case_warnings(m: Measurement, policy: TimingPolicy | None) -> list[str]:
    policy = policy or TimingPolicy()
    out = []
    spread = m.spread
    if spread is not None and spread.rel_half_width > policy.noisy_rel_interval:
        out.append(f"noisy: the interval between {spread.processes} processes is "
                   f"{format_rel(spread.rel_half_width)}")
    iqrs = [summarize(t.samples).rel_iqr for t in m.timings if t.samples]
    wide = [x for x in iqrs if x > policy.noisy_rel_iqr]
    if wide:
        out.append(f"noisy: IQR up to {max(wide):.0%} of the median within a process "
                   f"({len(wide)} of {len(iqrs)})")
    busy = [h for h in m.hosts if h.get("contended")]
    if busy:
        reasons = list(dict.fromkeys(r for h in busy for r in h.get("reasons", ())))
        more = f"; and {len(reasons) - 2} more" if len(reasons) > 2 else ""
        out.append(f"contended in {len(busy)} of {len(m.hosts)} processes: "
                   f"{'; '.join(reasons[:2])}{more}")
    return out


def _median_figure(values: Sequence[Figure | None], like: Figure) -> Figure:
    """The median over the processes; a figure that states its own interval keeps the
    interval of the process it came from (of the two middle ones, both together), so the
    value always lies within it."""
    finite = sorted((f for f in values if f is not None and math.isfinite(f.value)),
                    key=lambda f: f.value)
    if not finite:
        return like
    middle = finite[(len(finite) - 1) // 2: len(finite) // 2 + 1]
    value = float(statistics.median(f.value for f in finite))
    lows = [f.low for f in middle if f.low is not None]
    highs = [f.high for f in middle if f.high is not None]
    if len(lows) != len(middle) or len(highs) != len(middle):
        return replace(like, value=value, low=None, high=None) if like.low is not None \
            or like.high is not None else replace(like, value=value)
    return replace(like, value=value, low=min(lows), high=max(highs))


def not_measured(
    case: Case, status: str, reason: str, started_at: float, duration_s: float,
    details: dict[str, Any] | None = None, measured: Sequence[Figure] = (),
) -> Measurement:
    """A case that ended without a result; `measured` keeps what it found on the way."""
    return Measurement(
        case=case, status=status, reason=reason, details=details or {},
        started_at=started_at, duration_s=duration_s, measured=tuple(measured),
    )
