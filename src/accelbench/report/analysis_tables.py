"""The answers of the analysis commands (compare, generations, history, diagnose) as
plain tables, which the terminal, Markdown and HTML outputs each render their own way."""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelbench.analysis.compare import FASTER, SLOWER, CaseComparison, Comparison, Unpaired
from accelbench.analysis.diagnose import Diagnosis
from accelbench.analysis.generations import PAIRED_METHOD, Generations
from accelbench.analysis.history import CANNOT_TELL, CHANGED, NO_CHANGE, VERDICTS, Series
from accelbench.analysis.values import CaseResults
from accelbench.core.units import (
    format_change,
    format_factor,
    format_number,
    format_p,
    format_ratio,
    format_rel,
    format_share,
    format_timestamp,
    format_value,
)
from accelbench.core.view import BAD, GOOD, WARN, Table

# -- compare -----------------------------------------------------------------------------


def comparison_tables(c: Comparison) -> list[Table]:
    pct = f"{100 * (1 - c.alpha):g}%"
    chosen = c.figure is not None  # a figure other than the headline: shown per case
    rows, styles = [], []
    for case in c.cases:
        verdict = case.verdict
        if chosen:  # work per joule is not faster but better: say it in the figure's terms
            verdict = {FASTER: "better", SLOWER: "worse"}.get(verdict, verdict)
        if case.below_min_effect:
            verdict += f" (below {100 * c.min_effect:g}%)"
        if case.reason:
            verdict += f": {case.reason}"
            if case.runs_needed is not None:
                verdict += f"; ~{case.runs_needed} runs a side would tell"
        for judged in case.judged_anyway:
            verdict += f" ({judged}, judged anyway)"
        if case.tuning_differs:
            verdict += f"; tuning differs: {', '.join(case.tuning_differs)}"
        rows.append((
            case.label,
            *((case.figure,) if chosen else ()),
            _side_text(case.a, case.unit),
            _side_text(case.b, case.unit),
            format_ratio(case.ratio.ratio, case.ratio.low, case.ratio.high),
            format_change(case.change),
            format_p(case.test.p_value) if case.test.p_value is not None else "-",
            verdict,
        ))
        styles.append(GOOD if case.verdict == FASTER else BAD if case.verdict == SLOWER
                      else None)
    compared, change, overall = "the headline figure", "in speed, + is faster", "speed"
    if chosen:
        compared = ", ".join(sorted({case.figure for case in c.cases})) or repr(c.figure)
        change = ("+ is better (more of a figure where higher is better, less of one where "
                  "lower is)")
        overall = f"{compared}, > 1 is better"
    notes = [
        f"A, B: {compared} with the interval `accelbench show` states for it (over several "
        "runs: the median run, with the interval between runs). "
        f"B/A: ratio of the geometric means of the values each worker process measured, "
        f"with its {pct} CI from Welch's t on their logarithms; change: {change}. "
        f"A change is called when the CI excludes 1 and it is at least "
        f"{100 * c.min_effect:g}%; 'same' when it is smaller or the whole CI lies within "
        f"±{100 * c.min_effect:g}%; 'inconclusive' when the CI holds both, or the figures "
        "were measured on a contended host or a throttled device."
    ]
    if c.host is not None:
        moved = c.host.moved(c.min_effect)
        notes.append(f"Host reference: {c.host.describe()}; "
                     + ("a CPU case that moved the same way, by no more than the host did "
                        "plus the minimum effect, is inconclusive." if moved else
                        "steady enough to leave the verdicts as they are."))
    floored = [case for case in c.cases if any(case.floors)]
    if floored:
        notes.append(f"{len(floored)} case(s) use the run-to-run noise of their repeated "
                     "runs in this store as a floor (it is wider than what their "
                     "processes showed).")
    if any(case.a.throttled or case.b.throttled for case in c.cases):
        notes.append("throttled: measured while the device throttled (power, thermal or "
                     "clock capping); --exclude-throttled leaves such figures out.")
    if any(case.tuning_differs for case in c.cases):
        notes.append("tuning differs: A and B chose GEMM or convolution kernels under "
                     "different tuning (TunableOp, BLAS back end, hipBLASLt/rocBLAS files, "
                     "MIOpen find mode), a possible cause of the change; see the tuning page "
                     "of the docs.")
    counts = c.verdict_counts
    notes.append(", ".join(f"{n} {name}" for name, n in counts.items()) + ".")
    shift = 1 if chosen else 0
    main = Table(
        f"B: {c.b.label} ({', '.join(c.b.generation_keys)}) vs "
        f"A: {c.a.label} ({', '.join(c.a.generation_keys)})",
        ("Case", *(("Figure",) if chosen else ()), "A", "B", f"B/A [{pct} CI]", "Change", "p",
         "Verdict"),
        rows, notes, frozenset(i + shift for i in (1, 2, 3, 4, 5)), styles,
    )
    families = Table(
        f"Geometric mean per family ({overall}, B over A)",
        ("Family", "Cases", "Geometric mean",
         *(("Better", "Worse") if chosen else ("Faster", "Slower")), "Inconclusive"),
        [(f.family, str(f.n), format_ratio(f.geomean), str(f.faster), str(f.slower),
          str(f.inconclusive)) for f in c.families],
        numeric=frozenset({1, 2, 3, 4, 5}),
    )
    unpaired = [*c.only_a, *c.only_b, *c.version_differs, *c.not_measured,
                *c.figure_missing]
    tables = [main, families]
    if unpaired:
        tables.append(Table("Not compared", ("Case", "Why"),
                            [(u.label, u.reason) for u in unpaired]))
    return tables


def _side_text(entry: CaseResults, unit: str) -> str:
    """A side's figure with its interval as `accelbench show` prints it: "55.2 GFLOP/s
    ±3.1%"."""
    rel = entry.rel_half_width
    text = format_value(entry.median, unit)
    return f"{text} {format_rel(rel)}" if math.isfinite(rel) and rel > 0 else text


def gate_lines(gate: float, regressions: Sequence[CaseComparison],
               undecided: Sequence[CaseComparison], unjudged: Sequence[Unpaired] = (),
               nothing_compared: str | None = None) -> list[str]:
    """What a --fail-on-regression gate concluded: the regressions, else why it has no
    evidence (`nothing_compared`), the cases it could not decide or judge and why, else
    that none regressed."""
    if regressions:
        return [f"{len(regressions)} case(s) regressed by {gate:g}% or more: "
                + ", ".join(c.label for c in regressions)]
    if nothing_compared:
        return [f"inconclusive: {nothing_compared}: the gate has no evidence either way"]
    lines = []
    if undecided:
        lines += [f"inconclusive: {len(undecided)} case(s) may have regressed by {gate:g}% "
                  "or more, and the evidence cannot tell (rerun, or add runs):",
                  *(f"  {c.label}: {c.reason}" + (f"; ~{c.runs_needed} runs a side would tell"
                                                   if c.runs_needed else "")
                    for c in undecided)]
    if unjudged:
        lines += [f"inconclusive: {len(unjudged)} case(s) could not be judged:",
                  *(f"  {u.label}: {u.reason}" for u in unjudged)]
    return lines or [f"no case regressed by {gate:g}% or more"]


# -- generations -------------------------------------------------------------------------


def generations_table(g: Generations) -> Table:
    header = ("Case", "Precision", "Figure",
              *(f"{key}{' (baseline)' if key == g.baseline else ''}" for key in g.keys))
    rows = []
    for row in g.rows:
        cells = []
        for key in g.keys:
            cell = row.cells.get(key)
            if cell is None:
                cells.append("-")
                continue
            text = format_value(cell.value, row.unit)
            rel = cell.versus_baseline
            if key == g.baseline:
                noise = cell.results.rel_half_width
                text += f" = {format_factor(1.0)}"
                if math.isfinite(noise):
                    text += f" {format_rel(noise)}"
            elif rel is not None:
                text += f" = {format_factor(rel.ratio)}"
                half = rel.rel_half_width
                text += f" {format_rel(half)}" if math.isfinite(half) else " (no interval)"
                if rel.method == PAIRED_METHOD:
                    text += " (paired)"
            elif cell.note:
                text += f" ({cell.note})"
            if cell.results.contended:
                text += " (contended)"
            if cell.results.throttled:
                text += " (throttled)"
            cells.append(text)
        rows.append((row.label, row.dtype, row.figure, *cells))
    filters = ", ".join(
        f"{k}={','.join(v) if isinstance(v, list) else v}"
        for k, v in g.filters.items() if v not in (None, [], ""))
    notes = [
        "Each cell: the generation's figure (its run's, with the interval `accelbench show` "
        "states; over several runs their median) and its speed relative to the baseline "
        "generation, ± the half-width of the 95% CI of that ratio from the values each "
        "worker process measured (on the baseline: its own interval; beyond ±50%, ×/÷ F: "
        "from the ratio divided by F to the ratio times F); 'no interval': one value a "
        "side."
    ]
    ab_notes = sorted({cell.note for row in g.rows for cell in row.cells.values()
                       if cell.versus_baseline is not None
                       and cell.versus_baseline.method == PAIRED_METHOD})
    if ab_notes:
        ids = sorted({note.split(":", 1)[0] for note in ab_notes})
        notes.append("(paired): measured against the baseline by " + ", ".join(ids)
                     + " on one machine, in pairs of processes (`accelbench ab`); the "
                     "interval is its repeated confidence interval.")
    if filters:
        notes.append(f"Filters: {filters}.")
    return Table(f"Generations, normalised to {g.baseline}", header, rows, notes,
                 frozenset(range(3, len(header))))


# -- history -----------------------------------------------------------------------------


def history_tables(series: Sequence[Series]) -> list[Table]:
    tables = []
    for s in series:
        starts = {c.index: c for c in s.change_points}
        rows, styles = [], []
        for i, p in enumerate(s.points):
            change = starts.get(i)
            mark = change.describe() if change else ""
            if p.contended:
                mark = f"{mark} (contended)".strip()
            if p.throttled:
                mark = f"{mark} (throttled)".strip()
            if p.ab:
                mark = f"{mark} ({p.ab})".strip()
            rows.append((p.run_id, format_timestamp(p.started_at), p.host,
                         format_value(p.value, s.unit), format_rel(p.rel_half_width),
                         f"{p.samples} / {p.processes}", mark))
            styles.append(None if change is None else BAD if change.kind == "regressed"
                          else GOOD)
        notes = [c.describe() for c in s.change_points]
        if s.cannot_tell is not None:
            notes.append(f"cannot tell: {s.cannot_tell.describe()}")
        elif not notes:
            notes.append("no change point")
        if s.small_steps:
            notes.append(f"{s.small_steps} smaller step(s) below the minimum effect")
        if s.unsure_steps and s.cannot_tell is None:
            notes.append(f"{s.unsure_steps} step(s) the run-to-run noise could explain, or "
                         "with only busy or throttled runs on one side")
        notes.append(f"run-to-run noise: {s.noise_floor.describe()}" if s.noise_floor
                     else "run-to-run noise: not known yet (it needs 3 quiet runs)")
        notes.append("Interval: as `accelbench show` states it for the run; n: samples / "
                     "processes.")
        tables.append(Table(
            f"{s.case.label} on {s.generation_key} ({s.figure}, version {s.case.version})",
            ("Run", "Started (UTC)", "Host", "Value", "Interval", "n", "Change"),
            rows, notes, frozenset({3, 4, 5}), styles,
        ))
    return tables


def history_summary(series: Sequence[Series]) -> str:
    """How many series changed, showed no change, or cannot tell."""
    counts = {v: sum(s.verdict == v for s in series) for v in VERDICTS}
    return (f"{len(series)} series: {counts[CHANGED]} changed, {counts[NO_CHANGE]} no change, "
            f"{counts[CANNOT_TELL]} cannot tell")


# -- diagnose ----------------------------------------------------------------------------


def diagnosis_tables(d: Diagnosis) -> list[Table]:
    """A diagnosis as tables: what failed (`diagnosis_table`), then every node with the
    runs it was judged on (`judged_runs_table`)."""
    return [diagnosis_table(d), judged_runs_table(d)]


def diagnosis_table(d: Diagnosis) -> Table:
    """The worst finding of each failed rule of each failing node, then of each rule a
    node is inconclusive on (its figure or its baseline cannot be trusted), with the run
    its figure came from (a node is judged on the newest measurement of each case, which
    need not all be of one run)."""
    rows = []
    styles: list[str | None] = []
    for unsure in (False, True):
        for node in d.nodes:
            for finding, count in node.worst_by_rule(inconclusive=unsure):
                observed = format_number(finding.observed)
                off = format_share(finding.off_by)
                case = finding.case + (f" (+{count - 1} more)" if count > 1 else "")
                what = finding.compare + (f" {finding.figure}" if finding.figure else "")
                limit = (f"{finding.limit}, inconclusive: {finding.detail}" if unsure
                         else finding.detail or finding.limit)
                rows.append((node.node, finding.rule, finding.category, case, what,
                             observed, limit, off, finding.run or "-"))
                styles.append(WARN if unsure else BAD)
    failing, unsure_nodes = d.failing, d.inconclusive
    summary = (f"{len(failing)} of {len(d.nodes)} nodes fail: "
               + ", ".join(f"{n.node} ({', '.join(n.categories)})" for n in failing)
               if failing else f"all {len(d.nodes)} nodes pass" if not unsure_nodes
               else "no node fails")
    if unsure_nodes:
        summary += f"; {len(unsure_nodes)} inconclusive: " + ", ".join(
            f"{n.node} ({', '.join(n.inconclusive_categories)})" for n in unsure_nodes)
    notes = [summary, *(f"baseline: {b.source}" for b in d.baselines), *d.notes]
    if failing:
        notes.append("Reason codes (docs/reasons.md): " + "; ".join(
            f"{n.node} {', '.join(n.codes)}" for n in failing))
    if rows:
        notes.append("Run: the run the judged figure came from (- for a case not measured).")
    if unsure_nodes or any(n.inconclusive for n in failing):
        notes.append("Inconclusive: the figure, or the baseline it is held against, was "
                     "measured on a busy host or a throttled device; rerun on a quiet "
                     "node (--wait-quiet) to decide.")
    return Table("Diagnosis", ("Node", "Rule", "Category", "Case", "Compared", "Observed",
                               "Limit", "Off by", "Run"), rows, notes, frozenset({5, 7}),
                 styles)


def judged_runs_table(d: Diagnosis) -> Table:
    """Each node, its verdict and the runs its newest measurements came from, newest
    first."""
    rows = [(n.node, f"FAIL ({', '.join(n.categories)})" if n.failed else
             f"inconclusive ({', '.join(n.inconclusive_categories)})" if n.inconclusive
             else "pass", str(n.checks), ", ".join(reversed(n.runs)) or "-")
            for n in d.nodes]
    styles: list[str | None] = [BAD if n.failed else WARN if n.inconclusive else GOOD
                                for n in d.nodes]
    notes = ["Runs: the runs each node's newest measurement of each case came from, "
             "newest first."]
    return Table("Runs judged", ("Node", "Result", "Checks", "Runs"), rows, notes,
                 frozenset({2}), styles)
