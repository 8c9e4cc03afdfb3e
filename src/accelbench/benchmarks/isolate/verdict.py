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

Stored format (Verdict.to_dict, FORMAT_VERSION):
  1: {"format_version", "rule", "fabrics": [{"name", "kind", "members",
     "matrices": {metric: rows of value or null}, "named": [Named.to_dict()],
     "notes"}]}
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.isolate.schedule import LOCAL, NODE, Pair
from accelbench.core.stats import OUTLIER_Z, robust_center, robust_z

FORMAT_VERSION = 1
MIN_SLOWNESS = 1.25  # a minimum effect: 25% slower than the median member


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

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "members": list(self.members),
                "matrices": {k: [list(r) for r in v] for k, v in self.matrices.items()},
                "named": [n.to_dict() for n in self.named], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fabric:
        matrices = {str(k): [[None if v is None else float(v) for v in r] for r in rows]
                    for k, rows in d["matrices"].items()}
        return cls(str(d["name"]), str(d["kind"]), tuple(str(m) for m in d["members"]),
                   matrices, tuple(Named.from_dict(n) for n in d.get("named", ())),
                   tuple(str(n) for n in d.get("notes", ())))


@dataclass(frozen=True)
class Verdict:
    fabrics: tuple[Fabric, ...]
    rule: str = RULE
    min_busbw: float = 0.0

    @property
    def named(self) -> tuple[Named, ...]:
        return tuple(n for f in self.fabrics for n in f.named)

    def names(self) -> list[str]:
        """The members and links named, each once, in order."""
        return list(dict.fromkeys(n.name for n in self.named))

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "rule": self.rule,
                "min_busbw": self.min_busbw, "fabrics": [f.to_dict() for f in self.fabrics]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        if d.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"isolate verdict format {d.get('format_version')!r} is unknown")
        return cls(tuple(Fabric.from_dict(f) for f in d["fabrics"]), str(d.get("rule", RULE)),
                   float(d.get("min_busbw") or 0.0))


def judge(results: Sequence[PairFigures], min_busbw: float = 0.0) -> Verdict:
    """Matrices and names for every fabric among `results`: the nodes first, then each
    node's ranks."""
    fabrics: dict[tuple[str, str], list[PairFigures]] = {}
    for r in results:
        key = ("nodes", NODE) if r.pair.kind == NODE else (r.pair.node or "", LOCAL)
        fabrics.setdefault(key, []).append(r)
    return Verdict(tuple(judge_fabric(name, kind, pairs, min_busbw)
                         for (name, kind), pairs in fabrics.items()), min_busbw=min_busbw)


def judge_fabric(name: str, kind: str, results: Sequence[PairFigures],
                 min_busbw: float = 0.0) -> Fabric:
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
    if len(members) == 2:
        where = "2 nodes" if kind == NODE else f"2 ranks on {name}"
        notes.append(f"{where}: one link and nothing to compare it with; were it slow, "
                     "which end is slow could not be told (add a third "
                     f"{'node' if kind == NODE else 'rank'}, or give a floor)")
    return Fabric(name, kind, members, matrices, tuple(named), tuple(notes))


def _slowness(value: float, center: float, higher_is_better: bool) -> float:
    """How many times slower `value` is than `center` (above 1: slower)."""
    if higher_is_better:
        return center / value if value > 0 else math.inf
    return value / center if center > 0 else math.inf


def _bad_side(z: float, higher_is_better: bool) -> bool:
    return z < -OUTLIER_Z if higher_is_better else z > OUTLIER_Z


def _judge_metric(members: tuple[str, ...], results: Sequence[PairFigures], metric: Metric,
                  what: str, min_busbw: float) -> list[Named]:
    hib = metric.higher_is_better
    value = {(r.pair.a, r.pair.b): r.figures[metric.name] for r in results}
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
    if min_busbw > 0 and metric.unit == "B/s":
        for pair, v in kept:
            if v < min_busbw and pair not in links:
                links[pair] = Named("link", "-".join(pair), metric.name, v, min_busbw,
                                    _slowness(v, min_busbw, hib), None)
    two = len(members) == 2
    return named + [Named(n.what, n.name, n.metric, n.value, n.center, n.slowness, n.z,
                          ends_unknown=two) for n in links.values()]


def _with_slow_pairs(n: Named, value: Mapping[tuple[str, str], float], reference: float,
                     hib: bool) -> Named:
    """How many of a named member's pairs are slow against the other members' pairs."""
    own = [v for pair, v in value.items() if n.name in pair]
    slow = sum(_slowness(v, reference, hib) >= MIN_SLOWNESS for v in own)
    return Named(n.what, n.name, n.metric, n.value, n.center, n.slowness, n.z, slow, len(own))
