"""Naming the slow node or link from the figures of every pair (pure; no torch).

Each fabric is judged on its own: the nodes (node pairs), and the ranks of each node
(local pairs). Each metric too: all-reduce bus bandwidth, send/recv bandwidth and
send/recv latency.

The rule, median-and-MAD as in fleet baselines (`core.stats.robust_center`):
1. A member's figure is the median over its pairs. A member is named when its figure
   is an outlier (more than OUTLIER_Z robust standard deviations, 1.4826 MAD, from the
   median member), on the slow side, and at least MIN_SLOWNESS times slower than the
   median member. A node whose pairs are all slow is such a member.
2. Among the pairs of members not named, a pair is named a slow link by the same test
   against the median of those pairs: a single slow pair whose ends are otherwise fine.
3. With a floor (`min_busbw`), a pair of members not named whose bandwidth is below it
   is a slow link too.
Two members have one pair and nothing to compare it with: its two ends cannot be told
apart, and only the floor can call it slow.

The figures judged are those of every pass pooled; how sure the naming is, from the
passes judged one by one, is `settle`'s (`Verdict.settled`).

Stored format (Verdict.to_dict, FORMAT_VERSION):
  1: {"format_version", "rule", "fabrics": [{"name", "kind", "members",
     "matrices": {metric: rows of value or null}, "named": [Named.to_dict()],
     "notes"}]}
  2: adds "settled": settle.Settled.to_dict() (what each pass named, why the passes
     stopped, whether the naming is conclusive); a format 1 verdict was one pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.benchmarks.isolate.schedule import LOCAL, NODE, Pair
from accelbench.benchmarks.isolate.settle import Settled
from accelbench.core.stats import OUTLIER_Z, robust_center, robust_z

FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)
MIN_SLOWNESS = 1.25  # a minimum effect: 25% slower than the median member
# Naming nothing is an answer only where a link this many times slower than the median
# pair would have stood out from the pairs' spread (`detectable`).
DETECT_LIMIT = 2.0


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    unit: str
    higher_is_better: bool


METRICS = (
    Metric("busbw", "all-reduce bus bandwidth", "B/s", True),
    Metric("p2p_bw", "send/recv bandwidth", "B/s", True),
    Metric("latency", "send/recv latency", "s", False),
)
BY_NAME = {m.name: m for m in METRICS}
RULE = (
    f"each metric alone: a node (or rank) is named when the median over its pairs lies "
    f"more than {OUTLIER_Z:g} robust standard deviations (1.4826 MAD) from the median "
    f"node's, on the slow side, and is at least {MIN_SLOWNESS:g}x slower; among the pairs "
    f"of the others, a link is named by the same test against their median pair"
)


@dataclass(frozen=True)
class PairFigures:
    """One pair's figures, by metric (B/s for bandwidths, s for latency)."""

    pair: Pair
    figures: Mapping[str, float]


def pair_figures(pair: Pair, latency_s: Sequence[float], p2p_s: Sequence[float],
                 allreduce_s: Sequence[float], nbytes: int, bus_factor: float) -> PairFigures:
    """From one pair's samples: one-way latency (half the round trip, per sample), the
    time of a send/recv both ways at once and of an all-reduce, each per call."""
    def rate(samples: Sequence[float], amount: float) -> float:
        t = statistics.median(samples)
        return amount / t if t > 0 else math.inf

    return PairFigures(pair, {
        "busbw": rate(allreduce_s, nbytes * bus_factor),
        "p2p_bw": rate(p2p_s, float(nbytes)),
        "latency": statistics.median(latency_s),
    })


@dataclass(frozen=True)
class Named:
    """A slow member (node, or rank of a node) or link, by one metric, with the figures
    it was judged on."""

    what: str  # "node", "rank" or "link"
    name: str  # the member, or the pair "A-B"
    metric: str
    value: float
    center: float  # the median member's (or pair's) figure
    slowness: float  # times slower than the center
    z: float | None  # robust standard deviations from the median; None: below the floor
    slow_pairs: int = 1  # of its pairs, how many are slow against the other pairs
    pairs: int = 1
    ends_unknown: bool = False  # a link of two members: which end is slow cannot be told

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "name": self.name, "metric": self.metric,
                "value": self.value, "center": self.center, "slowness": self.slowness,
                "z": self.z, "slow_pairs": self.slow_pairs, "pairs": self.pairs,
                "ends_unknown": self.ends_unknown}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Named:
        return cls(str(d["what"]), str(d["name"]), str(d["metric"]), float(d["value"]),
                   float(d["center"]), float(d["slowness"]),
                   None if d.get("z") is None else float(d["z"]),
                   int(d.get("slow_pairs", 1)), int(d.get("pairs", 1)),
                   bool(d.get("ends_unknown", False)))


@dataclass(frozen=True)
class Fabric:
    """The nodes ("nodes"), or the ranks of one node (its name), with their matrices:
    per metric, members x members, None on the diagonal and where nothing was measured."""

    name: str
    kind: str  # NODE or LOCAL
    members: tuple[str, ...]
    matrices: Mapping[str, list[list[float | None]]]
    named: tuple[Named, ...] = ()
    notes: tuple[str, ...] = ()
    # Per metric, the least slowness of a pair the rule would have named among these
    # pairs' spread (inf: none); empty with fewer than three members.
    detectable: Mapping[str, float] = field(default_factory=dict)

    @property
    def sees(self) -> float | None:
        """The least slowness every one of its metrics would have named; None with fewer
        than three members (one link: nothing to compare it with, which a note says)."""
        return max(self.detectable.values()) if self.detectable else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "members": list(self.members),
                "matrices": {k: [list(r) for r in v] for k, v in self.matrices.items()},
                "named": [n.to_dict() for n in self.named], "notes": list(self.notes),
                "detectable": {k: None if math.isinf(v) else v
                               for k, v in self.detectable.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fabric:
        matrices = {str(k): [[None if v is None else float(v) for v in r] for r in rows]
                    for k, rows in d["matrices"].items()}
        detectable = {str(k): math.inf if v is None else float(v)
                      for k, v in (d.get("detectable") or {}).items()}
        return cls(str(d["name"]), str(d["kind"]), tuple(str(m) for m in d["members"]),
                   matrices, tuple(Named.from_dict(n) for n in d.get("named", ())),
                   tuple(str(n) for n in d.get("notes", ())), detectable)


@dataclass(frozen=True)
class Verdict:
    fabrics: tuple[Fabric, ...]
    rule: str = RULE
    min_busbw: float = 0.0
    settled: Settled | None = None  # None: judged on one pass (format 1)

    @property
    def named(self) -> tuple[Named, ...]:
        return tuple(n for f in self.fabrics for n in f.named)

    @property
    def conclusive(self) -> bool:
        """Whether the passes settled on what the pooled figures name (a verdict of one
        pass, stored before passes were repeated, is taken as it was given)."""
        return self.settled is None or self.settled.conclusive

    def blind(self) -> str | None:
        """Why naming nothing would say nothing, or None: a fabric whose pairs spread so
        widely that a link DETECT_LIMIT times slower than the others would not stand
        out (`detectable`)."""
        for f in self.fabrics:
            sees = f.sees
            if sees is not None and sees > DETECT_LIMIT:
                shown = "no slowness at all" if math.isinf(sees) else f"only {sees:.3g}x"
                return (f"the pairs of the {fabric_title(f)} spread too widely to name a link "
                        f"{DETECT_LIMIT:g}x slower than the others ({shown} would stand out)")
        return None

    def names(self) -> list[str]:
        """The members and links named, each once, in order."""
        return list(dict.fromkeys(n.name for n in self.named))

    def to_dict(self) -> dict[str, Any]:
        out = {"format_version": FORMAT_VERSION, "rule": self.rule,
               "min_busbw": self.min_busbw, "fabrics": [f.to_dict() for f in self.fabrics]}
        if self.settled is not None:
            out["settled"] = self.settled.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        if d.get("format_version") not in READABLE_FORMATS:
            raise ValueError(f"isolate verdict format {d.get('format_version')!r} is unknown")
        settled = d.get("settled")
        return cls(tuple(Fabric.from_dict(f) for f in d["fabrics"]), str(d.get("rule", RULE)),
                   float(d.get("min_busbw") or 0.0),
                   Settled.from_dict(settled) if isinstance(settled, dict) else None)


def judge(results: Sequence[PairFigures], min_busbw: float = 0.0,
          passes: Sequence[Sequence[PairFigures]] = ()) -> Verdict:
    """Matrices and names for every fabric among `results`: the nodes first, then each
    node's ranks. `passes`, the figures of each pass that `results` pool, give how
    widely the pairs spread (`detectable_slowness`); without them, `results` do."""
    fabrics: dict[tuple[str, str], list[PairFigures]] = {}
    for r in results:
        fabrics.setdefault(_fabric_key(r.pair), []).append(r)
    spread: dict[tuple[str, str], list[PairFigures]] = {}
    for r in [r for figures in passes for r in figures] or results:
        spread.setdefault(_fabric_key(r.pair), []).append(r)
    return Verdict(tuple(judge_fabric(name, kind, pairs, min_busbw, spread[(name, kind)])
                         for (name, kind), pairs in fabrics.items()), min_busbw=min_busbw)


def _fabric_key(pair: Pair) -> tuple[str, str]:
    return ("nodes", NODE) if pair.kind == NODE else (pair.node or "", LOCAL)


def judge_fabric(name: str, kind: str, results: Sequence[PairFigures],
                 min_busbw: float = 0.0, spread: Sequence[PairFigures] = ()) -> Fabric:
    rank_of = {m: rank for r in results for m, rank in zip((r.pair.a, r.pair.b), r.pair.ranks,
                                                            strict=True)}
    members = tuple(sorted(rank_of, key=lambda m: rank_of[m]))  # in the order of their ranks
    index = {m: i for i, m in enumerate(members)}
    matrices: dict[str, list[list[float | None]]] = {}
    for metric in METRICS:
        rows: list[list[float | None]] = [[None] * len(members) for _ in members]
        for r in results:
            i, j = index[r.pair.a], index[r.pair.b]
            rows[i][j] = rows[j][i] = r.figures[metric.name]
        matrices[metric.name] = rows
    named: list[Named] = []
    notes: list[str] = []
    what = "node" if kind == NODE else "rank"
    for metric in METRICS:
        named += _judge_metric(members, results, metric, what, min_busbw)
    detectable = ({m.name: detectable_slowness([r.figures[m.name] for r in results],
                                               [r.figures[m.name] for r in spread],
                                               m.higher_is_better) for m in METRICS}
                  if len(members) >= 3 else {})
    if len(members) == 2:
        where = "2 nodes" if kind == NODE else f"2 ranks on {name}"
        notes.append(f"{where}: one link and nothing to compare it with; were it slow, "
                     "which end is slow could not be told (add a third "
                     f"{'node' if kind == NODE else 'rank'}, or give a floor)")
    return Fabric(name, kind, members, matrices, tuple(named), tuple(notes), detectable)


def detectable_slowness(pooled: Sequence[float], passes: Sequence[float],
                        higher_is_better: bool) -> float:
    """The least slowness a pair would need to be named among these pairs' `pooled`
    figures: that many times slower than their median, it lies OUTLIER_Z robust standard
    deviations away (the scale `robust_z` uses), and at least MIN_SLOWNESS; inf where no
    slowness would. The spread is the pooled figures' own, or, where wider, that of every
    pair's figure in every pass (`passes`) over the square root of the passes: what moves
    from pass to pass blurs a pooled figure too, if less."""
    median = statistics.median(pooled)
    if not median > 0:
        return math.inf
    scale = _robust_sd(pooled)
    if passes:
        scale = max(scale, _robust_sd(passes) / math.sqrt(max(1, len(passes) // len(pooled))))
    step = OUTLIER_Z * max(scale, 1e-3 * median) / median
    if not higher_is_better:
        return max(MIN_SLOWNESS, 1.0 + step)
    return math.inf if step >= 1.0 else max(MIN_SLOWNESS, 1.0 / (1.0 - step))


def _robust_sd(values: Sequence[float]) -> float:
    median = statistics.median(values)
    return 1.4826 * statistics.median([abs(v - median) for v in values])


def fabric_title(f: Fabric) -> str:
    return "nodes" if f.name == "nodes" and f.kind == NODE else f"ranks of {f.name}"


def _slowness(value: float, center: float, higher_is_better: bool) -> float:
    """How many times slower `value` is than `center` (above 1: slower)."""
    if higher_is_better:
        return center / value if value > 0 else math.inf
    return value / center if center > 0 else math.inf


def _bad_side(z: float, higher_is_better: bool) -> bool:
    return z < -OUTLIER_Z if higher_is_better else z > OUTLIER_Z


def _judge_metric(members: tuple[str, ...], results: Sequence[PairFigures], metric: Metric,
                  what: str, min_busbw: float) -> list[Named]:
    value = {(r.pair.a, r.pair.b): r.figures[metric.name] for r in results}
    return name_slow(members, value, metric, what, min_busbw)


def name_slow(members: Sequence[str], value: Mapping[tuple[str, str], float], metric: Metric,
              what: str, floor: float = 0.0) -> list[Named]:
    """The module's rule on one metric's figure per pair of `members`: the slow members
    (`what`: "node", "rank", "device"), then the slow links among the others, then those
    below `floor` (a bandwidth in B/s; 0: none)."""
    hib = metric.higher_is_better
    members = tuple(members)
    mine = {m: [v for (a, b), v in value.items() if m in (a, b)] for m in members}
    named: list[Named] = []
    if len(members) >= 3:
        figures = [statistics.median(mine[m]) for m in members]
        center, _, _ = robust_center(figures)
        for m, fig, z in zip(members, figures, robust_z(figures), strict=True):
            slow = _slowness(fig, center, hib)
            if _bad_side(z, hib) and slow >= MIN_SLOWNESS:
                named.append(Named(what, m, metric.name, fig, center, slow, z, pairs=len(mine[m])))
    bad = {n.name for n in named}
    kept = [(pair, v) for pair, v in value.items() if not set(pair) & bad]
    reference = statistics.median([v for _, v in kept] or list(value.values()))
    named = [_with_slow_pairs(n, value, reference, hib) for n in named]
    links: dict[tuple[str, str], Named] = {}
    if len(kept) >= 2:
        pair_values = [v for _, v in kept]
        center, _, _ = robust_center(pair_values)
        for (pair, v), z in zip(kept, robust_z(pair_values), strict=True):
            slow = _slowness(v, center, hib)
            if _bad_side(z, hib) and slow >= MIN_SLOWNESS:
                links[pair] = Named("link", "-".join(pair), metric.name, v, center, slow, z)
    if floor > 0 and metric.unit == "B/s":
        for pair, v in kept:
            if v < floor and pair not in links:
                links[pair] = Named("link", "-".join(pair), metric.name, v, floor,
                                    _slowness(v, floor, hib), None)
    two = len(members) == 2
    return named + [Named(n.what, n.name, n.metric, n.value, n.center, n.slowness, n.z,
                          ends_unknown=two) for n in links.values()]


def _with_slow_pairs(n: Named, value: Mapping[tuple[str, str], float], reference: float,
                     hib: bool) -> Named:
    """How many of a named member's pairs are slow against the other members' pairs."""
    own = [v for pair, v in value.items() if n.name in pair]
    slow = sum(_slowness(v, reference, hib) >= MIN_SLOWNESS for v in own)
    return Named(n.what, n.name, n.metric, n.value, n.center, n.slowness, n.z, slow, len(own))
