"""Scaling efficiency of the training-at-scale benchmarks across ranks and nodes, and what
drags it (pure: reads stored measurements; no torch).

Series. The measured cases of `train-fsdp`, `train-tp`, `train-pp` and `train-2d` are
grouped by their identity (benchmark and parameters) without "world_size", "backend" and
"threads", on one stack generation (device | ROCm/CUDA | PyTorch) and one kind of device:
one configuration, measured at several world sizes, is one scaling series. Of several
measurements of a configuration at one world size, the newest is taken (runs by start
time), not a pool: a scaling series says how the cluster scales now, and what drags it is
read from that one measurement's ranks; how many there were is kept (`runs_at_size`).

Figure. Each point's aggregate training throughput: the "tokens" figure (token/s) where
every point of the series has one, else the headline figure (sample/s), with the interval
the store keeps for it (`CaseResults.stated_ci`, as `accelbench show` states it).

Efficiency. With N0 the smallest world size of the series (1 ideally; a note says when it
is more, since what is lost below N0 ranks is then not seen):

    speed-up(N)   = T(N) / T(N0)
    efficiency(N) = T(N) / (N / N0 * T(N0)) = speed-up(N) * N0 / N
    lost(N)       = 1 - efficiency(N)         (the share of the ideal throughput lost)

The ideal is the same for both kinds of scaling, which `details["scaling"]` labels: weak
(a fixed batch per data-parallel rank: N/N0 times the work per step in the same time) and
strong (a fixed global batch split between the ranks: the same work in N0/N of the time).

Interval. The speed-up's 95% interval is the ratio interval `compare` and `generations`
give (`analysis.evidence.weigh`: Welch's t on the logarithms of the values each worker
process measured, the two points' measurements as the two sides); the efficiency's and
what is lost follow by the constant factor N0/N. Where neither side has a spread of its
own (one process a side), the interval is the conservative combination of the two
figures' stated intervals that `analysis.significance` falls back on with too few
samples: [low(N) / high(N0), high(N) / low(N0)]. A point measured with another benchmark
version than the baseline's is not normalised.

What drags (the rule of the `isolate` family, `benchmarks.isolate.verdict`: median and
MAD, `core.stats.robust_z`, OUTLIER_Z, MIN_SLOWNESS). Per measurement, from each rank's
`rank_solo_s` (the same per-rank step with no communication):
1. nodes, in a measurement on three nodes or more: a node's compute time is the median
   of its ranks' solo times; a node is named ("compute") when its compute time lies more
   than OUTLIER_Z robust standard deviations (1.4826 MAD) from the median node's, on the
   slow side, and is at least MIN_SLOWNESS times the center (the median of the inliers,
   `core.stats.robust_center`);
2. ranks, within each node of three ranks or more (one node included): the same test on
   the solo times of that node's ranks ("compute");
A slow link is not named from these times: the ranks of a synchronous step wait for one
another, so a slow link lengthens every rank's step alike, and a rank's step minus its
solo time is longest on the ranks that compute fastest, not on the ones behind the slow
link. A measurement across nodes with nothing named says so, and points to `accelbench
isolate`, which names a slow node or link from the pairs' own transfers; where the same
run measured `isolate` on the same ranks (the scaling suite runs it on GPU nodes, and
`accelbench slurm scaling` across nodes), what it named is given with the point
(`isolated`).
With fewer than three members (two nodes, two ranks on a node) nothing can be told apart:
a note says so and nothing is named.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accelbench.analysis import evidence as ev
from accelbench.analysis.generations import short_labels
from accelbench.analysis.significance import RatioEstimate
from accelbench.analysis.values import CaseResults
from accelbench.benchmarks.isolate.verdict import BY_NAME, MIN_SLOWNESS, Named, Verdict
from accelbench.benchmarks.scale.declaration import BENCHMARKS
from accelbench.benchmarks.scale.details import ScaleDetails
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.stats import OUTLIER_Z, robust_center, robust_z
from accelbench.core.stored import integer
from accelbench.core.units import format_value
from accelbench.errors import UserError
from accelbench.store import StoredRun

T = TypeVar("T")
NAMES = tuple(b.name for b in BENCHMARKS)  # train-fsdp, train-tp, train-pp, train-2d
NOT_CONFIGURATION = ("world_size", "backend", "threads")  # what a series varies over
TOKENS = "tokens"  # the token/s figure of a model case (`models.results.model_result`)
POLICY = "newest"  # of several measurements at one world size, the newest is taken
STATED = "stated intervals"  # the conservative interval from the two figures' intervals
BASELINE = "baseline"
IDEAL = "ideal"
CONFIDENCE = 0.95
RULE = (
    f"a node is named (compute) when the median solo step time of its ranks lies more than "
    f"{OUTLIER_Z:g} robust standard deviations (1.4826 MAD) from the median node's, on the "
    f"slow side, and is at least {MIN_SLOWNESS:g}x the center; a rank by the same test among "
    f"its node's ranks; a slow link lengthens every rank's step alike and is named by "
    f"`accelbench isolate`, not here; fewer than three "
    f"members cannot be told apart"
)


@dataclass(frozen=True)
class Drag:
    """A node or rank named as dragging the scaling, with the times it was judged on."""

    what: str  # "node" or "rank"
    cause: str  # "compute": its solo step time
    name: str  # the node, or "rank R" (a global rank)
    node: str
    seconds: float  # its compute time (the median solo step time of its ranks, or its own)
    center: float  # the center it was judged against, in seconds
    slowness: float  # seconds / center
    z: float

    def describe(self) -> str:
        where = self.name if self.what == "node" else f"{self.name} on {self.node}"
        peer = "node's" if self.what == "node" else "rank's"
        return (f"{where}: compute {self.slowness:.2f}x the median {peer} "
                f"({format_value(self.seconds, 's')})")

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "cause": self.cause, "name": self.name, "node": self.node,
                "seconds": self.seconds, "center": self.center, "slowness": self.slowness,
                "z": _finite(self.z)}


@dataclass(frozen=True)
class Point:
    """One world size of a series: its newest measurement, and how it scales against the
    series' baseline (None where it cannot be normalised, `notes` say why)."""

    world_size: int
    nodes: int
    ranks_per_node: tuple[int, ...]  # per node, in the order of their first rank
    parallel: Mapping[str, object]
    run: str
    case: Case
    value: float  # the throughput, in the series' unit
    ci: tuple[float, float] | None  # its stated interval
    speedup: RatioEstimate | None
    efficiency: RatioEstimate | None
    scaling: str  # "weak", "strong" or "unknown"
    tokens_per_s_per_device: float | None
    drags: tuple[Drag, ...] = ()
    notes: tuple[str, ...] = ()
    runs_at_size: int = 1  # measurements of this configuration at this world size
    # What `isolate`, measured in the same run on the same ranks, named: its slow nodes
    # and links, each described with its figures (empty: it named nothing, or did not run).
    isolated: tuple[str, ...] = ()
    contended: bool = False
    throttled: bool = False

    @property
    def lost(self) -> float | None:
        """The share of the ideal throughput lost: 1 - efficiency."""
        return None if self.efficiency is None else 1.0 - self.efficiency.ratio

    @property
    def lost_ci(self) -> tuple[float, float] | None:
        e = self.efficiency
        return None if e is None else (1.0 - e.high, 1.0 - e.low)

    @property
    def ranks_text(self) -> str:
        """Ranks per node: "4", or "4,4,3" when they differ."""
        counts = set(self.ranks_per_node)
        if len(counts) == 1:
            return str(self.ranks_per_node[0])
        return ",".join(str(c) for c in self.ranks_per_node) or "-"

    def to_dict(self) -> dict[str, Any]:
        s, e, lost = self.speedup, self.efficiency, self.lost_ci
        return {
            "world_size": self.world_size, "nodes": self.nodes,
            "ranks_per_node": list(self.ranks_per_node), "parallel": dict(self.parallel),
            "scaling": self.scaling, "run": self.run, "case": self.case.label,
            "key": self.case.key, "value": self.value,
            "ci": list(self.ci) if self.ci is not None else None,
            "speedup": s.ratio if s else None,
            "speedup_ci": _interval(s.low, s.high) if s else None,
            "efficiency": e.ratio if e else None,
            "efficiency_ci": _interval(e.low, e.high) if e else None,
            "lost": self.lost, "lost_ci": _interval(*lost) if lost else None,
            "ci_method": e.method if e else None,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            "drags": [d.to_dict() for d in self.drags], "notes": list(self.notes),
            "isolated": list(self.isolated),
            "runs_at_size": self.runs_at_size, "contended": self.contended,
            "throttled": self.throttled,
        }


@dataclass(frozen=True)
class Series:
    """One configuration measured at several world sizes, smallest first."""

    label: str
    benchmark: str
    params: tuple[tuple[str, Any], ...]  # the identity without NOT_CONFIGURATION
    device: str  # "cpu", "cuda"
    generation: str
    scaling: str  # "weak", "strong", "mixed" or "unknown"
    figure: str
    unit: str
    points: tuple[Point, ...]
    notes: tuple[str, ...] = ()

    @property
    def baseline_world_size(self) -> int:
        return self.points[0].world_size

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "benchmark": self.benchmark, "params": dict(self.params),
                "device": self.device, "generation": self.generation, "scaling": self.scaling,
                "baseline_world_size": self.baseline_world_size, "figure": self.figure,
                "unit": self.unit, "notes": list(self.notes),
                "points": [p.to_dict() for p in self.points]}


@dataclass(frozen=True)
class Scaling:
    series: tuple[Series, ...]
    filters: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    rule: str = RULE
    policy: str = POLICY

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "rule": self.rule, "confidence": CONFIDENCE,
                "filters": dict(self.filters), "notes": list(self.notes),
                "series": [s.to_dict() for s in self.series]}


# -- grouping -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Measured:
    run: str
    measurement: Measurement
    world_size: int


def scaling(runs: Sequence[StoredRun], *, benchmarks: Sequence[str] = ()) -> Scaling:
    """The scaling series of `runs` (any order), of the `benchmarks` named (default: all
    four). Raises UserError for an unknown benchmark name or when no run is selected."""
    unknown = [b for b in benchmarks if b not in NAMES]
    if unknown:
        raise UserError(f"unknown scaling benchmark {unknown[0]!r} "
                        f"(benchmarks: {', '.join(NAMES)})")
    if not runs:
        raise UserError("no runs selected")
    ordered = sorted(runs, key=lambda r: (r.record.started_at, r.record.id))
    return _scaling([(run.record.id, run.record.generation_key, m)
                     for run in ordered for m in run.measurements], set(benchmarks or NAMES))


def of_run(run_id: str, generation: str, measurements: Sequence[Measurement]) -> Scaling:
    """The scaling series within one run's measurements (a run of the scaling suite)."""
    return _scaling([(run_id, generation, m) for m in measurements], set(NAMES))


def _scaling(found: Sequence[tuple[str, str, Measurement]], wanted: set[str]) -> Scaling:
    """The series of `found` (run id, generation, measurement), oldest first."""
    groups: dict[tuple[Any, ...], dict[int, list[_Measured]]] = {}
    unplaced = 0
    verdicts: dict[tuple[str, int], Verdict] = {}  # the run's newest isolate, by world size
    for run_id, generation, m in found:
        verdict = _verdict(m)
        if verdict is not None:
            verdicts[(run_id, _world_size(m) or 0)] = verdict
        if m.case.benchmark not in wanted or not m.ok:
            continue
        world = _world_size(m, ScaleDetails.from_details(m.details))
        if world is None:
            unplaced += 1
            continue
        key = (*configuration(m.case), generation)
        groups.setdefault(key, {}).setdefault(world, []).append(_Measured(run_id, m, world))
    built = [s for key, sizes in groups.items()
             if (s := _series(key[-1], sizes, verdicts)) is not None]
    built.sort(key=lambda s: (s.benchmark, s.generation, s.device,
                              tuple((k, str(v)) for k, v in s.params)))
    labelled = _labelled(built)
    notes: tuple[str, ...] = ()
    if unplaced:
        notes = (f"{unplaced} measurement(s) without a world size left out",)
    return Scaling(tuple(labelled), {"benchmarks": sorted(wanted)}, notes)


def configuration(case: Case) -> tuple[Any, ...]:
    """What one scaling series shares: benchmark, parameters without NOT_CONFIGURATION,
    and the kind of device ("cuda:3" and "cuda:0" are one)."""
    params = tuple((k, v) for k, v in case.params if k not in NOT_CONFIGURATION)
    return (case.benchmark, params, case.device.split(":")[0])


def _world_size(m: Measurement, details: ScaleDetails | None = None) -> int | None:
    """The case's world size, else the one its details (`details`, a scale case's, else
    those of `isolate`) stored."""
    stored = (details.world_size if details is not None
              else integer(m.details.get("world_size")))
    for value in (m.case.param_dict.get("world_size"), stored):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return None


def _verdict(m: Measurement) -> Verdict | None:
    """The verdict of an `isolate` case that ran, or None (another benchmark, or a
    verdict this version cannot read)."""
    if m.case.benchmark != "isolate" or not m.ok:
        return None
    stored = m.details.get("verdict")
    try:
        return Verdict.from_dict(stored) if isinstance(stored, Mapping) else None
    except (KeyError, TypeError, ValueError):
        return None


def _series(generation: str, sizes: Mapping[int, Sequence[_Measured]],
            verdicts: Mapping[tuple[str, int], Verdict]) -> Series | None:
    newest = {n: found[-1] for n, found in sorted(sizes.items())}
    figure_name = TOKENS if all(m.measurement.figure(TOKENS) is not None
                                for m in newest.values()) else None
    results = {n: CaseResults(m.measurement.case.key, ok=[(m.run, m.measurement)],
                              figure_pattern=figure_name) for n, m in newest.items()}
    results = {n: r for n, r in results.items() if r.figure is not None and r.values.size}
    if not results:
        return None
    base_n = min(results)
    base = results[base_n]
    figure = base.figure
    assert figure is not None
    points = tuple(_point(newest[n], r, base, base_n, len(sizes[n]),
                          verdicts.get((newest[n].run, n))) for n, r in results.items())
    case = newest[base_n].measurement.case
    benchmark, params, device = configuration(case)
    labels = {p.scaling for p in points}
    scaling_label = labels.pop() if len(labels) == 1 else "mixed"
    notes = []
    if base_n > 1:
        notes.append(f"baseline {base_n} ranks, not 1: efficiency is relative to "
                     f"{base_n} ranks' throughput; what is lost below it is not seen")
    if len(points) == 1:
        notes.append("one world size only: nothing to scale against")
    if scaling_label == "mixed":
        notes.append("the points disagree on weak or strong scaling: "
                     + ", ".join(f"{p.world_size}: {p.scaling}" for p in points))
    return Series("", benchmark, params, device, generation, scaling_label, figure.name,
                  figure.unit, points, tuple(notes))


def _labelled(series: Sequence[Series]) -> list[Series]:
    cases = [Case(s.benchmark, "", "", s.params, s.device) for s in series]
    labels = [f"{label} ({s.scaling})" if s.scaling in ("weak", "strong") else label
              for label, s in zip(short_labels(cases, dtype=True), series, strict=True)]
    if len({s.generation for s in series}) > 1:
        labels = [f"{label} on {s.generation}" for label, s in zip(labels, series, strict=True)]
    if len({s.device for s in series}) > 1:
        labels = [f"{label} ({s.device})" for label, s in zip(labels, series, strict=True)]
    return [Series(label, s.benchmark, s.params, s.device, s.generation, s.scaling, s.figure,
                   s.unit, s.points, s.notes) for label, s in zip(labels, series, strict=True)]


# -- one point ----------------------------------------------------------------------------


def _point(measured: _Measured, entry: CaseResults, base: CaseResults, base_n: int,
           runs_at_size: int, verdict: Verdict | None = None) -> Point:
    m = measured.measurement
    n = measured.world_size
    details = ScaleDetails.from_details(m.details)
    rank_nodes = _of_ranks(details.rank_nodes, n)
    counts = tuple(Counter(rank_nodes).values()) if rank_nodes else ()
    nodes = _positive(details.nodes) or len(counts) or 1
    if not counts and n % nodes == 0:
        counts = (n // nodes,) * nodes
    notes: list[str] = []
    speedup: RatioEstimate | None = None
    if n == base_n:
        speedup = RatioEstimate(1.0, 1.0, 1.0, BASELINE)
    elif entry.version != base.version:
        notes.append("benchmark version differs from the baseline's: not normalised")
    else:
        speedup = speed_ratio(base, entry)
    efficiency = None if speedup is None else scaled(speedup, base_n / n)
    drags, drag_notes = _judge_ranks(details, n)
    isolated: tuple[str, ...] = ()
    if verdict is not None:
        isolated = tuple(_isolated(named) for named in verdict.named)
        # isolate has measured the links: the pointer to it has been followed.
        drag_notes = tuple(n for n in drag_notes if "accelbench isolate" not in n)
        if not isolated:
            drag_notes += (f"isolate in the same run named no node or link "
                           f"({'conclusive' if verdict.conclusive else 'inconclusive'})",)
        elif not verdict.conclusive:
            drag_notes += ("isolate's naming in the same run was inconclusive",)
    scaling_label = details.scaling
    per_device_figure = m.figure("tokens_per_device")
    per_device = per_device_figure.value if per_device_figure is not None else None
    return Point(
        world_size=n, nodes=nodes, ranks_per_node=counts,
        parallel=details.parallel.to_dict() if details.parallel is not None else {},
        run=measured.run, case=m.case, value=entry.median, ci=entry.stated_ci(CONFIDENCE),
        speedup=speedup, efficiency=efficiency,
        scaling=scaling_label if scaling_label in ("weak", "strong") else "unknown",
        tokens_per_s_per_device=float(per_device) if isinstance(per_device, (int, float))
        and _is_number(per_device) else None,
        drags=drags, notes=(*notes, *drag_notes), runs_at_size=runs_at_size,
        isolated=isolated,
        contended=entry.contended, throttled=entry.throttled,
    )


def _isolated(named: Named) -> str:
    """What isolate named, in words: "link node1-node2: send/recv bandwidth 3.10x slower"."""
    metric = BY_NAME.get(named.metric)
    title = metric.title if metric is not None else named.metric
    return f"{named.what} {named.name}: {title} {named.slowness:.2f}x slower (isolate)"


def speed_ratio(base: CaseResults, entry: CaseResults) -> RatioEstimate:
    """How many times faster `entry` is than `base`, with the interval `compare` gives
    (Welch's t on log process values); with one value a side, the conservative interval
    of the two stated intervals, [low / base high, high / base low]; (0, inf) without
    those either."""
    found = ev.weigh(ev.side(base.per_run, process_floor=base.host_speed_sd),
                     ev.side(entry.per_run, process_floor=entry.host_speed_sd), 1.0 - CONFIDENCE)
    estimate = RatioEstimate(found.ratio, found.low, found.high, ev.TEST_NAME)
    if found.p_value is None:
        a, b = base.stated_ci(CONFIDENCE), entry.stated_ci(CONFIDENCE)
        if a is not None and b is not None and a[0] > 0 and b[0] > 0:
            estimate = RatioEstimate(found.ratio, b[0] / a[1], b[1] / a[0], STATED)
    figure = entry.figure
    if figure is not None and not figure.higher_is_better:
        estimate = estimate.inverted()
    return estimate


def scaled(r: RatioEstimate, factor: float) -> RatioEstimate:
    """`r` and its interval times a constant `factor`."""
    return RatioEstimate(r.ratio * factor, r.low * factor, r.high * factor, r.method)


# -- what drags ---------------------------------------------------------------------------


def judge_ranks(details: Mapping[str, object], world_size: int) -> tuple[tuple[Drag, ...],
                                                                         tuple[str, ...]]:
    """The nodes and ranks a measurement's per-rank times name (the module's rule),
    and the notes on what could not be told apart."""
    return _judge_ranks(ScaleDetails.from_details(details), world_size)


def _judge_ranks(details: ScaleDetails, world_size: int) -> tuple[tuple[Drag, ...],
                                                                  tuple[str, ...]]:
    rank_nodes = _of_ranks(details.rank_nodes, world_size)
    solo = _of_ranks(details.rank_solo_s, world_size)
    if rank_nodes is None or solo is None:
        return (), (("no per-rank node and solo times: nothing to name",) if world_size > 1
                    else ())
    ranks_of: dict[str, list[int]] = {}
    for rank, node in enumerate(rank_nodes):
        ranks_of.setdefault(node, []).append(rank)
    nodes = list(ranks_of)
    named: list[Drag] = []
    notes: list[str] = []
    if len(nodes) == 2:
        notes.append("2 nodes: nothing to compare either with; a slow node or link cannot "
                     "be told apart (three nodes or more can)")
    if len(nodes) >= 3:
        compute = [statistics.median(solo[r] for r in ranks_of[n]) for n in nodes]
        named += [Drag("node", "compute", n, n, *judged)
                  for n, judged in _slow(nodes, compute)]
    pairs = []
    for node, ranks in ranks_of.items():
        if len(ranks) >= 3:
            names = [f"rank {r}" for r in ranks]
            named += [Drag("rank", "compute", name, node, *judged)
                      for name, judged in _slow(names, [solo[r] for r in ranks])]
        elif len(ranks) == 2:
            pairs.append(node)
    if pairs:
        notes.append(f"2 ranks on {', '.join(pairs)}: nothing to compare either with; a "
                     "slow rank there cannot be told apart")
    if len(nodes) >= 2 and not named:
        notes.append(f"across {len(nodes)} nodes the ranks wait for one another every step: "
                     "a slow link slows them all alike; `accelbench isolate` names a slow node "
                     "or link from its pairs")
    return tuple(named), tuple(notes)


def _slow(members: Sequence[str], seconds: Sequence[float]
          ) -> list[tuple[str, tuple[float, float, float, float]]]:
    """The members whose time is an outlier on the slow side (above the median by more
    than OUTLIER_Z robust standard deviations) and at least MIN_SLOWNESS times the
    center: (member, (seconds, center, slowness, z)). Three members at least."""
    if len(members) < 3:
        return []
    center, _, _ = robust_center(list(seconds))
    if not center > 0:  # no time to be slower than
        return []
    out = []
    for member, value, z in zip(members, seconds, robust_z(list(seconds)), strict=True):
        slowness = value / center
        if z > OUTLIER_Z and slowness >= MIN_SLOWNESS:
            out.append((member, (value, center, slowness, z)))
    return out


# -- reading details ----------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


def _of_ranks(values: tuple[T, ...] | None, n: int) -> list[T] | None:
    """A value per rank of `n` (at least one), else None."""
    return list(values) if values and len(values) == n else None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _interval(low: float, high: float) -> list[float | None]:
    return [_finite(low), _finite(high)]
