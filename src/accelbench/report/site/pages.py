"""The data of each page of the site, from the stored runs: pure functions of the runs
(no store, no drawing), each reusing the analysis its command uses, so that a page and
the command say the same.

- Overview: the newest run of each node and stack, failures and inconclusive results
  first, its checks' verdicts, and what changed since the node's previous run of the
  same suite (`analysis.compare`, with the noise floors the store teaches, as
  `accelbench compare PREVIOUS RUN` judges it).
- Cases: a page per case, its headline figure over time per stack and node
  (`analysis.history` over each node's runs, as `accelbench history KEY --host NODE`).
- Fleet: each node's figures over its stack's fleet median (`analysis.diagnose` with the
  default rules, as `accelbench diagnose`), and the matrices that views draw as heat maps
  (the pairs of `isolate`), from the newest run of each benchmark that has them, and
  the line charts views mark for the site (`Lines.site`: a serving engine's throughput
  against per-user speed), from the newest run of each benchmark on each stack.
- Generations: the generations chart of every suite measured on more than one stack.
- Regressions: every step `history` finds of at least the threshold, newest first, with
  the interval of the step from the runs either side of it; then the series it cannot
  tell about (busy host, throttled device, too noisy, too few runs), with why.
- A/B: every A/B both of whose runs are stored (`analysis.ab`, as `accelbench ab`
  printed it), newest first.
- GPUs: every GPU the runs recorded, by serial (else UUID), and a page per GPU with the
  nodes it has been in and its figures over time (`report.site.gpu_pages`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from accelbench.analysis import floors as floors_mod
from accelbench.analysis.baseline import Baseline
from accelbench.analysis.checks import FAIL, PASS, SKIP, check_results, tally
from accelbench.analysis.compare import FASTER, INCONCLUSIVE, SAME, SLOWER, Comparison, compare
from accelbench.analysis.diagnose import NodeResult, diagnose
from accelbench.analysis.generations import generations, short_labels
from accelbench.analysis.gpu_history import gpu_histories
from accelbench.analysis.history import ChangePoint, Series, history
from accelbench.analysis.latest import NodeState, node_states
from accelbench.analysis.rules import load_rules
from accelbench.analysis.select import RunGroup
from accelbench.analysis.values import case_sort_key, speed_ratio
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.names import RUN_COMPLETE, RUN_RUNNING
from accelbench.core.units import (
    MISSING,
    axis_scale,
    format_change,
    format_factor,
    format_pct,
    format_ratio,
    format_timestamp,
    format_value,
)
from accelbench.core.view import BAD, GOOD, WARN, HeatMap, Lines, LineSeries
from accelbench.report.site.gpu_pages import GPUS, gpu_page, gpus_page
from accelbench.report.site.model import (
    ANY,
    Block,
    Cell,
    Grid,
    Link,
    Page,
    Plot,
    Row,
    Scope,
    case_href,
    choices,
    grid_of,
    heat_map_grid,
    lines_grid,
    run_href,
)
from accelbench.store import StoredExplanation, StoredRun
from accelbench.store.gpus import RunGpu, StoredGpu

DEFAULT_THRESHOLD = 0.05
OVERVIEW, CASES, FLEET, GENERATIONS, REGRESSIONS, AB = (
    "index.html", "cases.html", "fleet.html", "generations.html", "regressions.html",
    "ab.html")
NAV = (("Overview", OVERVIEW), ("Cases", CASES), ("Fleet", FLEET),
       ("Generations", GENERATIONS), ("Regressions", REGRESSIONS), ("A/B", AB),
       ("GPUs", GPUS))
HEAT_MAP_NODES = 40  # rows a fleet heat map draws (the table beside it has every node)
HEAT_MAP_CASES = 40
_VERDICT_STYLE = {SLOWER: BAD, INCONCLUSIVE: WARN, FASTER: GOOD, SAME: None}


@dataclass(frozen=True)
class NodeSeries:
    """The series `history` gives for one case over one node's runs (one per stack and
    benchmark version)."""

    host: str
    series: Series


def site_pages(runs: Sequence[StoredRun], store_name: str,
               threshold: float = DEFAULT_THRESHOLD,
               explanations: Sequence[StoredExplanation] = (), *,
               gpus: Sequence[StoredGpu] = (), run_gpus: Sequence[RunGpu] = ()
               ) -> list[Page]:
    """Every page but the runs' own reports, from `runs` (any order; their measurements,
    fingerprints not needed), the stored `explanations` of cases (`accelbench
    explain`) and the GPUs the runs were measured on (`Store.gpus`, `Store.run_gpus`)."""
    ordered = sorted(runs, key=lambda r: (r.record.started_at, r.record.id))
    learned = floors_mod.learn((r.record, m) for r in ordered for m in r.measurements)
    by_case = case_series(ordered, threshold)
    pages = [overview_page(ordered, store_name, learned, threshold),
             cases_page(by_case)]
    pages += [case_page(key, items) for key, items in by_case.items()]
    pages += [fleet_page(ordered), generations_page(ordered),
              regressions_page(by_case, threshold, explanations), ab_page(ordered)]
    histories = gpu_histories(gpus, run_gpus, ordered, min_effect=threshold)
    pages += [_filtered(gpus_page(histories)), *(_filtered(gpu_page(h)) for h in histories)]
    return pages


# -- overview ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Newest:
    """The newest run of a node and stack, and what changed since its previous run."""

    run: StoredRun
    previous: StoredRun | None
    comparison: Comparison | None

    @property
    def checks(self) -> dict[str, int]:
        return tally(check_results(self.run.measurements))

    @property
    def failed(self) -> bool:
        record = self.run.record
        return (record.status not in (RUN_COMPLETE, RUN_RUNNING) or record.n_failed > 0
                or self.checks[FAIL] > 0)

    @property
    def unsure(self) -> bool:
        c = self.comparison
        return c is not None and (c.verdict_counts[INCONCLUSIVE] > 0
                                  or c.verdict_counts[SLOWER] > 0)


def newest_runs(ordered: Sequence[StoredRun], learned: floors_mod.Floors,
                threshold: float) -> list[Newest]:
    """The newest run of each (node, stack), each compared with the node's run of the
    same suite before it; failures first, then inconclusive or slower, then by node."""
    newest: dict[tuple[str, str], int] = {}
    for i, run in enumerate(ordered):
        newest[(run.record.host, run.record.generation_key)] = i
    out = []
    for i in newest.values():
        run = ordered[i]
        previous = next((p for p in reversed(ordered[:i])
                         if p.record.host == run.record.host
                         and p.record.suite == run.record.suite), None)
        comparison = None
        if previous is not None:
            comparison = compare(RunGroup(previous.record.id, (previous,)),
                                 RunGroup(run.record.id, (run,)), min_effect=threshold,
                                 floors=learned)
        out.append(Newest(run, previous, comparison))
    out.sort(key=lambda n: (not n.failed, not n.unsure, n.run.record.host,
                            n.run.record.generation_key))
    return out


def overview_page(ordered: Sequence[StoredRun], store_name: str,
                  learned: floors_mod.Floors, threshold: float) -> Page:
    if not ordered:
        return Page(OVERVIEW, "accelbench results", (),
                    ("No runs yet: this store holds no runs. Measure with `accelbench run` "
                     "and publish again.", f"Store: {store_name}"))
    found = newest_runs(ordered, learned, threshold)
    rows, changes, checks = [], [], []
    for n in found:
        record = n.run.record
        scope = Scope(node=record.host, stack=record.generation_key)
        counts = n.checks
        shown_checks = (MISSING if not any(counts.values()) else
                        f"{counts[PASS]} pass, {counts[FAIL]} fail, {counts[SKIP]} skip")
        since: Cell = "no earlier run of this suite"
        if n.comparison is not None and n.previous is not None:
            v = n.comparison.verdict_counts
            since = (f"{v[SLOWER]} slower, {v[INCONCLUSIVE]} inconclusive, {v[FASTER]} faster, "
                     f"{v[SAME]} same")
        style = BAD if n.failed else WARN if n.unsure else None
        rows.append(Row((
            record.host, record.generation_key, Link(record.id, run_href(record.id)),
            record.suite or MISSING, record.status, f"{format_timestamp(record.started_at)}",
            f"{record.n_ok} ok, {record.n_failed} failed, {record.n_skipped} skipped",
            shown_checks,
            Link(n.previous.record.id, run_href(n.previous.record.id))
            if n.previous is not None else MISSING,
            since), style, scope, record.id))
        for r in check_results(n.run.measurements):
            if r.verdict == FAIL:
                checks.append(Row((record.host, record.generation_key, r.name,
                                   r.precision or MISSING, r.coded_reason or MISSING,
                                   Link(record.id, run_href(record.id))),
                                  BAD, replace(scope, bench=r.check), f"{record.id}:{r.key}"))
        if n.comparison is not None and n.previous is not None:
            changes += _change_rows(n, scope)
    order = {SLOWER: 0, INCONCLUSIVE: 1, FASTER: 2}
    changes.sort(key=lambda r: order.get(str(r.cells[3]), 3))
    header = ("Node", "Stack", "Newest run", "Suite", "Status", "Started (UTC)", "Cases",
              "Checks", "Previous run", "Since the previous run")
    blocks = [
        Block("Newest run of each node and stack", (
            "Failures first (a failed run, case or check), then runs with a case slower or "
            "inconclusive against the node's previous run of the same suite."),
            tables=(Grid("Nodes and stacks", header, tuple(rows)),), anchor="nodes"),
        Block("Failed checks", "Validation and health checks the newest runs failed.",
              tables=(Grid("Failed checks", ("Node", "Stack", "Check", "Precision", "Reason",
                                             "Run"), tuple(checks)),), anchor="checks"),
        Block("Changes since the previous run", (
            f"Every case of a newest run not the same as in the node's previous run of the "
            f"same suite, judged as `accelbench compare PREVIOUS NEWEST` judges it "
            f"(minimum effect {threshold:.0%}, noise floors from the store's repeated "
            "runs). The interval is the 95% CI of the speed ratio."),
            tables=(Grid("Changes", ("Node", "Stack", "Case", "Verdict", "Change",
                                     "Speed, new over previous", "From", "To", "Why"),
                         tuple(changes), frozenset({4, 5})),), anchor="changes"),
    ]
    newest = ordered[-1].record
    intro = (f"{len(ordered)} runs of {len({r.record.host for r in ordered})} nodes on "
             f"{len({r.record.generation_key for r in ordered})} stacks; the newest "
             f"started {format_timestamp(newest.started_at)} UTC.", f"Store: {store_name}")
    return _filtered(Page(OVERVIEW, "accelbench results", tuple(blocks), intro))


def _change_rows(n: Newest, scope: Scope) -> list[Row]:
    assert n.comparison is not None and n.previous is not None
    rows = []
    for c in n.comparison.cases:
        if c.verdict == SAME:
            continue
        rows.append(Row((
            scope.node, scope.stack, Link(c.label, case_href(c.key)), c.verdict,
            format_change(c.change), format_ratio(c.speed.ratio, c.speed.low, c.speed.high),
            Link(n.previous.record.id, run_href(n.previous.record.id)),
            Link(n.run.record.id, run_href(n.run.record.id)), c.reason or MISSING),
            _VERDICT_STYLE[c.verdict], replace(scope, bench=c.benchmark),
            f"{n.run.record.id}:{c.key}"))
    return rows


# -- cases -------------------------------------------------------------------------------


def case_series(ordered: Sequence[StoredRun], threshold: float
                ) -> dict[str, list[NodeSeries]]:
    """Case key -> the series of `history` on each node, in case order; only cases with
    a measured headline figure."""
    grouped: dict[tuple[str, str], list[StoredRun]] = {}
    hosts: dict[str, set[str]] = {}
    cases: dict[str, Case] = {}
    for run in ordered:
        kept: dict[str, list[Measurement]] = {}
        for m in run.measurements:
            if m.ok and m.primary is not None:
                kept.setdefault(m.case.key, []).append(m)
                cases.setdefault(m.case.key, m.case)
        for key, ms in kept.items():
            grouped.setdefault((key, run.record.host), []).append(
                StoredRun(run.record, {}, tuple(ms)))
            hosts.setdefault(key, set()).add(run.record.host)
    out: dict[str, list[NodeSeries]] = {}
    for key in sorted(cases, key=lambda k: (case_sort_key(cases[k]), k)):
        out[key] = [NodeSeries(host, s) for host in sorted(hosts[key])
                    for s in history(grouped[(key, host)], key, min_effect=threshold)]
    return out


def cases_page(by_case: dict[str, list[NodeSeries]]) -> Page:
    rows = []
    for key, items in by_case.items():
        case = items[-1].series.case
        stacks = sorted({i.series.generation_key for i in items})
        newest = max((i.series.points[-1].started_at, i) for i in items
                     if i.series.points)[1] if items else None
        steps = sum(len(i.series.change_points) for i in items)
        value = (format_value(newest.series.points[-1].value, newest.series.unit)
                 if newest is not None else MISSING)
        rows.append(Row((Link(case.label, case_href(key)), case.family,
                         str(len({i.host for i in items})), str(len(stacks)),
                         value, str(steps)),
                        WARN if any(i.series.latest_regression for i in items) else None,
                        Scope(bench=case.benchmark), key))
    table = Grid("Cases", ("Case", "Family", "Nodes", "Stacks", "Newest figure",
                           "Steps found"), tuple(rows), frozenset({2, 3, 4, 5}))
    about = ("Every case with a measured headline figure; marked where a series ends on a "
             "regression.")
    return _filtered(Page(CASES, "Cases", (Block("Cases", about, tables=(table,)),)))


def case_page(key: str, items: Sequence[NodeSeries]) -> Page:
    case = items[-1].series.case
    by_stack: dict[str, list[NodeSeries]] = {}
    for item in items:
        by_stack.setdefault(item.series.generation_key, []).append(item)
    blocks = [_stack_block(case, stack, group) for stack, group in sorted(by_stack.items())]
    figure = items[-1].series
    intro = (f"{case.family} / {case.benchmark}, case key {key}. Headline figure: "
             f"{figure.figure} ({figure.unit}, {'higher' if figure.higher_is_better else 'lower'}"
             " is better).",
             "One line per node: each point a run's figure, the band its interval, dashed "
             "lines the steps `accelbench history` finds (at the site's threshold), red rings "
             "the figures measured on a busy host or a throttled device. Each run links to "
             "its report.")
    return _filtered(Page(case_href(key), case.label, tuple(blocks), intro))


def _stack_block(case: Case, stack: str, group: Sequence[NodeSeries]) -> Block:
    multi_version = len({i.series.case.version for i in group}) > 1
    values = [p.value for i in group for p in i.series.points]
    unit = group[-1].series.unit
    factor, shown_unit = axis_scale(values, unit)
    lines, rows = [], []
    for item in group:
        s = item.series
        name = item.host + (f" (version {s.case.version})" if multi_version else "")
        steps = {c.index: c for c in s.change_points}
        lines.append(LineSeries(
            name, [p.started_at for p in s.points], [p.value / factor for p in s.points],
            band=[(p.ci_low / factor, p.ci_high / factor) for p in s.points],
            marked=[j for j, p in enumerate(s.points) if p.contended or p.throttled],
            steps=sorted(steps),
            tips=[f"{item.host}, run {p.run_id}, {format_timestamp(p.started_at)} UTC: "
                  f"{format_value(p.value, s.unit)}" + (
                      f" [{format_value(p.ci_low, s.unit)}, {format_value(p.ci_high, s.unit)}]"
                      if p.stated else "") for p in s.points]))
        for j, p in enumerate(s.points):
            flags = [flag for flag, on in (("contended", p.contended),
                                           ("throttled", p.throttled), ("noisy", p.noisy))
                     if on]
            step = steps.get(j)
            rows.append(Row((
                Link(p.run_id, run_href(p.run_id)), format_timestamp(p.started_at), item.host,
                format_value(p.value, s.unit),
                (f"{format_value(p.ci_low, s.unit)} to {format_value(p.ci_high, s.unit)}"
                 if p.stated else MISSING),
                ", ".join(flags) or MISSING,
                step.describe() if step is not None else MISSING),
                BAD if step is not None and step.change < 0 else
                GOOD if step is not None else WARN if flags else None,
                Scope(node=item.host), p.run_id))
    figure = group[-1].series.figure
    chart = Lines(f"{figure} on {stack}", lines, "run start (UTC)",
                  f"{figure} ({shown_unit})", dates=True,
                  marked_label="busy host or throttled")
    table = Grid(f"Points on {stack}", ("Run", "Started (UTC)", "Node", figure, "Interval",
                                       "Marks", "Step"), tuple(rows), frozenset({3}))
    floors = [f"{i.host}: run-to-run noise ±{i.series.noise_floor.rel_sd:.1%} over "
              f"{i.series.noise_floor.runs} runs" for i in group
              if i.series.noise_floor is not None]
    return Block(stack, "; ".join(floors), plots=(Plot(
        f"{case.label} on {stack}", table, chart,
        caption="Band: each run's interval. Dashed: a step. Ring: busy host or throttled. "
        "Triangle: the interval runs past the axis, which is set by the figures."),),
        scope=Scope(bench=case.benchmark, stack=stack))


# -- fleet -------------------------------------------------------------------------------


def fleet_page(ordered: Sequence[StoredRun]) -> Page:
    if not ordered:
        return Page(FLEET, "Fleet", (), ("No runs yet.",))
    diagnosis = diagnose(ordered, load_rules())
    states = node_states(ordered)
    baselines = {b.generation_keys[0]: b for b in diagnosis.baselines if b.generation_keys}
    node_rows, finding_rows = [], []
    by_stack: dict[str, list[tuple[NodeResult, NodeState]]] = {}
    for result, state in zip(diagnosis.nodes, states, strict=True):
        assert result.host == state.host
        scope = Scope(node=result.host, stack=result.generation_key)
        worst = "; ".join(f"{f.rule}: {f.case}" + (f" off by {f.off_by:.0%}"
                                                   if f.off_by is not None else "")
                          for f, _ in result.worst_by_rule()[:3])
        node_rows.append(Row((result.node, result.generation_key,
                              Link(result.run_id, run_href(result.run_id)),
                              str(result.checks), str(len(result.findings)),
                              ", ".join(result.categories) or MISSING, worst or MISSING),
                             BAD if result.failed else WARN if result.inconclusive else None,
                             scope, f"node:{result.node}"))
        # A verdict that cannot be trusted (a busy host, a throttled device) is shown
        # beside the failures, as inconclusive, with why.
        for f, unsure in [*((f, False) for f in result.findings),
                          *((f, True) for f in result.inconclusive)]:
            finding_rows.append(Row((
                result.node, f.rule, f.category, f.case, f.figure or MISSING,
                MISSING if f.observed is None else f"{f.observed:.4g}",
                f"{f.limit}, inconclusive: {f.detail}" if unsure else f.limit,
                MISSING if f.off_by is None else format_pct(100 * f.off_by),
                Link(f.run, run_href(f.run)) if f.run else MISSING),
                WARN if unsure else BAD, scope))
        by_stack.setdefault(result.generation_key, []).append((result, state))
    blocks = [Block("Nodes", (
        "Each node (a host and its device) judged on its newest measurement of each case "
        "by the rules of `accelbench diagnose` against the fleet median of its stack."),
        tables=(Grid("Nodes", ("Node", "Stack", "Newest run", "Checks", "Findings",
                               "Categories", "Worst"), tuple(node_rows),
                     frozenset({3, 4})),
                Grid("Findings", ("Node", "Rule", "Category", "Case", "Figure", "Observed",
                                  "Limit", "Off by", "Run"), tuple(finding_rows),
                     frozenset({5, 7}))),
        anchor="nodes")]
    plots = [_fleet_heat_map(stack, members, baselines.get(stack))
             for stack, members in sorted(by_stack.items())]
    blocks.append(Block("Against the fleet median", (
        "Each node's headline figure of each case over its stack's fleet median, as speed "
        "(above 1: faster than the median node), the ratio `diagnose`'s rules compare. "
        "Nodes with a finding are in red."),
        plots=tuple(p for p in plots if p is not None), anchor="median"))
    blocks += _matrix_blocks(ordered)
    blocks += _site_chart_blocks(ordered)
    notes = tuple(diagnosis.notes)
    return _filtered(Page(FLEET, "Fleet", tuple(blocks), notes))


def _fleet_heat_map(stack: str, members: list[tuple[NodeResult, NodeState]],
                    baseline: Baseline | None) -> Plot | None:
    """A heat map of each node's speed over the fleet median in each case: the node's
    headline figure over the median's, as the rules' ratio_to_baseline takes it."""
    if baseline is None or not baseline.cases:
        return None
    ratios: dict[str, dict[str, float]] = {}
    failed: set[str] = set()
    cases: dict[str, Case] = {}
    for result, state in members:
        name = result.node
        if result.failed:
            failed.add(name)
        for m in state.measurements:
            figure, base = m.primary, baseline.cases.get(m.case.key)
            if not m.ok or figure is None or base is None or base.version != m.case.version:
                continue
            ref = base.figures.get(figure.name)
            if ref is None or not ref.value or not math.isfinite(figure.value):
                continue
            ratios.setdefault(name, {})[m.case.key] = speed_ratio(figure.value / ref.value,
                                                                 figure.higher_is_better)
            cases.setdefault(m.case.key, m.case)
    if not cases:
        return None
    keys = sorted(cases, key=lambda k: (case_sort_key(cases[k]), k))
    labels = dict(zip(keys, short_labels([cases[k] for k in keys], dtype=True), strict=True))
    names = [result.node for result, _ in members]
    table_rows = tuple(
        Row((name, *(format_factor(ratios.get(name, {}).get(k)) for k in keys)),
            BAD if name in failed else None, Scope(node=name), f"median:{name}")
        for name in names)
    table = Grid(f"Speed over the fleet median on {stack}", ("Node", *(labels[k] for k in keys)),
                 table_rows, frozenset(range(1, len(keys) + 1)))

    def worst(name: str) -> float:
        return min(ratios.get(name, {}).values(), default=math.inf)

    shown_nodes = sorted(names, key=lambda n: (worst(n), n))[:HEAT_MAP_NODES]
    shown_nodes.sort(key=names.index)
    shown_keys = keys[:HEAT_MAP_CASES]
    chart = HeatMap(
        f"Speed over the fleet median on {stack}", shown_nodes,
        [[ratios.get(n, {}).get(k) for k in shown_keys] for n in shown_nodes],
        "speed over the median node", columns=[labels[k] for k in shown_keys],
        cells=[[format_factor(ratios.get(n, {}).get(k)) if n in ratios and k in ratios[n]
                else "" for k in shown_keys] for n in shown_nodes],
        marked=sorted(failed & set(shown_nodes)))
    left = len(names) - len(shown_nodes) + max(0, len(keys) - len(shown_keys))
    caption = ("Dark: slower than the median node." + (
        f" The chart draws the {len(shown_nodes)} slowest nodes and the first "
        f"{len(shown_keys)} cases; the table has them all." if left else ""))
    return Plot(chart.title, table, chart, caption=caption, scope=Scope(stack=stack))


def _matrix_blocks(ordered: Sequence[StoredRun]) -> list[Block]:
    """The heat maps the families' views draw (pairs of nodes and ranks), from the newest
    run of each benchmark that has them, with the tables of their section."""
    from accelbench.report.run_view import run_sections

    newest: dict[str, StoredRun] = {}
    for run in ordered:
        for bench in {m.case.benchmark for m in run.measurements if m.ok}:
            newest[bench] = run
    blocks: list[Block] = []
    for bench, run in sorted(newest.items()):
        chosen = tuple(m for m in run.measurements if m.case.benchmark == bench)
        for section in run_sections(chosen):
            maps = [c for c in section.charts if isinstance(c, HeatMap)]
            if not maps:
                continue
            record = run.record
            plots = tuple(Plot(c.title, heat_map_grid(c), c, caption=c.caption) for c in maps)
            blocks.append(Block(
                f"{section.title}: {bench} in run {record.id}",
                f"{section.about} From run {record.id} on {record.host}, the newest with "
                f"{bench}.", plots=plots, tables=tuple(grid_of(t) for t in section.tables),
                scope=Scope(bench=bench, node=record.host, stack=record.generation_key),
                anchor=f"matrix-{len(blocks) + 1}"))
    return blocks


def _site_chart_blocks(ordered: Sequence[StoredRun]) -> list[Block]:
    """The line charts views mark for the site (`Lines.site`: configurations compared,
    such as throughput against latency over loads), from the newest run of each
    benchmark on each stack, with the tables of their section."""
    from accelbench.report.run_view import run_sections

    newest: dict[tuple[str, str], StoredRun] = {}
    for run in ordered:
        for bench in {m.case.benchmark for m in run.measurements if m.ok}:
            newest[(bench, run.record.generation_key)] = run
    blocks: list[Block] = []
    for (bench, stack), run in sorted(newest.items()):
        chosen = tuple(m for m in run.measurements if m.case.benchmark == bench)
        for section in run_sections(chosen):
            shown = [c for c in section.charts if isinstance(c, Lines) and c.site]
            if not shown:
                continue
            record = run.record
            plots = tuple(Plot(c.title, lines_grid(c), c, caption=c.caption) for c in shown)
            blocks.append(Block(
                f"{section.title}: {bench} on {stack}",
                f"{section.about} From run {record.id} on {record.host}, the newest with "
                f"{bench} on this stack.", plots=plots,
                tables=tuple(grid_of(t) for t in section.tables),
                scope=Scope(bench=bench, node=record.host, stack=stack),
                anchor=f"chart-{len(blocks) + 1}"))
    return blocks


# -- generations -------------------------------------------------------------------------


def generations_page(ordered: Sequence[StoredRun]) -> Page:
    from accelbench.report.analysis_tables import generations_table
    from accelbench.report.html import generation_chart

    by_suite: dict[str, list[StoredRun]] = {}
    for run in ordered:
        by_suite.setdefault(run.record.suite or "", []).append(run)
    blocks = []
    for i, (suite, runs) in enumerate(sorted(by_suite.items()), 1):
        if len({r.record.generation_key for r in runs}) < 2:
            continue
        g = generations(runs)
        if not g.rows:
            continue
        drawn = generation_chart(g, f"gen-{i}")
        plot = Plot(drawn.title, grid_of(generations_table(g)), svg=str(drawn.svg),
                    caption=drawn.caption)
        name = suite or "(no suite)"
        blocks.append(Block(
            f"Suite {name}", f"The runs of suite {name} on {len(g.generations)} stacks, "
            f"as `accelbench generations suite={suite or '...'}` shows them; baseline "
            f"{g.baseline}.", plots=(plot,), anchor=f"suite-{i}"))
    intro = (() if blocks else
             ("No suite has been measured on more than one stack yet.",))
    return _filtered(Page(GENERATIONS, "Generations", tuple(blocks), intro))


# -- regressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """A step `history` found and weighed: the change point and its series."""

    item: NodeSeries
    change: ChangePoint
    speed_ci: tuple[float, float]


def steps(by_case: dict[str, list[NodeSeries]]) -> list[Step]:
    """Every change point of every series that `history`'s test told from noise (those it
    kept with nothing to weigh them against are left out), newest first, each with the
    95% CI of the speed ratio between the runs either side of it."""
    out = [Step(item, c, c.speed_ci) for items in by_case.values() for item in items
           for c in item.series.change_points if c.speed_ci is not None]
    out.sort(key=lambda st: (-st.change.started_at, st.change.run_id))
    return out


def regressions_page(by_case: dict[str, list[NodeSeries]], threshold: float,
                     explanations: Sequence[StoredExplanation] = ()) -> Page:
    page = _regressions_page(by_case, threshold)
    explained = explained_grid(explanations)
    if not explained.rows:
        return page
    about = ("What `accelbench explain` found for a case of two runs: the case profiled "
             "again under each run's stack, the operator whose time per step moved most "
             "in the direction of the change, and what differs between the two stacks; "
             "each run's report holds the whole finding and the commands that reproduce "
             "each side.")
    return _filtered(replace(page, blocks=(*page.blocks, Block("Explained", about,
                                                               tables=(explained,)))))


def explained_grid(explanations: Sequence[StoredExplanation]) -> Grid:
    """One row per stored explanation, newest first (a store's findings are untrusted:
    report.explain_tables reads each value for its type)."""
    from accelbench.report.explain_tables import digest

    rows = []
    for e in sorted(explanations, key=lambda e: (-e.created_at, -e.id)):
        found = digest(e.findings)
        rows.append(Row((
            format_timestamp(e.created_at), Link(e.label, case_href(e.case_key)),
            Link(e.run_a, run_href(e.run_a)), Link(e.run_b, run_href(e.run_b)),
            found.mover, found.change, found.differs, found.summary),
            BAD if found.slower else GOOD if found.slower is False else None,
            Scope(bench=found.benchmark), f"explained:{e.id}"))
    return Grid("Explained", ("When (UTC)", "Case", "Run A", "Run B", "Largest mover",
                              "Its change / step", "Stacks differ in", "Finding"),
                tuple(rows))


def _regressions_page(by_case: dict[str, list[NodeSeries]], threshold: float) -> Page:
    rows = []
    for st in steps(by_case):
        s, c = st.item.series, st.change
        before = s.points[c.index - 1]
        rows.append(Row((
            format_timestamp(c.started_at), Link(s.case.label, case_href(s.case.key)),
            st.item.host, s.generation_key, Link(before.run_id, run_href(before.run_id)),
            Link(c.run_id, run_href(c.run_id)), format_change(c.change),
            f"{format_value(c.before, s.unit)} to {format_value(c.after, s.unit)}",
            format_ratio(1.0 + c.change, *st.speed_ci),
            c.kind + (f"; tuning changed: {', '.join(c.tuning_differs)}"
                      if c.tuning_differs else "")),
            BAD if c.change < 0 else GOOD,
            Scope(bench=s.case.benchmark, node=st.item.host, stack=s.generation_key),
            f"{s.case.key}:{st.item.host}:{c.run_id}"))
    about = (f"Every step of at least {threshold:.0%} that `accelbench history` finds in a "
             "case's series on a node and stack (step detection, then Welch's test on the "
             "runs either side), newest first, with the 95% CI of the speed ratio between "
             "those runs; a step the test cannot tell from noise is left out. Speed above 1 "
             "is faster.")
    table = Grid("Steps", ("When (UTC)", "Case", "Node", "Stack", "From run", "To run",
                           "Change", "Level", "Speed [95% CI]", "Kind"), tuple(rows),
                 frozenset({6, 8}))
    unsure = cannot_tell_grid(by_case, threshold)
    if not unsure.rows:
        return _filtered(Page(REGRESSIONS, "Regressions", (Block("Steps", about,
                                                                 tables=(table,)),)))
    # Never "none" where the series could not have shown a step: say so, and why.
    count = len(unsure.rows)
    told = f"Cannot tell for {count} case{'' if count == 1 else 's'} (on a node and stack)"
    steps_block = (Block("Steps", about, tables=(table,)) if rows else
                   Block("Steps", f"{about} No step was told from noise; {told[0].lower()}"
                         f"{told[1:]}: see below."))
    why = (f"The series in which `accelbench history` can neither show a step of at least "
           f"{threshold:.0%} nor rule one out: runs on a busy host or a throttled device, "
           "too much run-to-run noise or too few runs, with why and about how many quiet "
           "runs a side of a step would tell.")
    return _filtered(Page(REGRESSIONS, "Regressions",
                          (steps_block, Block("Cannot tell", why, tables=(unsure,))),
                          (f"{told}: see below.",)))


def cannot_tell_grid(by_case: dict[str, list[NodeSeries]], threshold: float) -> Grid:
    """Each series `history` cannot tell about, in case order, with why."""
    rows = []
    for items in by_case.values():
        for item in items:
            s, why = item.series, item.series.cannot_tell
            if why is None:
                continue
            rows.append(Row((
                Link(s.case.label, case_href(s.case.key)), item.host, s.generation_key,
                str(len(s.points)), str(len({*why.contended, *why.throttled})),
                "; ".join(why.reasons),
                MISSING if why.runs_needed is None else str(why.runs_needed)),
                WARN, Scope(bench=s.case.benchmark, node=item.host, stack=s.generation_key),
                f"cannot-tell:{s.case.key}:{item.host}:{s.generation_key}"))
    return Grid("Cannot tell", ("Case", "Node", "Stack", "Runs", "Busy or throttled", "Why",
                                f"Quiet runs a side for {threshold:.0%}"), tuple(rows),
                frozenset({3, 4, 6}))


# -- A/B ---------------------------------------------------------------------------------


def ab_page(ordered: Sequence[StoredRun]) -> Page:
    from accelbench.analysis.ab import pairs_in
    from accelbench.report.ab_tables import ab_tables
    from accelbench.report.html import ab_chart

    blocks = []
    for i, result in enumerate(reversed(pairs_in(ordered)), 1):
        tables = ab_tables(result)
        drawn = ab_chart(result, f"ab-{i}")
        grids = tuple(grid_of(t) for t in tables)
        plots = (Plot(drawn.title, grids[0], svg=str(drawn.svg), caption=drawn.caption),
                 ) if drawn is not None else ()
        a, b = result.a.record, result.b.record
        blocks.append(Block(
            f"A/B {result.id}: {result.label('b')} against {result.label('a')}",
            f"Started {format_timestamp(a.started_at)} UTC on {a.host}; runs {a.id} (A) and "
            f"{b.id} (B), as `accelbench ab` printed it.",
            plots=plots, tables=grids[1:] if plots else grids,
            scope=Scope(node=a.host), anchor=f"ab-{result.id}"))
    intro = (() if blocks else
             ("No A/B is stored yet: `accelbench ab --a ENV_A --b ENV_B` makes one.",))
    return _filtered(Page(AB, "A/B", tuple(blocks), intro))


# -- filters -----------------------------------------------------------------------------


def _filtered(page: Page) -> Page:
    """The page with the choices of its filter: what its rows, charts and blocks are
    about."""
    scopes = [ANY]
    for block in page.blocks:
        scopes.append(block.scope)
        scopes += [p.scope for p in block.plots]
        scopes += [r.scope for p in block.plots for r in p.table.rows]
        scopes += [r.scope for t in block.tables for r in t.rows]
    found = tuple((name, choices([getattr(s, name) for s in scopes]))
                  for name in ("bench", "node", "stack"))
    return replace(page, filters=tuple((n, c) for n, c in found if len(c) > 1))
