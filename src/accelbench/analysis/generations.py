"""The chart vendors publish: each case's headline figure per stack generation,
normalised to a baseline generation.

Runs are grouped by their generation key (device | ROCm/CUDA version | PyTorch version).
A row is one case (for models: a model, mode and precision); each cell is the
generation's figure (its one run's, as `accelbench show` states it, or the median of its
runs' with the interval between them), and its speed relative to the baseline generation
with the ratio's confidence interval from the values each worker process measured
(`evidence.weigh`: Welch's t on their logarithms). A cell is not normalised when the
benchmark version differs from the baseline's.

Where a run of the baseline generation and a run of another are the two sides of an A/B
(`accelbench ab` between two stacks installed side by side on one machine), that
generation's speed over the baseline is the A/B's instead: from its pairs of processes,
with the repeated confidence interval `ab` judged it by (the newest such A/B where there are
several), which the host's drift between the two runs does not widen.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.analysis import evidence as ev
from accelbench.analysis.select import CasePattern
from accelbench.analysis.significance import RatioEstimate
from accelbench.analysis.values import CaseResults, case_mode, case_sort_key, collect
from accelbench.core.case import Case, label_value
from accelbench.errors import UserError
from accelbench.store import StoredRun

MODEL_FAMILY = "models"


@dataclass(frozen=True)
class Generation:
    key: str
    runs: tuple[str, ...]
    hosts: tuple[str, ...]
    first_started: float

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "runs": list(self.runs), "hosts": list(self.hosts)}


@dataclass(frozen=True)
class Cell:
    generation: str
    results: CaseResults
    versus_baseline: RatioEstimate | None  # speed relative to the baseline (> 1: faster)
    note: str = ""

    @property
    def value(self) -> float:
        return self.results.median

    def to_dict(self) -> dict[str, Any]:
        stated = self.results.stated_ci()
        rel = self.versus_baseline
        return {
            "generation": self.generation,
            "value": self.value,
            "ci": list(stated) if stated is not None else None,
            "processes": self.results.processes,
            "runs": self.results.runs,
            "speedup": rel.ratio if rel else None,
            "speedup_ci": [rel.low, rel.high] if rel else None,
            "note": self.note or None,
            "contended": self.results.contended,
            "throttled": self.results.throttled,
        }


@dataclass(frozen=True)
class Row:
    case: Case
    label: str  # the case without its precision, shortened to what differs between rows
    figure: str
    unit: str
    higher_is_better: bool
    cells: dict[str, Cell]

    @property
    def dtype(self) -> str:
        return str(self.case.dtype or "-")

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.case.key,
            "case": self.case.label,
            "label": self.label,
            "family": self.case.family,
            "dtype": self.case.dtype,
            "figure": self.figure,
            "unit": self.unit,
            "cells": [c.to_dict() for c in self.cells.values()],
        }


@dataclass(frozen=True)
class Generations:
    generations: list[Generation]  # oldest first
    baseline: str
    rows: list[Row]
    filters: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return [g.key for g in self.generations]

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "filters": self.filters,
            "generations": [g.to_dict() for g in self.generations],
            "rows": [r.to_dict() for r in self.rows],
        }


def generations(
    runs: Sequence[StoredRun],
    *,
    baseline: str | None = None,
    family: str | None = None,
    models: Sequence[str] = (),
    dtypes: Sequence[str] = (),
    mode: str | None = "train",
    cases: CasePattern | None = None,
) -> Generations:
    """Group `runs` by generation and normalise every kept case to `baseline`.

    `family` None means "models" when the runs hold model results, else every family.
    `mode` keeps model cases of this mode ("train": the train benchmarks, or a "mode"
    parameter of that value); other cases stay. None keeps every mode. `models` are globs
    on the "model" parameter.
    """
    if not runs:
        raise UserError("no runs selected")
    by_generation: dict[str, list[StoredRun]] = {}
    for run in sorted(runs, key=lambda r: (r.record.started_at, r.record.id)):
        by_generation.setdefault(run.record.generation_key, []).append(run)
    gens = [
        Generation(key, tuple(r.record.id for r in rs),
                   tuple(dict.fromkeys(r.record.host for r in rs)), rs[0].record.started_at)
        for key, rs in by_generation.items()
    ]
    base = _pick_baseline(gens, baseline)
    if family is None:
        measured = {m.case.family for r in runs for m in r.measurements if m.ok}
        family = MODEL_FAMILY if MODEL_FAMILY in measured else None

    def keep(case: Case) -> bool:
        params = case.param_dict
        if family is not None and case.family != family:
            return False
        if models and not any(fnmatch.fnmatchcase(str(params.get("model", "")), g)
                              for g in models):
            return False
        if dtypes and str(case.dtype) not in dtypes:
            return False
        if mode is not None and case_mode(case) not in (None, mode):
            return False
        return cases is None or cases.matches(case)

    paired = _paired(runs, base.key)
    per_gen = {
        g.key: {k: e for k, e in collect(by_generation[g.key]).items()
                if e.measured and e.figure is not None and e.values.size and keep(e.case)}
        for g in gens
    }
    keys = {k for entries in per_gen.values() for k in entries}
    rows = []
    for key in keys:
        cells = {}
        base_entry = per_gen[base.key].get(key)
        for g in gens:
            entry = per_gen[g.key].get(key)
            if entry is not None:
                cells[g.key] = _cell(g.key, entry, base_entry)
                if (g.key, key) in paired and cells[g.key].versus_baseline is not None:
                    estimate, note = paired[(g.key, key)]
                    cells[g.key] = Cell(g.key, entry, estimate, note)
        newest = next(reversed(cells.values())).results
        figure = newest.figure
        assert figure is not None
        rows.append(Row(newest.case, "", figure.name, figure.unit, figure.higher_is_better,
                        cells))
    rows.sort(key=lambda r: case_sort_key(r.case))
    labels = short_labels([r.case for r in rows])
    rows = [Row(r.case, label, r.figure, r.unit, r.higher_is_better, r.cells)
            for r, label in zip(rows, labels, strict=True)]
    rows.sort(key=lambda r: (r.case.family, r.label, _dtype_rank(r.case.dtype)))
    filters = {"family": family, "models": list(models), "dtypes": list(dtypes), "mode": mode,
               "cases": cases.text if cases else None}
    return Generations(gens, base.key, rows, filters)


def _dtype_rank(dtype: object) -> tuple[int, str]:
    from accelbench.core.dtypes import DTYPES

    names = list(DTYPES)
    return (names.index(dtype), "") if dtype in names else (len(names), str(dtype))


def _pick_baseline(gens: list[Generation], pattern: str | None) -> Generation:
    if pattern is None:
        return gens[0]
    exact = [g for g in gens if g.key.lower() == pattern.lower()]
    found = exact or [g for g in gens if fnmatch.fnmatchcase(g.key.lower(), pattern.lower())]
    if not found:
        raise UserError(
            f"no generation matches baseline {pattern!r} (generations: "
            f"{'; '.join(g.key for g in gens)})"
        )
    if len(found) > 1:
        raise UserError(
            f"baseline {pattern!r} matches {len(found)} generations: "
            f"{'; '.join(g.key for g in found)}"
        )
    return found[0]


PAIRED_METHOD = "paired A/B (repeated confidence interval)"


def _paired(runs: Sequence[StoredRun], base: str
            ) -> dict[tuple[str, str], tuple[RatioEstimate, str]]:
    """(generation, case key) -> that generation's speed over `base` from the newest A/B
    among `runs` between a run of each, with the note saying so."""
    from accelbench.analysis.ab import pairs_in

    found: dict[tuple[str, str], tuple[RatioEstimate, str]] = {}
    for result in pairs_in(runs):  # oldest first: a newer A/B replaces an older one
        generation_a = result.a.record.generation_key
        generation_b = result.b.record.generation_key
        if generation_a == generation_b or base not in (generation_a, generation_b):
            continue
        other = generation_b if generation_a == base else generation_a
        for case in result.cases:
            v = case.verdict
            if v is None or not v.pairs or not math.isfinite(v.speed):
                continue
            estimate = RatioEstimate(v.speed, v.speed_low, v.speed_high, PAIRED_METHOD)
            if other == generation_a:  # the A/B measured the baseline as B
                estimate = estimate.inverted()
            found[(other, case.key)] = (estimate, f"A/B {result.id}: {v.pairs} pairs, "
                                                  f"{v.verdict}")
    return found


def _cell(generation: str, entry: CaseResults, base: CaseResults | None) -> Cell:
    if base is None:
        return Cell(generation, entry, None, "no baseline")
    if base.version != entry.version:
        return Cell(generation, entry, None, "benchmark version differs from the baseline's")
    figure = entry.figure
    assert figure is not None
    found = ev.weigh(ev.side(base.per_run, process_floor=base.host_speed_sd),
                     ev.side(entry.per_run, process_floor=entry.host_speed_sd))
    estimate = RatioEstimate(found.ratio, found.low, found.high, ev.TEST_NAME)
    if not figure.higher_is_better:
        estimate = estimate.inverted()
    if math.isnan(estimate.ratio):
        return Cell(generation, entry, None, "no value")
    return Cell(generation, entry, estimate)


def short_labels(cases: Sequence[Case], *, dtype: bool = False) -> list[str]:
    """Each case without its precision (unless `dtype`), and without what tells cases apart
    no better than what is already shown: parameters with one value throughout (except a
    model's name), parameters that follow from one shown before them (a model's batch
    size), and the benchmark name when there is only one."""
    if not cases:
        return []
    names = sorted({name for c in cases for name, _ in c.params if dtype or name != "dtype"},
                   key=lambda name: (name != "model", name))
    shown: list[str] = []
    for name in names:
        values = [repr(c.param_dict.get(name)) for c in cases]
        if len(set(values)) < 2 and name != "model":
            continue
        if any(_follows(cases, name, other) for other in shown):
            continue
        shown.append(name)
    show_bench = len({c.benchmark for c in cases}) > 1
    labels = []
    for c in cases:
        params = c.param_dict
        parts = [c.benchmark] if show_bench else []
        for name in shown:
            if name in params:
                parts.append(str(params[name]) if name == "model"
                             else f"{name}={label_value(params[name])}")
        labels.append(" ".join(parts) or c.benchmark)
    return labels


def _follows(cases: Sequence[Case], name: str, other: str) -> bool:
    """Whether the value of `name` is the same for every case with the same `other`."""
    seen: dict[str, str] = {}
    for c in cases:
        params = c.param_dict
        key, value = repr(params.get(other)), repr(params.get(name))
        if seen.setdefault(key, value) != value:
            return False
    return True
