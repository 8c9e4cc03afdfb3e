"""Which nodes of a fleet are bad, by which rule, and by how much.

Each node (each host and device) is checked against a baseline with the rules of
`rules.py`, on its newest measurement of each case, whichever of its runs that came from
(`latest.node_states`): a newer run of other cases (a validate run after a quick run)
does not hide what an older run found. Each finding names the run its figure came from,
and each node the runs it was judged on. A node's stack is its newest run's; its runs on
another stack (before an upgrade) are not judged. Without a given baseline, each stack
generation of the fleet is its own baseline: the fleet median of its nodes, each by its
newest measurement of each case (`baseline.nodes_median`).

A rule that selects no measurement in any of the runs (its case pattern and family match
no case, or its figure glob no figure of the cases it matches) checks nothing, and a
typo in a metric name would otherwise disable a gate while every node "passes". Such a
rule is "unmatched": with a rules file of the user's (`strict`), it is an error unless
the user allows it (`--allow-unmatched`), and then it is kept in the result, where every
output shows it. The rules shipped with accelbench are exempt: they cover every family
(GEMM, memory, launch, collectives, models) and a node need not run all of them (a CPU
node runs no collectives), so their unmatched rules are only noted in the result.

Validation and health checks (`accelbench validate`, `accelbench health`) carry their
own verdict: each check a node failed is a finding like a failed rule (category
"validation" with the check's error against its tolerance, or "health" with the readings
that failed), and a check it skipped is none. Rules that name no family leave them
alone (a skipped check is no failed case, and an error is no figure to hold against a
fleet's); a rule written for `family: validation` applies to them as to any case.

A node is drained only on evidence that can be trusted. A figure measured on a busy host
or while the device throttled (`baseline.unfit`) that falls outside a rule's limits, or
one held against a fleet median of such figures (`BaselineCase.caveat`), is no failure:
the node's verdict on that rule is "inconclusive", with the reason, and a node with no
failure but such a verdict is inconclusive (`accelbench diagnose` exits 9). The fleet
median itself is taken from the trustworthy figures (`baseline.nodes_median`), so busy
nodes' low figures do not drag it down to a slow node's. With `exclude_contended` or
`exclude_throttled` (the command's `--exclude-contended`, `--exclude-throttled`), such
figures are not judged at all and are left out of the fleet median.

A case is missing on a node only where the node was asked to run it: where a run of its
stack that measured the case was asked what one of the node's runs was asked (`_ask`:
the same command, suite, selection and accelbench version), or where no run of its stack
measured it (a case of a given baseline). Cases that one host also ran, in runs the
others never made, are judged on the nodes that ran them, and fail no other node.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.analysis import rules as r
from accelbench.analysis.baseline import (
    Baseline,
    BaselineCase,
    node_names,
    nodes_median,
    unfit,
)
from accelbench.analysis.checks import FAIL, PASS, SKIP, CheckResult, check_results
from accelbench.analysis.evidence import CONTENDED, INCONCLUSIVE, THROTTLED
from accelbench.analysis.latest import NodeState, node_states
from accelbench.analysis.rules import Rule
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.reasons import CHECK_ERROR
from accelbench.core.untrusted import short
from accelbench.errors import UserError
from accelbench.store import RunRecord, StoredRun


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
    run: str | None = None  # the run the judged figure came from; None for a missing case
    # Its reason codes (core.reasons): a failed check's own; else the code of what
    # failed (a figure against the baseline, a failed or missing case, odd wiring).
    codes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.codes:
            object.__setattr__(self, "codes", (_rule_code(self),))

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "category": self.category, "compare": self.compare,
                "case": self.case, "figure": self.figure, "observed": self.observed,
                "limit": self.limit,
                "off_by_pct": None if self.off_by is None else 100.0 * self.off_by,
                "detail": self.detail or None, "run": self.run, "codes": list(self.codes)}


def _rule_code(finding: Finding) -> str:
    if finding.compare == r.STATUS:
        return "ACCEL_CASE_MISSING" if finding.detail == "missing" else "ACCEL_CASE_FAILED"
    if finding.compare == "wiring":
        return "ACCEL_WIRING"
    if finding.compare == "verdict":
        return CHECK_ERROR
    return "ACCEL_BELOW_BASELINE"


@dataclass(frozen=True)
class NodeResult:
    node: str
    host: str
    run_id: str  # the newest of `runs` (the node's newest run where it measured nothing)
    generation_key: str
    checks: int
    findings: list[Finding] = field(default_factory=list)
    runs: tuple[str, ...] = ()  # the runs its judged measurements came from, oldest first
    # What would have failed on figures that cannot be trusted (busy host, throttled
    # device, or a baseline of such figures), each with the reason as its detail.
    inconclusive: list[Finding] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.findings)

    @property
    def verdict(self) -> str:
        """"fail" on any finding; else "inconclusive" on any untrusted one; else "pass"."""
        return FAIL if self.findings else INCONCLUSIVE if self.inconclusive else PASS

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(f.category for f in self.findings))

    @property
    def codes(self) -> list[str]:
        """The reason codes of its failing findings, each once."""
        return list(dict.fromkeys(c for f in self.findings for c in f.codes))

    @property
    def inconclusive_categories(self) -> list[str]:
        return list(dict.fromkeys(f.category for f in self.inconclusive))

    def worst_by_rule(self, inconclusive: bool = False) -> list[tuple[Finding, int]]:
        """The worst finding of each failed rule (`inconclusive`: of each rule it is
        inconclusive on), with how many cases failed it."""
        by_rule: dict[str, list[Finding]] = {}
        for f in self.inconclusive if inconclusive else self.findings:
            by_rule.setdefault(f.rule, []).append(f)
        return [(max(fs, key=lambda f: -1.0 if f.off_by is None else f.off_by), len(fs))
                for fs in by_rule.values()]

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "host": self.host, "run": self.run_id,
                "runs": list(self.runs), "generation_key": self.generation_key,
                "checks": self.checks, "verdict": self.verdict, "failed": self.failed,
                "categories": self.categories, "codes": self.codes,
                "findings": [f.to_dict() for f in self.findings],
                "inconclusive": [f.to_dict() for f in self.inconclusive]}


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

    @property
    def inconclusive(self) -> list[NodeResult]:
        """The nodes that fail nothing but have a verdict that cannot be trusted."""
        return [n for n in self.nodes if n.verdict == INCONCLUSIVE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "failing": [n.node for n in self.failing],
            "inconclusive": [n.node for n in self.inconclusive],
            "baselines": [{"source": b.source, "generation_keys": list(b.generation_keys),
                           "runs": list(b.runs)} for b in self.baselines],
            "rules": [rule.to_dict() for rule in self.rules],
            "notes": self.notes,
            "unmatched_rules": self.unmatched,
        }


def with_codes(d: Diagnosis, codes: Collection[str]) -> Diagnosis:
    """The diagnosis judged on the findings that carry one of `codes` alone: every
    other finding, failing or inconclusive, is left out (a node with none left passes)."""
    def kept(found: Sequence[Finding]) -> list[Finding]:
        return [f for f in found if not set(codes).isdisjoint(f.codes)]

    nodes = [replace(n, findings=kept(n.findings), inconclusive=kept(n.inconclusive))
             for n in d.nodes]
    note = f"only findings with the reason code(s) {', '.join(codes)}"
    return replace(d, nodes=nodes, notes=[*d.notes, note])


def unmatched_rules(measurements: Iterable[Measurement], rules: Sequence[Rule]) -> list[str]:
    """The names of the rules that select none of `measurements`, in rule order."""
    chosen = list(measurements)
    return [rule.name for rule in rules if not any(_selects(rule, m) for m in chosen)]


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
    exclude_contended: bool = False, exclude_throttled: bool = False,
) -> Diagnosis:
    """Check every node on its newest measurement of each case among `runs` (every run
    of the fleet, not only the newest of each node). `strict` (the user's own rules): a
    rule that matches no measurement is a UserError, unless `allow_unmatched`; either way
    the rules that matched nothing are kept in the result (see the module docstring).
    `exclude_contended`, `exclude_throttled`: figures measured on a busy host, or while
    the device throttled, are neither judged nor part of the fleet median."""
    nodes = node_states(runs)
    if not nodes:
        raise UserError("no runs to diagnose")
    unmatched = unmatched_rules((m for n in nodes for m in n.measurements), rules)
    if unmatched and strict and not allow_unmatched:
        raise UserError(f"{unmatched_message(unmatched)} (a typo in 'metric', 'family' or "
                        "'figure'? --allow-unmatched checks the other rules anyway)")
    names = node_names([n.run for n in nodes])
    notes: list[str] = [unmatched_message(unmatched)] if unmatched else []
    notes += _other_stack_notes(nodes)
    leave_out = tuple(mark for mark, asked in ((CONTENDED, exclude_contended),
                                               (THROTTLED, exclude_throttled)) if asked)
    if baseline is None:
        baselines = _fleet_baselines(nodes, notes, leave_out)
    else:
        baselines = {n.generation_key: baseline for n in nodes}
        notes += _stack_notes(nodes, names, baseline)
    asked = _asked(runs, nodes)
    results = [check_node(names[n.run.record.id], n, rules, baselines[n.generation_key],
                          asked=ask, leave_out=leave_out)
               for n, ask in zip(nodes, asked, strict=True)]
    results = _with_wiring(results, nodes, names)
    unique = list({id(b): b for b in baselines.values()}.values())
    notes += _evidence_notes(nodes, unique, leave_out)
    notes += _not_asked_notes(nodes, baselines, asked)
    return Diagnosis(results, unique, list(rules), notes, unmatched)


# -- which cases a node was asked to run --------------------------------------------------

# The fields of a stored request (core.request.RunRequest) that decide which cases a run
# plans; the accelbench version is added, as a newer one may plan more.
_ASK_FIELDS = ("command", "suite", "benches", "overrides", "values", "dtypes", "device",
               "nproc_per_node", "backend", "threads")


def _ask(record: RunRecord) -> str:
    """What a run was asked to measure, as far as that decides its cases, as one text:
    two runs of equal asks plan the same cases on nodes alike. A run stored without a
    request is known by its suite."""
    request = record.request
    if isinstance(request, Mapping):
        chosen: dict[str, object] = {k: request.get(k) for k in _ASK_FIELDS}
    else:
        chosen = {"suite": record.suite}
    return json.dumps([record.accelbench_version, chosen], sort_keys=True, default=str)


def _asked(runs: Sequence[StoredRun],
           nodes: Sequence[NodeState]) -> list[Callable[[str], bool]]:
    """For each node, whether it was asked to run a case (by key): a run of its stack
    that measured the case was asked what one of the node's runs on that stack was, or
    no run of its stack measured the case at all."""
    measured_by: dict[tuple[str, str], set[str]] = {}
    asks_of: dict[tuple[str, str, str], set[str]] = {}
    for run in runs:
        record = run.record
        ask = _ask(record)
        asks_of.setdefault((record.host, record.device, record.generation_key),
                           set()).add(ask)
        for m in run.measurements:
            measured_by.setdefault((record.generation_key, m.case.key), set()).add(ask)

    def asked_of(node: NodeState) -> Callable[[str], bool]:
        stack = node.generation_key
        own = asks_of.get((node.host, node.device, stack), set())

        def asked(key: str) -> bool:
            by = measured_by.get((stack, key))
            return by is None or not by.isdisjoint(own)
        return asked

    return [asked_of(n) for n in nodes]


def _not_asked_notes(nodes: Sequence[NodeState], baselines: Mapping[str, Baseline],
                     asked: Sequence[Callable[[str], bool]]) -> list[str]:
    """One note for the cases of the baseline that nodes did not measure and were never
    asked to run: not counted missing."""
    pairs = 0
    counted: set[int] = set()
    for i, (node, was_asked) in enumerate(zip(nodes, asked, strict=True)):
        measured = node.run_by_case()
        for key in baselines[node.generation_key].cases:
            if key not in measured and not was_asked(key):
                pairs += 1
                counted.add(i)
    if not pairs:
        return []
    return [f"{pairs} case(s) that {len(counted)} node(s) were not asked to run (only "
            "other nodes' runs asked for them) are not counted missing"]


def _evidence_notes(nodes: Sequence[NodeState], baselines: Sequence[Baseline],
                    leave_out: Collection[str]) -> list[str]:
    """Notes on the figures left out (`leave_out`) and on the cases whose baseline is of
    untrusted figures."""
    notes = []
    for mark, words in ((CONTENDED, "measured on a busy host"),
                        (THROTTLED, "measured while the device throttled")):
        if mark in leave_out:
            count = sum(1 for n in nodes for m in n.measurements
                        if m.ok and unfit(m, (mark,)))
            if count:
                notes.append(f"{count} figure(s) {words} are left out")
    doubtful = sum(1 for b in baselines for c in b.cases.values() if c.caveat)
    if doubtful:
        notes.append(f"the baseline of {doubtful} case(s) is of figures measured on a busy "
                     "host or a throttled device: a failure against it is inconclusive")
    return notes


def _with_wiring(results: list[NodeResult], nodes: Sequence[NodeState],
                 names: dict[str, str]) -> list[NodeResult]:
    """Each node wired unlike most nodes of its stack, with a finding that says how."""
    from accelbench.analysis.wiring import RULE, odd_wiring

    named = [(names[n.run.record.id], n) for n in nodes]
    odd = odd_wiring(named)
    out = []
    for result, (_, state) in zip(results, named, strict=True):
        if result.node in odd:
            own, common, read = odd[result.node]
            finding = Finding(RULE, "health", "wiring", read.label, None, None,
                              "wired as most nodes of its stack", None,
                              f"GPU/NIC wiring {own} (most nodes: {common})",
                              read.run or state.run_by_case().get(read.key))
            result = replace(result, findings=[*result.findings, finding],
                             checks=result.checks + 1)
        out.append(result)
    return out


def _fleet_baselines(nodes: Sequence[NodeState], notes: list[str],
                     leave_out: Collection[str] = ()) -> dict[str, Baseline]:
    """Stack -> the fleet median of its nodes (figures `unfit` by `leave_out` left out);
    a stack of too few nodes to outvote a bad one, or cases of a larger stack that too
    few of its nodes measured, are noted in `notes`."""
    by_generation: dict[str, list[NodeState]] = {}
    for node in nodes:
        by_generation.setdefault(node.generation_key, []).append(node)
    for gen, group in by_generation.items():
        if len(group) < 3:
            notes.append(f"only {len(group)} node(s) on {gen}: a fleet median needs "
                         "at least 3 to outvote a bad one")
    baselines = {gen: nodes_median(group, f"fleet median of {len(group)} nodes on {gen}",
                                   leave_out=leave_out)
                 for gen, group in by_generation.items()}
    for gen, group in by_generation.items():
        few = sum(1 for c in baselines[gen].cases.values() if c.nodes < 3)
        if len(group) >= 3 and few:
            notes.append(f"{few} case(s) on {gen} were measured by fewer than 3 nodes: "
                         "their median cannot outvote a bad one")
    return baselines


def _stack_notes(nodes: Sequence[NodeState], names: dict[str, str],
                 baseline: Baseline) -> list[str]:
    """A note for each node of a stack the given baseline was not measured on."""
    stacks = set(baseline.generation_keys)
    return [f"{names[n.run.record.id]} runs {n.generation_key}, "
            f"the baseline {' / '.join(sorted(stacks))}"
            for n in nodes if stacks and n.generation_key not in stacks]


def _other_stack_notes(nodes: Sequence[NodeState]) -> list[str]:
    """One note for the runs left out for being of a stack older than their node's."""
    left = [i for n in nodes for i in n.other_stack_runs]
    if not left:
        return []
    count = sum(1 for n in nodes if n.other_stack_runs)
    return [f"{len(left)} run(s) of {count} node(s) on a stack other than the node's newest "
            "run's are not judged"]


def check_node(node: str, state: NodeState, rules: Sequence[Rule], baseline: Baseline, *,
               asked: Callable[[str], bool] | None = None,
               leave_out: Collection[str] = ()) -> NodeResult:
    """One node judged by every rule on its newest measurement of each case, and by the
    verdicts of its newest validation checks. `asked(case key)`: whether the node was
    asked to run a case of the baseline it did not measure (None: every one); figures
    `unfit` by a mark of `leave_out` are not judged (see the module docstring)."""
    run_of = state.run_by_case()
    findings: list[Finding] = []
    unsure: list[Finding] = []
    checks = 0
    for rule in rules:
        if rule.compare == r.STATUS:
            missing = _missing(rule, baseline, run_of, asked)
            checks += len(missing)
            findings += missing
        for m in state.measurements:
            if rule.applies(m.case) and _rule_covers(rule, m.case.family, m.case.check):
                if rule.compare != r.STATUS and unfit(m, leave_out):
                    continue
                done, found = _check_measurement(rule, m, baseline, run_of[m.case.key])
                checks += done
                for finding in found:
                    why = _untrusted(rule, m, finding, baseline)
                    if why:
                        unsure.append(replace(finding, detail=why))
                    else:
                        findings.append(finding)
    verdicts = check_results(state.measurements)
    checks += sum(1 for v in verdicts if v.verdict != SKIP)
    findings += [check_finding(v, run_of.get(v.key)) for v in verdicts if v.verdict == FAIL]
    record = state.run.record
    return NodeResult(node, record.host, state.newest_run_id, record.generation_key, checks,
                      findings, state.run_ids, unsure)


def _untrusted(rule: Rule, m: Measurement, finding: Finding, baseline: Baseline) -> str:
    """Why a failed check of `m`'s figure cannot be trusted ("" where it can): the figure
    was measured on a busy host or a throttled device, or the baseline it is held
    against was. A failed status is always trusted."""
    if rule.compare == r.STATUS:
        return ""
    why = unfit(m)
    if not why and finding.compare == r.RATIO:
        base = baseline.cases.get(m.case.key)
        why = base.caveat if base is not None else ""
    return why


def _missing(rule: Rule, baseline: Baseline, measured: dict[str, str],
             asked: Callable[[str], bool] | None = None) -> list[Finding]:
    """A status rule's finding for each case of the baseline it covers that the node
    measured in none of its runs and was asked to run (`asked`; None: every case)."""
    return [Finding(rule.name, rule.category, rule.compare, case.label, None, None,
                    "status ok", None, "missing")
            for case in baseline.cases.values()
            if _rule_covers(rule, case.family, case.check) and _pattern_matches(rule, case)
            and case.key not in measured and (asked is None or asked(case.key))]


def _check_measurement(rule: Rule, m: Measurement, baseline: Baseline,
                       run: str) -> tuple[int, list[Finding]]:
    """How many checks `rule` made of one measurement (from `run`), and what failed."""
    if rule.compare == r.STATUS:
        if m.ok:
            return 1, []
        return 1, [Finding(rule.name, rule.category, rule.compare, m.case.label, None, None,
                           "status ok", None, f"{m.status}: {m.reason or '-'}", run)]
    if not m.ok:
        return 0, []
    checks = 0
    findings: list[Finding] = []
    for figure in _figures(m, rule.figure):
        observed = _observed(rule.compare, m, figure, baseline)
        if observed is None:
            continue
        checks += 1
        finding = _check(rule, m, figure.name, rule.compare, observed, rule.min, rule.max, run)
        findings += [finding] if finding else []
    if rule.max_cv is not None and m.stats is not None and math.isfinite(m.stats.cv):
        checks += 1
        finding = _check(rule, m, None, r.CV, m.stats.cv, None, rule.max_cv, run)
        findings += [finding] if finding else []
    return checks, findings


def _rule_covers(rule: Rule, family: str, check: bool) -> bool:
    """A rule of no family covers every case but the checks' (validation, health: see
    the module docstring); a rule of a family covers that one."""
    return rule.family == family or (rule.family is None and not check)


def check_finding(result: CheckResult, run: str | None = None) -> Finding:
    """A failed check (measured in `run`) as a finding: its error against its tolerance,
    or for a health check the failing readings."""
    tolerance, error = result.tolerance, result.error
    off = (error - tolerance) / tolerance if error is not None and tolerance else None
    limit = f"tolerance {tolerance:.3g}" if tolerance is not None else "pass"
    return Finding(f"{result.family} {result.check}", result.family, "verdict", result.label,
                   "error" if error is not None else None, error, limit, off, result.reason,
                   run, result.codes)


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
           low: float | None, high: float | None, run: str) -> Finding | None:
    """The finding of an observed figure (of `m`, measured in `run`) outside its limits."""
    if low is not None and observed < low:
        off = (low - observed) / abs(low) if low else math.inf
        return Finding(rule.name, rule.category, compare, m.case.label, figure, observed,
                       f"min {low:g}", off, run=run)
    if high is not None and observed > high:
        off = (observed - high) / abs(high) if high else math.inf
        return Finding(rule.name, rule.category, compare, m.case.label, figure, observed,
                       f"max {high:g}", off, run=run)
    return None
