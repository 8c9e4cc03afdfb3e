"""Compare two selections of runs case by case: B over A, with confidence and a verdict.

Only like is compared with like: a case is compared when both sides measured it with the
same benchmark version. The evidence is each side's process values (`evidence`): the
value each worker process measured, never the raw samples pooled, with the run-to-run
noise the store learned from repeated runs of the case (`floors`) as a floor. The verdict
is faster, slower, same or inconclusive (`evidence.three_way`); figures measured while
the host was contended or the device throttled are inconclusive unless the caller judges
them anyway, and an inconclusive case says why and how many runs a side would decide it.

What is compared is each case's headline figure, or with `figure` the first figure
whose name matches that glob (work per joule, say): a case lacking it on either side is
not compared, and says so. Which way is better comes from the figure itself.

Where the host itself ran faster or slower in B than in A on the reference work timed
beside every case (`host_speed`), a CPU case that moved the same way, by no more than
the host did plus the minimum effect, is inconclusive and says how much the host moved.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.analysis import evidence as ev
from accelbench.analysis.evidence import FASTER, INCONCLUSIVE, SAME, SLOWER, NoiseFloor
from accelbench.analysis.floors import Floors
from accelbench.analysis.host_speed import CPU, HostShift, host_shift
from accelbench.analysis.select import CasePattern, RunGroup
from accelbench.analysis.significance import Difference, RatioEstimate, geometric_mean
from accelbench.analysis.tuning import tuning_differences, tuning_of
from accelbench.analysis.values import CaseResults, case_sort_key, collect
from accelbench.core.units import format_rel

__all__ = [
    "FASTER",
    "INCONCLUSIVE",
    "SAME",
    "SLOWER",
    "CaseComparison",
    "Comparison",
    "Unpaired",
    "compare",
    "compare_case",
]

DEFAULT_MIN_EFFECT = 0.05
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class CaseComparison:
    key: str
    label: str
    benchmark: str
    family: str
    figure: str
    unit: str
    higher_is_better: bool
    a: CaseResults
    b: CaseResults
    ratio: RatioEstimate  # of the compared figure, B over A
    speed: RatioEstimate  # the same as "times faster" (inverted for time figures)
    test: Difference
    verdict: str  # FASTER, SLOWER, SAME or INCONCLUSIVE
    min_effect: float
    reason: str = ""  # why it is inconclusive
    runs_needed: int | None = None  # runs a side that would tell a min_effect change
    floors: tuple[NoiseFloor | None, NoiseFloor | None] = (None, None)  # used on A, B
    judged_anyway: tuple[str, ...] = ()  # "contended in A", ... judged on request
    host: HostShift | None = None  # the host's own shift, where it made this inconclusive
    # How the GEMM/convolution tuning of A and B differ (analysis.tuning): a possible cause.
    tuning_differs: tuple[str, ...] = ()

    @property
    def change(self) -> float:
        """Relative change in speed: +0.12 is 12% faster, -0.08 is 8% slower."""
        return self.speed.ratio - 1.0

    @property
    def below_min_effect(self) -> bool:
        return self.test.significant and self.verdict == SAME

    @property
    def conclusive(self) -> bool:
        return self.verdict != INCONCLUSIVE

    def regressed_by(self, fraction: float) -> bool:
        """Conclusively slower by at least `fraction` (0.05 for 5%)."""
        return (self.conclusive and self.test.significant
                and self.speed.ratio <= 1.0 - fraction + 1e-12 and self.speed.high < 1.0)

    def may_have_regressed_by(self, fraction: float) -> bool:
        """Inconclusive, and a regression of `fraction` is within its interval, or within
        it once the host's own speed-up in B is taken off: a gate at `fraction` can
        neither pass nor fail it."""
        if self.conclusive:
            return False
        low = self.speed.low
        if self.host is not None and self.host.high > 1.0:
            low /= self.host.high
        return low <= 1.0 - fraction + 1e-12

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "family": self.family,
            "figure": self.figure,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "a": _side_dict(self.a, self.floors[0]),
            "b": _side_dict(self.b, self.floors[1]),
            "ratio": self.ratio.ratio,
            "ratio_ci": [self.ratio.low, self.ratio.high],
            "speedup": self.speed.ratio,
            "speedup_ci": [self.speed.low, self.speed.high],
            "ci_method": self.ratio.method,
            "test": self.test.test,
            "p_value": self.test.p_value,
            "significant": self.test.significant,
            "change_pct": 100.0 * self.change,
            "verdict": self.verdict,
            "reason": self.reason or None,
            "runs_needed": self.runs_needed,
            "judged_anyway": list(self.judged_anyway),
            "host_shift": self.host.to_dict() if self.host is not None else None,
            "tuning_differs": list(self.tuning_differs),
        }


def _side_dict(entry: CaseResults, floor: NoiseFloor | None) -> dict[str, Any]:
    stated = entry.stated_ci()
    return {"value": entry.median, "ci": list(stated) if stated is not None else None,
            "n": entry.processes,
            "processes": entry.processes, "runs": entry.runs,
            "contended": entry.contended, "throttled": entry.throttled,
            "noise_floor": floor.to_dict() if floor is not None else None}


@dataclass(frozen=True)
class Unpaired:
    """A case that could not be compared, and why."""

    key: str
    label: str
    family: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "family": self.family,
                "reason": self.reason}


@dataclass(frozen=True)
class FamilySummary:
    family: str
    geomean: float  # geometric mean of the speedups (> 1: B is faster)
    n: int
    faster: int
    slower: int
    inconclusive: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "geomean_speedup": self.geomean, "cases": self.n,
                "faster": self.faster, "slower": self.slower,
                "inconclusive": self.inconclusive}


@dataclass(frozen=True)
class Comparison:
    a: RunGroup
    b: RunGroup
    alpha: float
    min_effect: float
    cases: list[CaseComparison]
    only_a: list[Unpaired] = field(default_factory=list)
    only_b: list[Unpaired] = field(default_factory=list)
    version_differs: list[Unpaired] = field(default_factory=list)
    not_measured: list[Unpaired] = field(default_factory=list)
    figure_missing: list[Unpaired] = field(default_factory=list)
    figure: str | None = None  # the glob of the compared figure; None: the headline
    host: HostShift | None = None  # B's host speed over A's on the reference work

    @property
    def families(self) -> list[FamilySummary]:
        by_family: dict[str, list[CaseComparison]] = defaultdict(list)
        for c in self.cases:
            by_family[c.family].append(c)
        return [
            FamilySummary(
                family,
                geometric_mean([c.speed.ratio for c in items]),
                len(items),
                sum(c.verdict == FASTER for c in items),
                sum(c.verdict == SLOWER for c in items),
                sum(c.verdict == INCONCLUSIVE for c in items),
            )
            for family, items in sorted(by_family.items())
        ]

    def regressions(self, fraction: float) -> list[CaseComparison]:
        """The cases conclusively slower by `fraction` or more."""
        return [c for c in self.cases if c.regressed_by(fraction)]

    def undecided(self, fraction: float) -> list[CaseComparison]:
        """The inconclusive cases that may have regressed by `fraction`: a gate at it
        can tell neither way."""
        return [c for c in self.cases if c.may_have_regressed_by(fraction)]

    def unjudged(self) -> list[Unpaired]:
        """The cases both sides ran that a regression gate cannot judge: not measured on a
        side (failed, skipped, no headline figure), or, in the headline figure, without a
        value to compare. (With a chosen figure, a case without it is left out.)"""
        return [*self.not_measured, *(self.figure_missing if self.figure is None else ())]

    def nothing_compared(self) -> str | None:
        """Why no case at all was compared (a gate then has no evidence); None when one
        was."""
        if self.cases:
            return None
        kinds = ((self.only_a, "only in A"), (self.only_b, "only in B"),
                 (self.version_differs, "of another benchmark version"),
                 (self.not_measured, "not measured on a side"),
                 (self.figure_missing, "without a figure to compare"))
        parts = [f"{len(items)} {what}" for items, what in kinds if items]
        return "no case was compared (" + ("; ".join(parts) or "neither side has a case") + ")"

    @property
    def verdict_counts(self) -> dict[str, int]:
        counts = dict.fromkeys((FASTER, SLOWER, SAME, INCONCLUSIVE), 0)
        for c in self.cases:
            counts[c.verdict] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": _group_dict(self.a),
            "b": _group_dict(self.b),
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "figure": self.figure,
            "host_reference": self.host.to_dict() if self.host is not None else None,
            "cases": [c.to_dict() for c in self.cases],
            "verdicts": self.verdict_counts,
            "families": [f.to_dict() for f in self.families],
            "only_in_a": [u.to_dict() for u in self.only_a],
            "only_in_b": [u.to_dict() for u in self.only_b],
            "version_differs": [u.to_dict() for u in self.version_differs],
            "not_measured": [u.to_dict() for u in self.not_measured],
            "figure_missing": [u.to_dict() for u in self.figure_missing],
        }


def _group_dict(group: RunGroup) -> dict[str, Any]:
    return {"ref": group.ref, "runs": [r.record.id for r in group.runs],
            "generation_keys": group.generation_keys,
            "hosts": list(dict.fromkeys(r.record.host for r in group.runs))}


def compare(
    a: RunGroup, b: RunGroup, *, min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = DEFAULT_ALPHA, cases: CasePattern | None = None,
    figure: str | None = None, floors: Floors | None = None, judge_anyway: bool = False,
) -> Comparison:
    """B over A, case by case, in the headline figure or the first figure matching the
    glob `figure`; `floors` the run-to-run noise the store learned, `judge_anyway`
    judges contended and throttled figures instead of calling them inconclusive."""
    side_a = _filtered(collect(a.runs, figure), cases)
    side_b = _filtered(collect(b.runs, figure), cases)
    host = host_shift(a.runs, b.runs, alpha)
    result = Comparison(a, b, alpha, min_effect, [], figure=figure, host=host)
    hosts_a = {r.record.id: (r.record.host, r.record.generation_key) for r in a.runs}
    hosts_b = {r.record.id: (r.record.host, r.record.generation_key) for r in b.runs}
    # Measured, with a headline figure; with a chosen figure, its absence is said apart.
    ready = _usable if figure is None else (lambda e: e.measured)
    for key in sorted(side_a.keys() | side_b.keys(), key=lambda k: _sort_key(side_a, side_b, k)):
        ea, eb = side_a.get(key), side_b.get(key)
        if eb is None:
            result.only_a.append(_unpaired(ea, "only in A"))
        elif ea is None:
            result.only_b.append(_unpaired(eb, "only in B"))
        elif ea.version != eb.version:
            result.version_differs.append(_unpaired(
                ea, f"benchmark version differs: {ea.version} in A, {eb.version} in B"))
        elif not ready(ea) or not ready(eb):
            side, entry = ("A", ea) if not ready(ea) else ("B", eb)
            reason = entry.reasons[-1] if entry.reasons else "no headline figure"
            result.not_measured.append(_unpaired(entry, f"not measured in {side}: {reason}"))
        elif (missing := _figure_missing(ea, eb, figure)) is not None:
            result.figure_missing.append(_unpaired(eb, missing))
        else:
            pair = ((floors.for_case(ea, hosts_a), floors.for_case(eb, hosts_b))
                    if floors is not None else (None, None))
            result.cases.append(compare_case(ea, eb, alpha=alpha, min_effect=min_effect,
                                             floors=pair, judge_anyway=judge_anyway,
                                             host=host))
    return result


def _figure_missing(a: CaseResults, b: CaseResults, pattern: str | None) -> str | None:
    """Why a case measured on both sides has no figure to compare, or None."""
    for side, entry in (("A", a), ("B", b)):
        if entry.figure is not None and not entry.values.size:
            return f"figure {entry.figure.name} has no value in {side}"
        if not _usable(entry):
            names = ", ".join(entry.figure_names) or "none"
            return f"no figure {pattern!r} in {side} (its figures: {names})"
    fa, fb = a.figure, b.figure
    assert fa is not None and fb is not None
    if fa.name != fb.name:
        return f"figure {pattern!r} is {fa.name} in A, {fb.name} in B"
    return None


def compare_case(
    a: CaseResults, b: CaseResults, *, alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    floors: tuple[NoiseFloor | None, NoiseFloor | None] = (None, None),
    judge_anyway: bool = False, host: HostShift | None = None,
) -> CaseComparison:
    figure = b.figure or a.figure
    assert figure is not None
    side_a = ev.side(a.per_run, floors[0], a.host_speed_sd)
    side_b = ev.side(b.per_run, floors[1], b.host_speed_sd)
    found = ev.weigh(side_a, side_b, alpha)
    method = _method(side_a, side_b)
    ratio = RatioEstimate(found.ratio, found.low, found.high, method)
    speed = ratio if figure.higher_is_better else ratio.inverted()
    test = Difference(found.p_value, ev.TEST_NAME, found.significant)
    verdict = ev.three_way(found, min_effect, figure.higher_is_better)
    blocked = _blocked(a, b)
    reason = ""
    shifted = _host_explains(verdict, speed, host, min_effect) if b.case.device == CPU else None
    if blocked and not judge_anyway:
        verdict, reason = INCONCLUSIVE, "; ".join(blocked)
    elif shifted is not None:
        verdict, reason = INCONCLUSIVE, shifted.describe()
    elif verdict == INCONCLUSIVE:
        reason = _why_wide(a, b, found, side_a, side_b)
    needed = ev.runs_needed(found.per_run_var, min_effect, alpha)
    case = b.case
    return CaseComparison(
        key=a.key, label=case.label, benchmark=case.benchmark, family=case.family,
        figure=figure.name, unit=figure.unit, higher_is_better=figure.higher_is_better,
        a=a, b=b, ratio=ratio, speed=speed, test=test, verdict=verdict, min_effect=min_effect,
        reason=reason, runs_needed=needed if verdict == INCONCLUSIVE else None,
        floors=(side_a.floor if side_a.source == "noise floor" else None,
                side_b.floor if side_b.source == "noise floor" else None),
        judged_anyway=tuple(blocked) if judge_anyway else (),
        host=shifted if verdict == INCONCLUSIVE else None,
        tuning_differs=tuple(tuning_differences(side_tuning(a), side_tuning(b))),
    )


def side_tuning(entry: CaseResults) -> Mapping[str, Any] | None:
    """The tuning the newest measurement a side takes ran under (None if not recorded)."""
    taken = entry.pooled or entry.ok
    return tuning_of(taken[-1][1].details) if taken else None


def _host_explains(verdict: str, speed: RatioEstimate, host: HostShift | None,
                   min_effect: float) -> HostShift | None:
    """The host's shift, where it could explain this verdict of a CPU case: the host
    moved by half the minimum effect or more, and the case moved the same way by no
    more than the host did plus the minimum effect (or not at all: a same-looking
    figure on a host that ran faster may hide a slow-down)."""
    if host is None or not host.moved(min_effect):
        return None
    if verdict == FASTER and host.ratio > 1.0 and speed.ratio < host.ratio * (1 + min_effect):
        return host
    if verdict == SLOWER and host.ratio < 1.0 and speed.ratio > host.ratio * (1 - min_effect):
        return host
    return host if verdict == SAME else None


def _blocked(a: CaseResults, b: CaseResults) -> list[str]:
    """What makes the figures unfit to judge: the host contended or the device throttled
    on a side."""
    out = []
    for mark in ("contended", "throttled"):
        sides = [name for name, entry in (("A", a), ("B", b)) if getattr(entry, mark)]
        if sides:
            out.append(f"{mark} in {' and '.join(sides)}")
    return out


def _why_wide(a: CaseResults, b: CaseResults, found: ev.Evidence, side_a: ev.Side,
              side_b: ev.Side) -> str:
    """Why the evidence cannot decide: no variance at all, samples that never settled,
    or too few processes or runs for the noise seen."""
    if found.p_value is None:
        return (f"{ev.TOO_FEW} ({side_a.processes} and {side_b.processes}) and no repeated "
                "runs")
    unsettled = [name for name, entry in (("A", a), ("B", b)) if entry.unsettled]
    if unsettled:
        return f"{ev.UNSETTLED} in {' and '.join(unsettled)}: its samples still drifted"
    half = ((found.high - found.low) / 2.0 / found.ratio
            if found.low > 0 and found.ratio > 0 else math.inf)
    return f"{ev.TOO_FEW} or runs for this noise ({format_rel(half)})"


def _method(a: ev.Side, b: ev.Side) -> str:
    sources = sorted({a.source, b.source} - {"none"})
    return f"{ev.TEST_NAME} ({', '.join(sources) or 'no variance'})"


def _usable(entry: CaseResults) -> bool:
    return entry.measured and entry.figure is not None and entry.values.size > 0


def _filtered(
    entries: dict[str, CaseResults], pattern: CasePattern | None
) -> dict[str, CaseResults]:
    if pattern is None:
        return entries
    return {k: e for k, e in entries.items() if pattern.matches(e.case)}


def _unpaired(entry: CaseResults | None, reason: str) -> Unpaired:
    assert entry is not None
    return Unpaired(entry.key, entry.case.label, entry.case.family, reason)


def _sort_key(
    side_a: dict[str, CaseResults], side_b: dict[str, CaseResults], key: str
) -> tuple[Any, ...]:
    return case_sort_key((side_b.get(key) or side_a[key]).case)
