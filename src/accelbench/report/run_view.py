"""The report of one run, built once: an ordered list of sections (core.view.Section),
each a title, a paragraph on how to read it, its tables and its charts. The terminal,
the Markdown report and the HTML report render these same sections in this same order;
only the HTML report draws the charts.

The families make most of them: each benchmark declares its views (core.registry), and
each view turns the run's measurements of its benchmarks into sections. This module
knows no family by name. A report holds, in this order: the sections a view puts
first (what the run checked), the Results (a table per family of every measured case,
with the charts views add to it), the failures and warnings, the other views' sections
in the order of the registry, the energy and clocks of the cases with telemetry, the
stored profiles, and the explanations of its cases against other runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.core.measurement import Measurement
from accelbench.core.view import BAD, RESULTS, WARN, Section, Table
from accelbench.report.results import rows
from accelbench.store.records import StoredExplanation

if TYPE_CHECKING:
    from accelbench.core.registry import Registry

__all__ = ["Section", "profile_tables", "results_tables", "run_sections"]


def run_sections(measurements: Sequence[Measurement], profiles: Sequence[Any] = (),
                 registry: Registry | None = None) -> list[Section]:
    """The sections of the report of a run holding `measurements` and `profiles` (what
    `Store.found_for_run` gives: its StoredProfiles and StoredExplanations), with the
    views of `registry` (accelbench's own by default)."""
    from accelbench.analysis.checks import is_check
    from accelbench.report.energy import energy_section

    if registry is None:
        import accelbench.benchmarks

        registry = accelbench.benchmarks.REGISTRY
    contributed = [s for view, given in registry.views(measurements) for s in view(given)]
    to_results = [s for s in contributed if s.key == RESULTS]
    first = [s for s in contributed if s.first and s.key != RESULTS]
    later = [s for s in contributed if not s.first and s.key != RESULTS]

    measured = [m for m in measurements if not is_check(m)]
    sections = list(first)
    if measured or not first:
        sections.append(Section(
            RESULTS, "Results",
            (*results_tables(measured), *(t for s in to_results for t in s.tables)),
            charts=tuple(c for s in to_results for c in s.charts)))
    notes = tuple((f"{r.benchmark} {r.params}", r.note) for r in rows(measured) if r.note)
    if notes:
        sections.append(Section("notes", "Failures and warnings", items=notes))
    sections += later
    energy = energy_section(measurements)
    if energy is not None:
        sections.append(energy)
    explained = [p for p in profiles if isinstance(p, StoredExplanation)]
    profiled = [p for p in profiles if not isinstance(p, StoredExplanation)]
    if profiled:
        sections.append(Section("profiles", "Profiles", tuple(
            t for p in profiled for t in profile_tables(p.analysis, f"Profile of {p.label}"))))
    if explained:
        from accelbench.report.explain_tables import explain_tables

        sections.append(Section("explanations", "Why a case moved (accelbench explain)",
                                tuple(t for e in explained for t in explain_tables(e.findings))))
    return sections


def results_tables(measured: Sequence[Measurement]) -> list[Table]:
    """One table per family of the measured cases, in the order they ran; one empty
    table when none was measured."""
    from accelbench.report.results import COLUMNS, row

    families: dict[str, list[Measurement]] = {}
    for m in measured:
        families.setdefault(m.case.family, []).append(m)
    tables = []
    for family, ms in families.items():
        shown = [row(m) for m in ms]
        tables.append(Table(
            family, COLUMNS, [r.cells() for r in shown], numeric=frozenset({2, 3, 4, 5}),
            styles=[None if r.ok and not r.doubtful else WARN if r.ok else BAD
                    for r in shown]))
    return tables or [Table("No case was measured", COLUMNS, [])]


def profile_tables(analysis: Any, title: str) -> list[Table]:
    """A stored profile's summary, where its time went, then its top kernels and
    operators."""
    from accelbench.report.profile import breakdown_table, profile_summary_rows, top_tables

    summary = Table(title, ("Property", "Value"), profile_summary_rows(analysis))
    breakdown = breakdown_table(analysis)
    return [summary, *([breakdown] if breakdown else []), *top_tables(analysis)]
