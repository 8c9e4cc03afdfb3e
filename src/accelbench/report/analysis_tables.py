"""The answers of the analysis commands (compare, generations, history, diagnose) as
plain tables, which the terminal, Markdown and HTML outputs each render their own way."""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelbench.analysis.compare import FASTER, SLOWER, Comparison
from accelbench.analysis.diagnose import Diagnosis
from accelbench.analysis.generations import Generations
from accelbench.analysis.history import Series
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
from accelbench.core.view import BAD, GOOD, Table

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
        sides = (("A", case.a), ("B", case.b))
        for mark, marked in (("contended", [s for s, r in sides if r.contended]),
                             ("throttled", [s for s, r in sides if r.throttled])):
            if marked:
                verdict += f" ({mark} in {' and '.join(marked)})"
        rows.append((
            case.label,
            *((case.figure,) if chosen else ()),
            format_value(case.a.median, case.unit),
            format_value(case.b.median, case.unit),
            format_ratio(case.ratio.ratio, case.ratio.low, case.ratio.high),
            format_change(case.change),
            format_p(case.test.p_value) if case.test.p_value is not None else "ci",
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
        f"B/A: ratio of medians of {compared} with its {pct} CI "
        f"(bootstrap; order statistics under 5 samples); change: {change}. "
        f"p: Mann-Whitney U, 'ci': too few samples, CIs of the medians compared. "
        f"A change is reported when p < {c.alpha:g} and it is at least "
        f"{100 * c.min_effect:g}%."
    ]
    if any(case.a.throttled or case.b.throttled for case in c.cases):
        notes.append("throttled: measured while the device throttled (power, thermal or "
                     "clock capping); --exclude-throttled leaves such figures out.")
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
         *(("Better", "Worse") if chosen else ("Faster", "Slower"))),
        [(f.family, str(f.n), format_ratio(f.geomean), str(f.faster), str(f.slower))
         for f in c.families],
        numeric=frozenset({1, 2, 3, 4}),
    )
    unpaired = [*c.only_a, *c.only_b, *c.version_differs, *c.not_measured,
                *c.figure_missing]
    tables = [main, families]
    if unpaired:
        tables.append(Table("Not compared", ("Case", "Why"),
                            [(u.label, u.reason) for u in unpaired]))
    return tables


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
                low, high = cell.results.median_ci()
                noise = (high - low) / 2 / cell.value if cell.value else math.nan
                text += f" = {format_factor(1.0)}"
                if math.isfinite(noise):
                    text += f" {format_rel(noise)}"
            elif rel is not None:
                text += f" = {format_factor(rel.ratio)} {format_rel(rel.rel_half_width)}"
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
        "Each cell: the generation's median (samples of all its runs pooled) and its speed "
        "relative to the baseline generation, ± the half-width of the 95% CI of that ratio "
        "(on the baseline: of its own median)."
    ]
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
            rows.append((p.run_id, format_timestamp(p.started_at), p.host,
                         format_value(p.value, s.unit),
                         f"[{format_value(p.ci_low, s.unit)}, {format_value(p.ci_high, s.unit)}]",
                         str(p.samples), mark))
            styles.append(None if change is None else BAD if change.kind == "regressed"
                          else GOOD)
        notes = [c.describe() for c in s.change_points] or ["no change point"]
        if s.small_steps:
            notes.append(f"{s.small_steps} smaller step(s) below the minimum effect")
        tables.append(Table(
            f"{s.case.label} on {s.generation_key} ({s.figure}, version {s.case.version})",
            ("Run", "Started (UTC)", "Host", "Value", "95% CI", "n", "Change"),
            rows, notes, frozenset({3, 4, 5}), styles,
        ))
    return tables


# -- diagnose ----------------------------------------------------------------------------


def diagnosis_table(d: Diagnosis) -> Table:
    rows = []
    for node in d.failing:
        for finding, count in node.worst_by_rule():
            observed = format_number(finding.observed)
            off = format_share(finding.off_by)
            case = finding.case + (f" (+{count - 1} more)" if count > 1 else "")
            what = finding.compare + (f" {finding.figure}" if finding.figure else "")
            rows.append((node.node, finding.rule, finding.category, case, what, observed,
                         finding.detail or finding.limit, off))
    failing = d.failing
    summary = (f"{len(failing)} of {len(d.nodes)} nodes fail: "
               + ", ".join(f"{n.node} ({', '.join(n.categories)})" for n in failing)
               if failing else f"all {len(d.nodes)} nodes pass")
    notes = [summary, *(f"baseline: {b.source}" for b in d.baselines), *d.notes]
    return Table("Diagnosis", ("Node", "Rule", "Category", "Case", "Compared", "Observed",
                               "Limit", "Off by"), rows, notes, frozenset({5, 7}),
                 [BAD] * len(rows))
