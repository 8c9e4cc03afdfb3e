"""Which nodes of a fleet are bad, by which rule, and by how much.

Each node (the latest run of each host and device) is checked against a baseline with
the rules of `rules.py`. Without a given baseline, each stack generation of the fleet is
its own baseline: the fleet median of its nodes (`baseline.fleet_median`).

A rule that selects no measurement in any of the runs (its case pattern and family match
no case, or its figure glob no figure of the cases it matches) checks nothing, and a
typo in a metric name would otherwise disable a gate while every node "passes". Such a
rule is "unmatched": with a rules file of the user's (`strict`), it is an error unless
the user allows it (`--allow-unmatched`), and then it is kept in the result, where every
output shows it. The rules shipped with accelbench are exempt: they cover every family
(GEMM, memory, launch, collectives, models) and a node need not run all of them (a CPU
node runs no collectives), so their unmatched rules are only noted in the result.

Validation checks (`accelbench validate`) carry their own verdict: each check a node
failed is a finding like a failed rule (category "validation", the check's error against
its tolerance), and a check it skipped is none. Rules that name no family leave them
alone (a skipped check is no failed case, and an error is no figure to hold against a
fleet's); a rule written for `family: validation` applies to them as to any case.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.analysis import rules as r
from accelbench.analysis.baseline import (
    Baseline,
    BaselineCase,
    fleet_median,
    node_names,
    node_runs,
)
from accelbench.analysis.checks import FAIL, SKIP, VALIDATION, CheckResult, check_results
from accelbench.analysis.rules import Rule
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.untrusted import short
from accelbench.errors import UserError
from accelbench.store import StoredRun


@dataclass(frozen=True)
class Finding:
    rule: str
    category: str
    compare: str
    case: str
    figure: str | None
    observed: float | None
    limit: str  # "min 0.95", "max 0.1", "status ok"
    off_by: float | None  # how far past the limit, relative to it: 0.16 is 16% short
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "category": self.category, "compare": self.compare,
                "case": self.case, "figure": self.figure, "observed": self.observed,
                "limit": self.limit,
                "off_by_pct": None if self.off_by is None else 100.0 * self.off_by,
                "detail": self.detail or None}


@dataclass(frozen=True)
class NodeResult:
    node: str
    host: str
    run_id: str
    generation_key: str
    checks: int
    findings: list[Finding] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.findings)

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(f.category for f in self.findings))

    def worst_by_rule(self) -> list[tuple[Finding, int]]:
        """The worst finding of each failed rule, with how many cases failed it."""
        by_rule: dict[str, list[Finding]] = {}
        for f in self.findings:
            by_rule.setdefault(f.rule, []).append(f)
        return [(max(fs, key=lambda f: -1.0 if f.off_by is None else f.off_by), len(fs))
                for fs in by_rule.values()]

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "host": self.host, "run": self.run_id,
                "generation_key": self.generation_key, "checks": self.checks,
                "failed": self.failed, "categories": self.categories,
                "findings": [f.to_dict() for f in self.findings]}


@dataclass(frozen=True)
class Diagnosis:
    nodes: list[NodeResult]
    baselines: list[Baseline]
    rules: list[Rule]
    notes: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # names of rules that matched nothing

    @property
    def failing(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.failed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "failing": [n.node for n in self.failing],
            "baselines": [{"source": b.source, "generation_keys": list(b.generation_keys),
                           "runs": list(b.runs)} for b in self.baselines],
            "rules": [rule.to_dict() for rule in self.rules],
            "notes": self.notes,
            "unmatched_rules": self.unmatched,
        }


def unmatched_rules(runs: Sequence[StoredRun], rules: Sequence[Rule]) -> list[str]:
    """The names of the rules that select no measurement of any of `runs`, in rule order."""
    return [rule.name for rule in rules
            if not any(_selects(rule, m) for run in runs for m in run.measurements)]


def _selects(rule: Rule, m: Measurement) -> bool:
    """The rule applies to the case and, with a figure glob, to one of its figures (a
    case without figures, failed or skipped, counts by its case alone)."""
    if not rule.applies(m.case):
        return False
    if rule.figure is None or not m.figures:
        return True
    return any(fnmatch.fnmatchcase(f.name, rule.figure) for f in m.figures)


def unmatched_message(names: Sequence[str]) -> str:
    """The rules that matched nothing, named in one line (the first few of many)."""
    shown = ", ".join(short(n) for n in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{len(names)} rule(s) match no measurement in the selected runs: {shown}{more}"


def diagnose(
    runs: Sequence[StoredRun], rules: Sequence[Rule], baseline: Baseline | None = None,
    *, strict: bool = False, allow_unmatched: bool = False,
) -> Diagnosis:
    """Check every node. `strict` (the user's own rules): a rule that matches no
    measurement is a UserError, unless `allow_unmatched`; either way the rules that
    matched nothing are kept in the result (see the module docstring)."""
    nodes = node_runs(runs)
    if not nodes:
        raise UserError("no runs to diagnose")
    unmatched = unmatched_rules(nodes, rules)
    if unmatched and strict and not allow_unmatched:
        raise UserError(f"{unmatched_message(unmatched)} (a typo in 'metric', 'family' or "
                        "'figure'? --allow-unmatched checks the other rules anyway)")
    names = node_names(nodes)
    notes: list[str] = [unmatched_message(unmatched)] if unmatched else []
    if baseline is None:
        by_generation: dict[str, list[StoredRun]] = {}
        for run in nodes:
            by_generation.setdefault(run.record.generation_key, []).append(run)
        baselines = {
            gen: fleet_median(group, f"fleet median of {len(group)} nodes on {gen}")
            for gen, group in by_generation.items()
        }
        for gen, group in by_generation.items():
            if len(group) < 3:
                notes.append(f"only {len(group)} node(s) on {gen}: a fleet median needs "
                             "at least 3 to outvote a bad one")
    else:
        baselines = {run.record.generation_key: baseline for run in nodes}
        stacks = set(baseline.generation_keys)
        for run in nodes:
            if stacks and run.record.generation_key not in stacks:
                notes.append(f"{names[run.record.id]} runs {run.record.generation_key}, "
                             f"the baseline {' / '.join(sorted(stacks))}")
    results = [
        check_node(names[run.record.id], run, rules, baselines[run.record.generation_key])
        for run in nodes
    ]
    unique = list({id(b): b for b in baselines.values()}.values())
    return Diagnosis(results, unique, list(rules), notes, unmatched)


def check_node(node: str, run: StoredRun, rules: Sequence[Rule], baseline: Baseline) -> NodeResult:
    findings: list[Finding] = []
    checks = 0
    by_key = {m.case.key: m for m in run.measurements}
    for rule in rules:
        if rule.compare == r.STATUS:
            for case in baseline.cases.values():
                if _rule_covers(rule, case.family) and _pattern_matches(rule, case) and (
                        case.key not in by_key):
                    checks += 1
                    findings.append(Finding(rule.name, rule.category, rule.compare, case.label,
                                            None, None, "status ok", None, "missing"))
        for m in run.measurements:
            if not rule.applies(m.case) or not _rule_covers(rule, m.case.family):
                continue
            if rule.compare == r.STATUS:
                checks += 1
                if not m.ok:
                    findings.append(Finding(rule.name, rule.category, rule.compare,
                                            m.case.label, None, None, "status ok", None,
                                            f"{m.status}: {m.reason or '-'}"))
                continue
            if not m.ok:
                continue
            for figure in _figures(m, rule.figure):
                observed = _observed(rule.compare, m, figure, baseline)
                if observed is None:
                    continue
                checks += 1
                finding = _check(rule, m, figure.name, rule.compare, observed, rule.min, rule.max)
                if finding:
                    findings.append(finding)
            if rule.max_cv is not None and m.stats is not None and math.isfinite(m.stats.cv):
                checks += 1
                finding = _check(rule, m, None, r.CV, m.stats.cv, None, rule.max_cv)
                if finding:
                    findings.append(finding)
    verdicts = check_results(run.measurements)
    checks += sum(1 for v in verdicts if v.verdict != SKIP)
    findings += [check_finding(v) for v in verdicts if v.verdict == FAIL]
    record = run.record
    return NodeResult(node, record.host, record.id, record.generation_key, checks, findings)


def _rule_covers(rule: Rule, family: str) -> bool:
    """A rule of no family covers every family but validation's (see the module
    docstring); a rule of a family covers that one."""
    return rule.family == family or (rule.family is None and family != VALIDATION)


def check_finding(result: CheckResult) -> Finding:
    """A failed validation check as a finding: its error against its tolerance."""
    tolerance, error = result.tolerance, result.error
    off = (error - tolerance) / tolerance if error is not None and tolerance else None
    limit = f"tolerance {tolerance:.3g}" if tolerance is not None else "pass"
    return Finding(f"validation {result.check}", VALIDATION, "verdict", result.label,
                   "error" if error is not None else None, error, limit, off, result.reason)


def _pattern_matches(rule: Rule, case: BaselineCase) -> bool:
    """A rule's case pattern against a baseline case (which has no Case object)."""
    from accelbench.core.case import Case

    return rule.metric.matches(Case.make(case.benchmark, case.version, case.family,
                                         case.params, ""))


def _figures(m: Measurement, pattern: str | None) -> list[Figure]:
    if pattern is None:
        return [m.primary] if m.primary else []
    return [f for f in m.figures if fnmatch.fnmatchcase(f.name, pattern)]


def _observed(compare: str, m: Measurement, figure: Figure, baseline: Baseline) -> float | None:
    if compare == r.VALUE:
        value: float | None = figure.value
    elif compare == r.PCT_OF_PEAK:
        value = figure.pct_of_peak
    elif compare == r.CV:
        value = m.stats.cv if m.stats else None
    else:
        base = baseline.cases.get(m.case.key)
        if base is None or base.version != m.case.version:
            return None
        ref = base.figures.get(figure.name)
        if ref is None or not ref.value:
            return None
        value = figure.value / ref.value
    return value if value is not None and math.isfinite(value) else None


def _check(rule: Rule, m: Measurement, figure: str | None, compare: str, observed: float,
           low: float | None, high: float | None) -> Finding | None:
    if low is not None and observed < low:
        off = (low - observed) / abs(low) if low else math.inf
        return Finding(rule.name, rule.category, compare, m.case.label, figure, observed,
                       f"min {low:g}", off)
    if high is not None and observed > high:
        off = (observed - high) / abs(high) if high else math.inf
        return Finding(rule.name, rule.category, compare, m.case.label, figure, observed,
                       f"max {high:g}", off)
    return None
