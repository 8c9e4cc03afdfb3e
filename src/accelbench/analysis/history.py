"""A case's headline figure over the stored runs of one stack, and where it changed.

A series is one case (same key and benchmark version) on one generation key, one point
per run: the run's figure with the interval `accelbench show` states for it, oldest
first. The series' run-to-run noise (`evidence.noise_floor`, over its points measured on
a quiet host and an unthrottled device) is shown beside it: it is the floor `compare`
puts under one run's own interval. Change points come from step detection on the series
(`changepoints.detect`); a step is reported when its size, the median level after it
over the median level before it, is at least the minimum effect, and Welch's test on the
runs either side of it (each run's figure one value, the noise floor under their spread)
tells it from noise.

A series says "no change" only when it could have seen a step of the minimum effect: its
quiet points (not on a busy host, not throttled) are enough, at their noise, for the step
detection to see one (`changepoints.points_needed` a side), the series as a whole is not
too noisy for it, its newest point is quiet and no step of the minimum effect was left
unsure. Otherwise it "cannot tell", with why and about how many quiet runs a side would
tell; a step with only busy or throttled runs on one side is never a change point.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench.analysis import changepoints
from accelbench.analysis import evidence as ev
from accelbench.analysis.evidence import NoiseFloor
from accelbench.analysis.select import CasePattern, parse_case_pattern
from accelbench.analysis.tuning import tuning_differences, tuning_of
from accelbench.analysis.values import (
    case_sort_key,
    figure_interval,
    speed_ratio,
    states_interval,
)
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.errors import UserError
from accelbench.store import StoredRun
from accelbench.store.records import RunRecord

DEFAULT_LIMIT = 200
DEFAULT_MIN_EFFECT = 0.05
REGRESSED = "regressed"
IMPROVED = "improved"
# A series' verdict: a step told from noise, none where one would have shown, or neither.
CHANGED = "changed"
NO_CHANGE = "no change"
CANNOT_TELL = "cannot tell"
VERDICTS = (CHANGED, NO_CHANGE, CANNOT_TELL)
_CASE_KEY = re.compile(r"^[0-9a-f]{16}$")
# How a change point's tuning phrases name the runs either side of the step.
_STEP_SIDES = ("the run before", "the run at the step")


@dataclass(frozen=True)
class Point:
    run_id: str
    started_at: float
    host: str
    value: float
    ci_low: float
    ci_high: float
    samples: int
    noisy: bool
    contended: bool = False
    throttled: bool = False
    processes: int = 1
    rel_half_width: float = float("nan")  # of the interval, as `show` prints it
    stated: bool = True  # False: the figure states no interval (ci_* are the value)
    ab: str = ""  # a side of an A/B ("A of ID"); empty for any other run
    # The GEMM/convolution tuning the run's case ran under (env.tuning); None if not kept.
    tuning: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "started_at": self.started_at, "host": self.host,
                "value": self.value,
                "ci": [self.ci_low, self.ci_high] if self.stated else None,
                "rel_half_width": self.rel_half_width, "samples": self.samples,
                "processes": self.processes, "noisy": self.noisy,
                "contended": self.contended, "throttled": self.throttled,
                "ab": self.ab or None}


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new level
    run_id: str
    started_at: float
    before: float  # median level of the segment before
    after: float  # median level of the segment after
    change: float  # relative change in speed: -0.12 is 12% slower
    kind: str  # REGRESSED or IMPROVED
    # The 95% CI of the speed ratio, the runs after the step over those before it (the
    # test that kept the step); None where there was nothing to weigh it against.
    speed_ci: tuple[float, float] | None = None
    # How the tuning of the run before the step and the run at it differ: a possible cause.
    tuning_differs: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"{self.kind} by {abs(self.change) * 100:.1f}% at run {self.run_id}"
        if self.tuning_differs:
            text += f" (tuning changed there: {', '.join(self.tuning_differs)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "run": self.run_id, "started_at": self.started_at,
                "before": self.before, "after": self.after,
                "change_pct": 100.0 * self.change, "kind": self.kind,
                "speed_ci": list(self.speed_ci) if self.speed_ci else None,
                "tuning_differs": list(self.tuning_differs),
                "description": self.describe()}


@dataclass(frozen=True)
class CannotTell:
    """Why a series can neither show a step nor rule one out, and what would."""

    reasons: tuple[str, ...]
    contended: tuple[str, ...]  # the runs measured on a busy host
    throttled: tuple[str, ...]  # the runs measured while the device throttled
    noisy: tuple[str, ...]  # the runs whose own interval is wide
    # The run-to-run noise (relative, 1 sd) the estimate below is at: of the quiet runs,
    # or of all runs while fewer than 3 are quiet; NaN with fewer than 2 runs.
    noise: float
    noise_of: str  # "quiet runs", "all runs", or "" where the noise is not known
    # Quiet runs a side of a step that would tell one of the minimum effect at that noise;
    # None when no number would, or the noise is not known.
    runs_needed: int | None
    min_effect: float

    def describe(self) -> str:
        effect = f"{self.min_effect:.0%}"
        if not self.noise_of:
            return "; ".join(self.reasons) + ("; the run-to-run noise is not known yet "
                                              f"({ev.MIN_FLOOR_RUNS} quiet runs teach it)")
        need = (f"about {self.runs_needed} quiet runs a side of a step would tell one of "
                f"{effect}" if self.runs_needed is not None
                else f"no number of quiet runs a side would tell a step of {effect}")
        of = "the quiet runs" if self.noise_of == "quiet runs" else "all runs"
        at = f"at the noise of {of} (±{self.noise:.1%} run to run)"
        if self.noise_of != "quiet runs":
            at += f"; {ev.MIN_FLOOR_RUNS} quiet runs teach a quiet host's noise"
        return "; ".join(self.reasons) + f"; {need} {at}"

    def to_dict(self) -> dict[str, Any]:
        return {"reasons": list(self.reasons), "contended": list(self.contended),
                "throttled": list(self.throttled), "noisy": list(self.noisy),
                "noise_rel_sd": self.noise if math.isfinite(self.noise) else None,
                "noise_of": self.noise_of or None, "runs_needed": self.runs_needed,
                "description": self.describe()}


@dataclass(frozen=True)
class Series:
    case: Case
    generation_key: str
    figure: str
    unit: str
    higher_is_better: bool
    points: list[Point]
    change_points: list[ChangePoint]
    small_steps: int  # steps detected but below the minimum effect
    # Steps of the minimum effect that the noise could explain, or with only busy or
    # throttled runs on one side.
    unsure_steps: int = 0
    noise_floor: NoiseFloor | None = None  # run-to-run, over its quiet points
    verdict: str = NO_CHANGE  # CHANGED, NO_CHANGE or CANNOT_TELL
    cannot_tell: CannotTell | None = None  # why, where the verdict is CANNOT_TELL

    @property
    def latest_regression(self) -> ChangePoint | None:
        """The last change point, when it is a regression: the series is still down."""
        if self.change_points and self.change_points[-1].kind == REGRESSED:
            return self.change_points[-1]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.case.key, "case": self.case.label, "version": self.case.version,
            "family": self.case.family, "generation_key": self.generation_key,
            "figure": self.figure, "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "points": [p.to_dict() for p in self.points],
            "change_points": [c.to_dict() for c in self.change_points],
            "small_steps": self.small_steps,
            "unsure_steps": self.unsure_steps,
            "noise_floor": self.noise_floor.to_dict() if self.noise_floor else None,
            "verdict": self.verdict,
            "cannot_tell": self.cannot_tell.to_dict() if self.cannot_tell else None,
        }


def case_matcher(text: str) -> CasePattern | str:
    """A 16-hex-digit case key, or a case pattern."""
    text = text.strip()
    return text if _CASE_KEY.match(text) else parse_case_pattern(text)


def history(
    runs: Sequence[StoredRun],
    case: CasePattern | str,
    *,
    stacks: str | None = None,
    hosts: str | None = None,
    limit: int = DEFAULT_LIMIT,
    min_effect: float = DEFAULT_MIN_EFFECT,
    penalty_factor: float = changepoints.DEFAULT_PENALTY_FACTOR,
) -> list[Series]:
    """Every series of the cases `case` selects in `runs`, with their change points.

    `stacks` and `hosts` are globs on the generation key and the host; `limit` keeps the
    newest points of each series.
    """
    groups: dict[tuple[str, str, str], list[tuple[StoredRun, Measurement]]] = {}
    for run in sorted(runs, key=lambda r: (r.record.started_at, r.record.id)):
        record = run.record
        if stacks and not fnmatch.fnmatchcase(record.generation_key.lower(), stacks.lower()):
            continue
        if hosts and not fnmatch.fnmatchcase(record.host.lower(), hosts.lower()):
            continue
        for m in run.measurements:
            if not m.ok or m.primary is None or not _selected(m.case, case):
                continue
            groups.setdefault((m.case.key, record.generation_key, m.case.version), []).append(
                (run, m))
    if not groups:
        text = case if isinstance(case, str) else case.text
        raise UserError(f"no stored result matches {text!r}")
    out = []
    for (_, generation_key, _), items in groups.items():
        items = items[-limit:]
        points = [_point(run, m) for run, m in items]
        figure = items[-1][1].primary
        assert figure is not None  # only measurements with a primary figure are grouped
        out.append(_series(items[-1][1].case, generation_key, figure, points, min_effect,
                           penalty_factor))
    out.sort(key=lambda s: (case_sort_key(s.case), s.generation_key, s.case.version))
    return out


def _selected(case: Case, wanted: CasePattern | str) -> bool:
    return case.key == wanted if isinstance(wanted, str) else wanted.matches(case)


def _point(run: StoredRun, m: Measurement) -> Point:
    """The run's figure with the interval `show` states for it."""
    figure = m.primary
    assert figure is not None  # only measurements with a primary figure are grouped
    value, low, high = figure_interval(figure)
    spread = m.spread
    rel = spread.rel_half_width if spread is not None else (
        (high - low) / 2.0 / value if value else np.nan)
    return Point(run.record.id, run.record.started_at, run.record.host, value, low, high,
                 len(m.samples), m.noisy, m.contended, m.throttled,
                 processes=max(1, len([t for t in m.timings if t.samples])),
                 rel_half_width=float(rel), stated=states_interval(figure),
                 ab=_ab_side(run.record), tuning=tuning_of(m.details))


def _ab_side(record: RunRecord) -> str:
    """"A of ID" for a side of an A/B (analysis.ab), else ""."""
    from accelbench.analysis.ab import ab_of

    ab = ab_of(record)
    return f"{(ab.side or '?').upper()} of A/B {ab.id}" if ab is not None else ""


def _series(case: Case, generation_key: str, figure: Figure, points: list[Point],
            min_effect: float, penalty_factor: float) -> Series:
    values = [p.value for p in points]
    floor = ev.noise_floor([p.value for p in points if not _busy(p)])
    found = changepoints.detect(values, penalty_factor=penalty_factor)
    bounds = changepoints.segments(len(values), found)
    levels = [float(np.median(values[s:e])) for s, e in bounds]
    changes = []
    small = 0
    unsure: list[str] = []
    for i, index in enumerate(found):
        before, after = levels[i], levels[i + 1]
        change = speed_ratio(after / before, figure.higher_is_better) - 1.0 if before else 0.0
        if abs(change) < min_effect:
            small += 1
            continue
        (s0, e0), (s1, e1) = bounds[i], bounds[i + 1]
        point = points[index]
        step = f"a step of {change:+.0%} at run {point.run_id}"
        if all(_busy(p) for p in points[s0:e0]) or all(_busy(p) for p in points[s1:e1]):
            unsure.append(f"{step} has only busy-host or throttled runs on one side")
            continue
        weighed = _weighed(values[s0:e0], values[s1:e1], floor)
        if weighed is None or (weighed.p_value is not None and not weighed.significant):
            unsure.append(f"{step} the run-to-run noise could explain")
            continue
        ci = None
        if weighed.p_value is not None:
            ci = ((weighed.low, weighed.high) if figure.higher_is_better
                  else (1.0 / weighed.high, 1.0 / weighed.low))
        tuning = (tuning_differences(points[index - 1].tuning, point.tuning, _STEP_SIDES)
                  if index else [])
        changes.append(ChangePoint(index, point.run_id, point.started_at, before, after, change,
                                   IMPROVED if change > 0 else REGRESSED, ci, tuple(tuning)))
    why = None if changes else _cannot_tell(points, unsure, min_effect, penalty_factor)
    verdict = CHANGED if changes else CANNOT_TELL if why is not None else NO_CHANGE
    return Series(case, generation_key, figure.name, figure.unit, figure.higher_is_better,
                  points, changes, small, len(unsure), floor, verdict, why)


def _busy(p: Point) -> bool:
    return p.contended or p.throttled


def _cannot_tell(points: Sequence[Point], unsure: Sequence[str], min_effect: float,
                 penalty_factor: float) -> CannotTell | None:
    """Why a series with no step told from noise cannot say there was none; None when
    it could have seen a step of `min_effect` (see the module's docstring)."""
    n = len(points)
    values = [p.value for p in points]
    quiet = [p.value for p in points if not _busy(p)]
    busy = n - len(quiet)
    effect = f"{min_effect:.0%}"
    reasons = list(unsure)
    if n < 2 * changepoints.DEFAULT_MIN_SIZE:
        reasons.insert(0, f"{n} run{'' if n == 1 else 's'}: step detection needs "
                          f"{changepoints.DEFAULT_MIN_SIZE} runs a side")
    noise_all = changepoints.relative_noise(values)
    if n >= 2 * changepoints.DEFAULT_MIN_SIZE and not _enough(noise_all, n, min_effect,
                                                              penalty_factor):
        reasons.append(f"the run-to-run noise (±{noise_all:.1%}) is too high to see a "
                       f"{effect} step in {n} runs")
    known = len(quiet) >= ev.MIN_FLOOR_RUNS
    noise = changepoints.relative_noise(quiet) if known else noise_all
    newest = next((i for i, p in enumerate(reversed(points)) if not _busy(p)), n)
    if busy == n:
        reasons.append(f"all {n} runs were measured on a busy host or a throttled device"
                       if n > 1 else "it was measured on a busy host or a throttled device")
    elif busy:
        if newest:
            reasons.append(f"the newest {newest} of {n} runs were measured on a busy host or "
                           "a throttled device" if newest > 1 else
                           "the newest run was measured on a busy host or a throttled device")
        if not (known and _enough(noise, len(quiet), min_effect, penalty_factor)):
            reasons.append(f"{busy} of {n} runs were measured on a busy host or a throttled "
                           f"device, and the {len(quiet)} quiet ones cannot tell a "
                           f"{effect} step")
    if not reasons:
        return None
    need = welch = None
    if math.isfinite(noise):
        need = changepoints.points_needed(noise, min_effect, penalty_factor=penalty_factor)
        welch = ev.runs_needed(noise ** 2, min_effect)
    return CannotTell(
        tuple(reasons), tuple(p.run_id for p in points if p.contended),
        tuple(p.run_id for p in points if p.throttled),
        tuple(p.run_id for p in points if p.noisy), noise,
        "quiet runs" if known else "all runs" if math.isfinite(noise) else "",
        None if need is None else max(need, welch or 0), min_effect)


def _enough(noise: float, n: int, min_effect: float, penalty_factor: float) -> bool:
    """Whether `n` points at relative `noise` could show a step of `min_effect` between
    their halves."""
    need = changepoints.points_needed(noise, min_effect, n=n, penalty_factor=penalty_factor)
    return need is not None and 2 * need <= n


def _weighed(before: Sequence[float], after: Sequence[float], floor: NoiseFloor | None
             ) -> ev.Evidence | None:
    """The runs after a step against those before it (each run's figure one value; the
    series' run-to-run noise as a floor under their spread); None with no run on a side.
    A step the noise explains is dropped; one with nothing to weigh it against (one run a
    side, no floor: no p-value) is kept, as the step detection found it."""
    if min(len(before), len(after)) < 1:
        return None
    return ev.weigh(ev.side([[v] for v in before], floor), ev.side([[v] for v in after], floor))
