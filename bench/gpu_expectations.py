"""What a healthy GPU measures: the headline figures of the quick suite, the range each
should fall in per device, and the verdict on one run beside a plain-PyTorch reference.

Pure functions of figures and stored measurements, with no torch: `gpu_reference.py`
measures the reference and prints the verdict, and the tests feed these recorded figures.

A figure passes when it lies in its device's range and agrees with the reference, the
same operation timed by a plain PyTorch loop in the same check: accelbench / reference
within [RATIO_LOW, RATIO_HIGH]. A device whose product is not in the table gets no range
verdict, only the agreement. Ranges are in base units (FLOP/s, B/s, s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement
from accelbench.core.peaks import all_peaks, lookup
from accelbench.core.units import format_ratio, format_value
from accelbench.report.text import markdown_table

RATIO_LOW, RATIO_HIGH = 0.85, 1.15


@dataclass(frozen=True)
class Headline:
    """One headline figure: which case of the quick suite holds it, and its figure name."""

    key: str
    label: str
    benchmark: str
    params: Mapping[str, Any]  # the case's parameters that identify it (a subset)
    figure: str
    unit: str
    higher_is_better: bool = True


# The cases of the quick suite's GPU grid (src/accelbench/suites/quick.toml) that the
# reference measures again, with the same sizes.
GEMM_N = 8192
COPY_MIB = 1024
H2D_MIB = 256
HEADLINES = (
    Headline("gemm_bf16", f"bf16 GEMM {GEMM_N}³", "gemm",
             {"shape": str(GEMM_N), "dtype": "bf16", "batch": 1}, "throughput", "FLOP/s"),
    Headline("d2d_copy", f"D2D copy {COPY_MIB} MiB", "memory",
             {"op": "copy", "size_mib": COPY_MIB}, "bandwidth", "B/s"),
    Headline("h2d_pinned", f"H2D pinned {H2D_MIB} MiB", "memory",
             {"op": "h2d", "size_mib": H2D_MIB, "pinned": True}, "transfer_rate", "B/s"),
    Headline("launch_eager", "eager launch", "launch", {"mode": "eager"}, "latency", "s",
             higher_is_better=False),
    Headline("launch_graph", "graph replay", "launch", {"mode": "graph"}, "latency", "s",
             higher_is_better=False),
)
HEADLINE_KEYS = tuple(h.key for h in HEADLINES)


@dataclass(frozen=True)
class Range:
    """low <= value <= high; either end may be open."""

    low: float | None = None
    high: float | None = None

    def holds(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self, unit: str) -> str:
        if self.low is not None and self.high is not None:
            return f"{format_value(self.low, unit)} to {format_value(self.high, unit)}"
        if self.low is not None:
            return f"≥ {format_value(self.low, unit)}"
        if self.high is not None:
            return f"≤ {format_value(self.high, unit)}"
        return "-"


@dataclass(frozen=True)
class Expected:
    """A product's ranges, and whether a graph replay must cost less than an eager launch."""

    ranges: Mapping[str, Range]
    graph_below_eager: bool


def _published(product: str) -> tuple[float | None, float | None]:
    """The product's published dense bf16 peak (FLOP/s) and memory bandwidth (B/s) per
    PyTorch device, from accelbench's peak table: no figure can honestly exceed them."""
    peaks = next(p for p in all_peaks() if p.name == product)
    return peaks.dense_flops("bf16"), peaks.memory_bandwidth


def _expected(product: str, *, gemm: float, copy: float, h2d: float, eager: float,
              graph_below_eager: bool = True) -> tuple[str, Expected]:
    gemm_peak, copy_peak = _published(product)
    return product, Expected({
        "gemm_bf16": Range(gemm, gemm_peak),
        "d2d_copy": Range(copy, copy_peak),
        "h2d_pinned": Range(h2d),
        "launch_eager": Range(high=eager),
    }, graph_below_eager)


TERA, GIGA, MICRO = 1e12, 1e9, 1e-6
# Lower bounds are conservative shares of the published dense peak (bf16 GEMM) and memory
# bandwidth (a copy counts what it reads and writes, as STREAM does), and of the host link
# for pinned host-to-device copies: PCIe 4.0 x16 carries 31.5 GB/s, PCIe 5.0 x16 63 GB/s.
# Upper bounds of GEMM and copy are the published peaks themselves.
EXPECTED: dict[str, Expected] = dict((
    # 650 = 66% of 989.5 TFLOP/s (plain PyTorch reaches about 790); 3.8 = 79% of 4.8 TB/s;
    # 40 = 63% of PCIe 5.0 x16.
    _expected("NVIDIA H200 SXM", gemm=650 * TERA, copy=3.8 * TERA, h2d=40 * GIGA,
              eager=10 * MICRO),
    # 600 = 61% of 989.5 TFLOP/s; 2.6 = 78% of 3.35 TB/s; PCIe 5.0 as on H200.
    _expected("NVIDIA H100 SXM5", gemm=600 * TERA, copy=2.6 * TERA, h2d=40 * GIGA,
              eager=10 * MICRO),
    # A100: 220 = 71% of 312 TFLOP/s on SXM4; PCIe cards are held to 250-300 W, so 190 =
    # 61%; copies at 74-76% of 2.039, 1.555, 1.935 and 1.555 TB/s; 20 = 63% of PCIe 4.0.
    _expected("NVIDIA A100 SXM4 80GB", gemm=220 * TERA, copy=1.55 * TERA, h2d=20 * GIGA,
              eager=10 * MICRO),
    _expected("NVIDIA A100 SXM4 40GB", gemm=220 * TERA, copy=1.15 * TERA, h2d=20 * GIGA,
              eager=10 * MICRO),
    _expected("NVIDIA A100 PCIe 80GB", gemm=190 * TERA, copy=1.45 * TERA, h2d=20 * GIGA,
              eager=10 * MICRO),
    _expected("NVIDIA A100 PCIe 40GB", gemm=190 * TERA, copy=1.15 * TERA, h2d=20 * GIGA,
              eager=10 * MICRO),
    # 450 = 34% of 1307.4 TFLOP/s (hipBLASLt's bf16 GEMMs sustain about half the dense
    # peak, less when power-capped); 3.2 = 60% of 5.3 TB/s; 30 = 48% of PCIe 5.0 x16. A
    # HIP launch costs more than a CUDA one, and replaying a one-kernel hipGraph is not
    # reliably cheaper than launching the kernel, so graphs are not held below eager.
    _expected("AMD Instinct MI300X", gemm=450 * TERA, copy=3.2 * TERA, h2d=30 * GIGA,
              eager=20 * MICRO, graph_below_eager=False),
    # Per GCD (one PyTorch device, half the package): 100 = 52% of 191.5 TFLOP/s; 1.1 =
    # 67% of 1.64 TB/s; 12 = 38% of PCIe 4.0 x16, which the two GCDs share.
    _expected("AMD Instinct MI250X", gemm=100 * TERA, copy=1.1 * TERA, h2d=12 * GIGA,
              eager=20 * MICRO, graph_below_eager=False),
))


def product_for(device: DeviceInfo) -> str | None:
    """The product whose ranges apply to `device`, found as accelbench's peak table finds
    it; None for a product not in EXPECTED, or a compute partition (a share of the
    package, which the ranges are not for)."""
    peaks = lookup(device)
    if peaks is None or peaks.name not in EXPECTED:
        return None
    whole = next(p for p in all_peaks() if p.name == peaks.name)
    if peaks.devices_per_package != whole.devices_per_package:
        return None
    return peaks.name


def accelbench_figures(measurements: Sequence[Measurement],
                       headlines: Sequence[Headline] = HEADLINES
                       ) -> tuple[dict[str, float | None], dict[str, str]]:
    """Each headline figure of stored measurements, the first found of each case (None
    where there is none), and a note per figure that is missing, failed or was measured
    on a busy host or throttled device."""
    figures: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    for headline in headlines:
        found = [m for m in measurements if m.case.benchmark == headline.benchmark
                 and all(m.case.param_dict.get(k) == v for k, v in headline.params.items())]
        ok = [m for m in found if m.ok]
        figure = ok[0].figure(headline.figure) if ok else None
        figures[headline.key] = figure.value if figure is not None else None
        if not found:
            notes[headline.key] = "accelbench: the run has no such case"
        elif not ok:
            notes[headline.key] = f"accelbench: {found[0].status}: {found[0].reason}"
        elif figure is None:
            notes[headline.key] = f"accelbench: the case has no {headline.figure} figure"
        else:
            flags = [word for word, on in (("contended", ok[0].contended),
                                           ("throttled", ok[0].throttled)) if on]
            if flags:
                notes[headline.key] = f"accelbench: measured {' and '.join(flags)}"
    return figures, notes


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    ours: float | None
    plain: float | None
    ratio: float | None
    expected: str
    problems: tuple[str, ...]  # empty: the figure passes
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Judgement:
    product: str | None  # None: no range applies (an unknown device)
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())
    energy: tuple[Row, ...] = ()  # the energy counter against the power integrals

    @property
    def ok(self) -> bool:
        return self.failed == 0

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in (*self.rows, *self.energy))

    @property
    def judged(self) -> int:
        return len(self.rows) + len(self.energy)


# The energy counter against the integral of power sampled every 10 ms over the same
# window of bf16 GEMM load (gpu_energy.py), on every GPU: counter / integral.
# - Instantaneous power is the board power the counter accumulates, read at another rate:
#   within 7% on both windows.
# - Power averaged over one second (what nvmlDeviceGetPowerUsage returns on recent NVIDIA
#   GPUs) lags the step up from idle at a window's start by about half a second and gives
#   the window's last half second to the idle after it: from about 100 W idle to 700 W,
#   the integral misses 0.5 x 600 J, 4% of a 10 s window's 7 kJ (held within 12%) and 21%
#   of a 2 s window's 1.4 kJ. On the short window the counter is then expected to read at
#   least 5% above the averaged integral; that row says whether this GPU confirms it and is
#   not a failure either way, since a driver whose reading is not averaged refutes it.
ENERGY_INSTANT = Range(0.93, 1.07)
ENERGY_AVERAGE_LONG = Range(0.88, 1.12)
ENERGY_AVERAGE_SHORT = Range(1.05, None)
SHORT_WINDOW_S = 5.0  # windows shorter than this are the short ones


def judge_energy(windows: Sequence[Any], why_none: str | None = None) -> tuple[Row, ...]:
    """One row per window and power reading: the counter's joules, the integral's and
    their ratio, judged against the ranges above. `windows` are gpu_energy.EnergyWindow
    values; none, with `why_none`, is one failing row."""
    if not windows:
        return (Row("energy counter / power integral", "J", None, None, None,
                    ENERGY_INSTANT.describe(""), (why_none or "no energy readings",)),)
    rows = []
    for window in windows:
        short = window.seconds < SHORT_WINDOW_S
        span = f"{window.seconds:.0f} s"
        for reading, integral in (("instant", window.instant_j),
                                  ("averaged", window.average_j)):
            wanted = (ENERGY_INSTANT if reading == "instant" else
                      ENERGY_AVERAGE_SHORT if short else ENERGY_AVERAGE_LONG)
            ratio = window.over(integral)
            problems: tuple[str, ...] = ()
            notes: tuple[str, ...] = ()
            if window.counter_j is None:
                problems = ("the device gave no energy counter",)
            elif ratio is None:
                if reading == "instant":
                    notes = ("the driver gives no instantaneous power",)
                else:
                    problems = ("the device gave no averaged power",)
            elif reading == "averaged" and short:
                notes = (("confirms" if wanted.holds(ratio) else "refutes")
                         + " a reading averaged over about a second",)
            elif not wanted.holds(ratio):
                problems = (f"counter / integral {ratio:.3f} outside "
                            f"{wanted.describe('')}",)
            rows.append(Row(f"{reading} power, {span}", "J", window.counter_j, integral,
                            ratio, wanted.describe(""), problems, notes))
    return tuple(rows)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def judge(product: str | None, ours: Mapping[str, float | None],
          plain: Mapping[str, float | None], notes: Mapping[str, str] | None = None,
          headlines: Sequence[Headline] = HEADLINES) -> Judgement:
    """The verdict on accelbench's headline figures (`ours`) beside the reference's
    (`plain`), both keyed by the headlines' keys; `notes` says why a figure is absent."""
    notes = notes or {}
    expected = EXPECTED.get(product) if product else None
    rows = []
    for headline in headlines:
        a, p = ours.get(headline.key), plain.get(headline.key)
        problems: list[str] = []
        if not _finite(a):
            problems.append("accelbench gave no figure")
            a = None
        if not _finite(p):
            problems.append("the reference gave no figure")
            p = None
        ratio = a / p if a is not None and p is not None else None
        wanted = expected.ranges.get(headline.key) if expected else None
        if wanted is not None and a is not None and not wanted.holds(a):
            also = " (the reference too)" if p is not None and not wanted.holds(p) else ""
            problems.append(f"out of range: expected {wanted.describe(headline.unit)}{also}")
        if ratio is not None and not RATIO_LOW <= ratio <= RATIO_HIGH:
            problems.append(f"disagrees with the reference: ratio {ratio:.3f} outside "
                            f"[{RATIO_LOW}, {RATIO_HIGH}]")
        shown = wanted.describe(headline.unit) if wanted else "-"
        note = notes.get(headline.key)
        rows.append(Row(headline.label, headline.unit, a, p, ratio, shown, tuple(problems),
                        (note,) if note else ()))
    if expected is not None and expected.graph_below_eager:
        rows.append(_graph_row(ours, plain))
    general = () if expected else ("no expected ranges for this device: figures are judged "
                                   "only by their agreement with the reference",)
    return Judgement(product, tuple(rows), general)


def _graph_row(ours: Mapping[str, float | None], plain: Mapping[str, float | None]) -> Row:
    """Graph replay must cost less than an eager launch of the same kernel."""
    ratio, plain_ratio = _over(ours, "launch_graph", "launch_eager"), _over(
        plain, "launch_graph", "launch_eager")
    problems: tuple[str, ...] = ()
    if ratio is None:
        problems = ("accelbench gave no graph or eager latency",)
    elif ratio >= 1:
        problems = (f"graph replay costs {ratio:.2f}x an eager launch",)
    return Row("graph / eager latency", "", ratio, plain_ratio, None, "below 1", problems)


def _over(figures: Mapping[str, float | None], top: str, bottom: str) -> float | None:
    a, b = figures.get(top), figures.get(bottom)
    return a / b if a is not None and b is not None and _finite(a) and _finite(b) else None


HEADER = ("figure", "accelbench", "plain PyTorch", "ratio", "expected", "verdict")


def render(judgement: Judgement, title: str) -> str:
    """The verdict as a Markdown table (it reads as well in a terminal), with notes."""
    body = [(row.label, _shown(row.ours, row.unit), _shown(row.plain, row.unit),
             format_ratio(row.ratio), row.expected, _verdict(row)) for row in judgement.rows]
    lines = [title, "", *markdown_table(HEADER, body, numeric=(1, 2, 3)), ""]
    lines += [f"- {note}" for note in judgement.notes]
    lines.append(f"- ratio: accelbench / plain PyTorch, expected within [{RATIO_LOW}, "
                 f"{RATIO_HIGH}]")
    if judgement.energy:
        energy = [(row.label, _shown(row.ours, row.unit), _shown(row.plain, row.unit),
                   format_ratio(row.ratio), row.expected, _verdict(row))
                  for row in judgement.energy]
        lines += ["", *markdown_table(ENERGY_HEADER, energy, numeric=(1, 2, 3)), ""]
    failed = judgement.failed
    lines.append(f"GPU figures: {judgement.judged - failed} of {judgement.judged} pass"
                 + ("" if judgement.ok else f", {failed} FAIL"))
    return "\n".join(lines)


ENERGY_HEADER = ("power reading, window", "energy counter", "power integral",
                 "counter / integral", "expected", "verdict")


def _verdict(row: Row) -> str:
    verdict = "ok" if row.ok else "FAIL: " + "; ".join(row.problems)
    return verdict + (" (" + "; ".join(row.notes) + ")" if row.notes else "")


def _shown(value: float | None, unit: str) -> str:
    return format_ratio(value) if not unit else format_value(value, unit)


def to_dict(judgement: Judgement) -> dict[str, Any]:
    """The verdict as JSON-ready data."""
    return {
        "product": judgement.product,
        "ok": judgement.ok,
        "ratio_band": [RATIO_LOW, RATIO_HIGH],
        "notes": list(judgement.notes),
        "rows": [{"figure": r.label, "unit": r.unit, "accelbench": r.ours,
                  "reference": r.plain, "ratio": r.ratio, "expected": r.expected,
                  "ok": r.ok, "problems": list(r.problems), "notes": list(r.notes)}
                 for r in judgement.rows],
        "energy": [{"reading": r.label, "counter_j": r.ours, "integral_j": r.plain,
                    "ratio": r.ratio, "expected": r.expected, "ok": r.ok,
                    "problems": list(r.problems), "notes": list(r.notes)}
                   for r in judgement.energy],
    }
