"""Compare two selections of runs case by case: B over A, with confidence and a verdict.

Only like is compared with like: a case is compared when both sides measured it with the
same benchmark version. A change is reported when it is both statistically significant
(`significance.difference`) and at least `min_effect` in size, as asv and pyperf do.

What is compared is each case's headline figure, or with `figure` the first figure
whose name matches that glob (work per joule, say): a case lacking it on either side is
not compared, and says so. Which way is better comes from the figure itself.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from accelbench.analysis.select import CasePattern, RunGroup
from accelbench.analysis.significance import (
    Difference,
    RatioEstimate,
    difference,
    geometric_mean,
    ratio_of_medians,
)
from accelbench.analysis.values import CaseResults, case_sort_key, collect

FASTER = "faster"
SLOWER = "slower"
SAME = "same"

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
    verdict: str  # FASTER, SLOWER or SAME
    min_effect: float

    @property
    def change(self) -> float:
        """Relative change in speed: +0.12 is 12% faster, -0.08 is 8% slower."""
        return self.speed.ratio - 1.0

    @property
    def below_min_effect(self) -> bool:
        return self.test.significant and self.verdict == SAME

    def regressed_by(self, fraction: float) -> bool:
        """Significantly slower by at least `fraction` (0.05 for 5%)."""
        return self.test.significant and self.speed.ratio <= 1.0 - fraction + 1e-12

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "family": self.family,
            "figure": self.figure,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "a": {"value": self.a.median, "n": int(self.a.values.size), "runs": self.a.runs,
                  "contended": self.a.contended, "throttled": self.a.throttled},
            "b": {"value": self.b.median, "n": int(self.b.values.size), "runs": self.b.runs,
                  "contended": self.b.contended, "throttled": self.b.throttled},
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
        }


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

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "geomean_speedup": self.geomean, "cases": self.n,
                "faster": self.faster, "slower": self.slower}


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
            )
            for family, items in sorted(by_family.items())
        ]

    def regressions(self, fraction: float) -> list[CaseComparison]:
        return [c for c in self.cases if c.regressed_by(fraction)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": _group_dict(self.a),
            "b": _group_dict(self.b),
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "figure": self.figure,
            "cases": [c.to_dict() for c in self.cases],
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
    figure: str | None = None,
) -> Comparison:
    """B over A, case by case, in the headline figure or the first figure matching the
    glob `figure`."""
    side_a = _filtered(collect(a.runs, figure), cases)
    side_b = _filtered(collect(b.runs, figure), cases)
    result = Comparison(a, b, alpha, min_effect, [], figure=figure)
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
            result.cases.append(compare_case(ea, eb, alpha=alpha, min_effect=min_effect))
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
) -> CaseComparison:
    figure = b.figure or a.figure
    assert figure is not None
    ratio = ratio_of_medians(a.values, b.values, confidence=1.0 - alpha)
    speed = ratio if figure.higher_is_better else ratio.inverted()
    test = difference(a.values, b.values, alpha)
    if a.figure_pattern is not None and min(a.values.size, b.values.size) < 2:
        # A chosen figure stated once per measurement (power, say), one run on a side:
        # one value bounds nothing, so no difference is called significant.
        test = Difference(None, "ci-overlap", False)
    change = speed.ratio - 1.0
    verdict = SAME
    if test.significant and abs(change) >= min_effect - 1e-12 and math.isfinite(change):
        verdict = FASTER if change > 0 else SLOWER
    case = b.case
    return CaseComparison(
        key=a.key, label=case.label, benchmark=case.benchmark, family=case.family,
        figure=figure.name, unit=figure.unit, higher_is_better=figure.higher_is_better,
        a=a, b=b, ratio=ratio, speed=speed, test=test, verdict=verdict, min_effect=min_effect,
    )


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
