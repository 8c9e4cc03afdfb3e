"""What a healthy node measures: one run, a saved file, or the median of a fleet.

A fleet baseline takes, for every case and figure, the median over the nodes (each host
and device), each node by its newest measurement of the case, whichever of its runs that
came from (`latest.node_states`): a node's newer run of other cases (a validate run after
a quick run) leaves its older figures in the baseline. The median already ignores a
minority of bad nodes; nodes further than OUTLIER_Z robust standard deviations (1.4826
MAD) from it are also left out of the spread and named, so the file says which nodes it
did not trust.

A figure measured on a busy host or while the device throttled (`unfit`) says less about
the node than about what ran beside it: where at least MIN_FIT nodes (or all that measured
the case) measured a case without either, the median is of theirs alone, and the others
are named with the outliers. Where fewer did, the median is of every node's, and the case
carries a `caveat` saying so, which `diagnose` reads as "a failure against it is
inconclusive"; a caveat is not written to a baseline file. A caller may also leave such
figures out altogether (`leave_out`: `--exclude-contended`, `--exclude-throttled`).

File format history (FORMAT_VERSION):
  1: first version: {"format", "format_version", "created_at", "source",
     "generation_keys", "runs", "hosts", "cases": [{"key", "label", "benchmark",
     "version", "family", "params", "nodes", "outliers", "cv", "primary",
     "figures": [{"name", "unit", "higher_is_better", "value", "spread",
     "pct_of_peak"}]}]}

A baseline holds only figures whose value is finite and above 0 (a ratio to anything
else means nothing), and a file is read only when every value is what the writer would
have written (`baseline_schema`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.analysis.evidence import CONTENDED, THROTTLED
from accelbench.analysis.latest import LatestCase, NodeState, node_states
from accelbench.core.case import CHECK_FAMILIES_BEFORE, upgraded_family
from accelbench.core.formats import upgrade
from accelbench.core.measurement import Measurement
from accelbench.core.stats import robust_center
from accelbench.core.untrusted import parse_json, read_text
from accelbench.errors import UserError
from accelbench.store import StoredRun

FORMAT = "accelbench-baseline"
FORMAT_VERSION = 1
# Trustworthy figures (not busy, not throttled) a fleet median of a case is taken from
# alone; with fewer, it is of every node's figure, with a caveat. Two suffice: a node that
# runs at half the speed of the other quiet one falls to 2/3 of their median.
MIN_FIT = 2
UNFIT = (CONTENDED, THROTTLED)


@dataclass(frozen=True)
class BaselineFigure:
    name: str
    unit: str
    higher_is_better: bool
    value: float
    spread: float = 0.0  # robust standard deviation across nodes (0 for one run)
    pct_of_peak: float | None = None


@dataclass(frozen=True)
class BaselineCase:
    key: str
    label: str
    benchmark: str
    version: str
    family: str
    params: dict[str, Any]
    primary: str
    figures: dict[str, BaselineFigure]
    cv: float | None = None  # median coefficient of variation of the nodes' samples
    nodes: int = 1
    outliers: tuple[str, ...] = ()
    check: bool = False  # a check's case (core.case.Case.check): judged by its verdict
    # Why its figures cannot be trusted as a baseline ("" where they can): all of them
    # were measured on a busy host or a throttled device. Not written to a file.
    caveat: str = ""


@dataclass(frozen=True)
class Baseline:
    source: str  # "run ID", "fleet median of N nodes", or the file it came from
    generation_keys: tuple[str, ...]
    runs: tuple[str, ...]
    hosts: tuple[str, ...]
    cases: dict[str, BaselineCase] = field(default_factory=dict)
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "created_at": self.created_at,
            "source": self.source,
            "generation_keys": list(self.generation_keys),
            "runs": list(self.runs),
            "hosts": list(self.hosts),
            "cases": [
                {
                    "key": c.key, "label": c.label, "benchmark": c.benchmark,
                    "version": c.version, "family": c.family, "params": c.params,
                    "nodes": c.nodes, "outliers": list(c.outliers), "cv": c.cv,
                    "primary": c.primary,
                    "figures": [vars(f) for f in c.figures.values()],
                    **({"check": True} if c.check else {}),
                }
                for c in self.cases.values()
            ],
        }


def node_runs(runs: Sequence[StoredRun]) -> list[StoredRun]:
    """The newest run of each node (host and device), in host order: the run that gives a
    node its name and stack (what it measured is `latest.node_states`')."""
    latest: dict[tuple[str, str], StoredRun] = {}
    for run in sorted(runs, key=lambda r: (r.record.started_at, r.record.id)):
        latest[(run.record.host, run.record.device)] = run
    return [latest[k] for k in sorted(latest)]


def node_names(runs: Sequence[StoredRun]) -> dict[str, str]:
    """Run id -> node name: the host, or host/device where a host ran on several devices."""
    devices: dict[str, set[str]] = {}
    for run in runs:
        devices.setdefault(run.record.host, set()).add(run.record.device)
    return {
        run.record.id: run.record.host if len(devices[run.record.host]) == 1
        else f"{run.record.host}/{run.record.device}"
        for run in runs
    }


def unfit(m: Measurement, marks: Collection[str] = UNFIT) -> str:
    """Why `m`'s figures are unfit to judge a node by or to judge one against, of `marks`
    (CONTENDED: measured on a busy host; THROTTLED: while the device throttled), in
    words; "" when they are fit."""
    reasons = []
    if CONTENDED in marks and m.contended:
        what = next(iter(m.contention), "")
        reasons.append("measured on a busy host" + (f": {_cut(what)}" if what else ""))
    if THROTTLED in marks and m.throttled:
        what = ", ".join(m.throttle_reasons)
        reasons.append("measured while the device throttled"
                       + (f": {_cut(what)}" if what else ""))
    return "; ".join(reasons)


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def from_run(run: StoredRun, *, leave_out: Collection[str] = ()) -> Baseline:
    """The baseline of one run: its figures, a case measured on a busy host or a
    throttled device with a caveat saying so (left out if `leave_out` names it)."""
    record = run.record
    cases = {
        m.case.key: _case([m], (), nodes=1, caveat=(
            f"the baseline run's figure was {why}" if (why := unfit(m)) else ""))
        for m in run.measurements if m.ok and m.figures and not unfit(m, leave_out)
    }
    return Baseline(f"run {record.id}", (record.generation_key,), (record.id,), (record.host,),
                    cases, time.time())


def fleet_median(runs: Sequence[StoredRun], source: str | None = None, *,
                 leave_out: Collection[str] = ()) -> Baseline:
    """The median node of `runs`, each node by its newest measurement of each case."""
    return nodes_median(node_states(runs), source, leave_out=leave_out)


def nodes_median(nodes: Sequence[NodeState], source: str | None = None, *,
                 leave_out: Collection[str] = ()) -> Baseline:
    """The median of `nodes` (as `latest.node_states` gives them), case by case; its runs
    are those any of the nodes' measurements came from, node by node, oldest first.
    Measurements `unfit` by one of the marks in `leave_out` count as not measured."""
    if not nodes:
        raise UserError("no runs to build a baseline from")
    names = node_names([n.run for n in nodes])
    per_case: dict[str, list[tuple[str, LatestCase]]] = {}
    for node in nodes:
        for found in node.cases:
            m = found.measurement
            if m.ok and m.figures and not unfit(m, leave_out):
                per_case.setdefault(m.case.key, []).append((names[node.run.record.id], found))
    cases = {key: _fleet_case(_of_newest_version(items)) for key, items in per_case.items()}
    gens = tuple(dict.fromkeys(n.generation_key for n in nodes))
    runs = tuple(dict.fromkeys(i for n in nodes for i in n.run_ids))
    return Baseline(
        source or f"fleet median of {len(nodes)} nodes", gens, runs,
        tuple(dict.fromkeys(n.host for n in nodes)), cases, time.time(),
    )


def _of_newest_version(
    items: list[tuple[str, LatestCase]],
) -> list[tuple[str, Measurement]]:
    """The nodes' measurements of one case at the version of the newest of them (a
    benchmark's new version measures something else), the newest last."""
    ordered = sorted(items, key=lambda item: item[1].measured_at)
    version = ordered[-1][1].measurement.case.version
    return [(n, c.measurement) for n, c in ordered if c.measurement.case.version == version]


def _fleet_case(items: list[tuple[str, Measurement]]) -> BaselineCase:
    """The median of the nodes' measurements of one case: of the fit ones alone where
    there are enough of them (see the module docstring)."""
    fit = [(n, m) for n, m in items if not unfit(m)]
    caveat = ""
    if len(fit) >= min(MIN_FIT, len(items)):
        used, outliers = fit, {n for n, m in items if unfit(m)}
    else:
        used, outliers = items, set()
        caveat = ("the fleet median is of figures measured on a busy host or a throttled "
                  f"device ({len(items) - len(fit)} of {len(items)} nodes)")
    newest = used[-1][1]
    figures = {}
    for fig in newest.figures:
        values = [(n, m.figure(fig.name)) for n, m in used]
        named = [(n, f.value) for n, f in values if f is not None and _finite(f.value)]
        if not named:
            continue
        median, spread, out = robust_center([v for _, v in named])
        outliers.update(n for (n, _), is_out in zip(named, out, strict=True) if is_out)
        if not _positive(median):
            continue  # no ratio to it means anything
        pct = 100.0 * median / fig.peak if fig.peak else None
        figures[fig.name] = BaselineFigure(fig.name, fig.unit, fig.higher_is_better, median,
                                           spread, pct if _finite(pct) else None)
    kept = [m for n, m in used if n not in outliers] or [m for _, m in used]
    return _case(kept, tuple(sorted(outliers)), nodes=len(items), figures=figures,
                 caveat=caveat)


def _case(
    measurements: list[Measurement], outliers: tuple[str, ...], *, nodes: int,
    figures: dict[str, BaselineFigure] | None = None, caveat: str = "",
) -> BaselineCase:
    newest = measurements[-1]
    case = newest.case
    if figures is None:
        figures = {
            f.name: BaselineFigure(f.name, f.unit, f.higher_is_better, f.value, 0.0,
                                   f.pct_of_peak if _finite(f.pct_of_peak) else None)
            for f in newest.figures if _positive(f.value)
        }
    cvs = [m.stats.cv for m in measurements
           if m.stats is not None and _finite(m.stats.cv) and m.stats.cv >= 0]
    primary = newest.primary
    return BaselineCase(
        key=case.key, label=case.label, benchmark=case.benchmark, version=case.version,
        family=case.family, params=case.param_dict,
        primary=primary.name if primary else "",
        figures=figures, cv=float(np.median(cvs)) if cvs else None, nodes=nodes,
        outliers=outliers, check=case.check, caveat=caveat,
    )


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _positive(value: object) -> bool:
    """A figure a baseline can hold: a ratio to it means something (finite, above 0)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


# -- files -------------------------------------------------------------------------------


def write_baseline(baseline: Baseline, path: str | Path) -> None:
    try:
        Path(path).write_text(json.dumps(baseline.to_dict(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write baseline {path}: {exc.strerror or exc}") from None


def read_baseline(path: str | Path) -> Baseline:
    """A baseline file, read as untrusted (`core.untrusted`: size and depth caps)."""
    text = read_text(path, "baseline")
    data = parse_json(text, f"baseline {path}", not_json=" is not JSON")
    return baseline_from_dict(data, str(path))


def baseline_from_dict(data: object, source: str) -> Baseline:
    """The baseline in `data` (read from `source`), checked strictly first
    (`baseline_schema`): a value that would switch a rule off (a figure of NaN, 0 or
    below, a boolean that is a word) is a one-line UserError naming its JSON path."""
    from accelbench.analysis.baseline_schema import validate_baseline

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{source} is not an accelbench baseline (no \"format\": \"{FORMAT}\")")
    data = upgrade(data, f"baseline {source}", FORMAT_VERSION, {}, default=None,
                   error=UserError)
    validate_baseline(data, source)
    cases = {}
    for c in data["cases"]:
        figures = {
            f["name"]: BaselineFigure(
                f["name"], f["unit"], f["higher_is_better"], float(f["value"]),
                float(f.get("spread", 0.0)),
                None if f.get("pct_of_peak") is None else float(f["pct_of_peak"]))
            for f in c["figures"]
        }
        family = upgraded_family(c["benchmark"], c["family"])
        cases[c["key"]] = BaselineCase(
            key=c["key"], label=c["label"], benchmark=c["benchmark"], version=c["version"],
            family=family, params=dict(c["params"]),
            primary=c.get("primary") or next(iter(figures), ""), figures=figures,
            cv=None if c.get("cv") is None else float(c["cv"]),
            nodes=c.get("nodes", 1), outliers=tuple(c.get("outliers", ())),
            # As a stored case reads (core.case.Case.from_dict): a file written before
            # cases said whether they were checks, or families had their packages' names.
            check=c.get("check") is True or family in CHECK_FAMILIES_BEFORE,
        )
    return Baseline(
        source=f"baseline file {source}",
        generation_keys=tuple(data.get("generation_keys", ())),
        runs=tuple(data.get("runs", ())), hosts=tuple(data.get("hosts", ())),
        cases=cases, created_at=float(data.get("created_at", 0.0)),
    )
