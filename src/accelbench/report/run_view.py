"""The report of one run, built once: an ordered list of sections, each a title, a
paragraph on how to read it and its tables. The terminal, the Markdown report and the
HTML report render these same sections in this same order; the HTML report adds the
charts of a section beside its tables, by the section's key.

A section appears when the run holds what it shows: the validation checks, the results
of every measured case (one table per family), their failures and warnings, the
inference engines side by side, the collective sweeps, isolate's verdicts, the energy
and clocks of the cases with telemetry, and the stored profiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core.measurement import Measurement
from accelbench.report.table import rows
from accelbench.report.tables import BAD, WARN, Table

#: Every kind of section, in the order a report shows them.
KEYS = ("validation", "results", "notes", "engines", "collectives", "isolate", "energy",
        "profiles")


@dataclass(frozen=True)
class Section:
    key: str  # one of KEYS
    title: str
    tables: tuple[Table, ...] = ()
    about: str = ""  # how to read it, shown under the title
    items: tuple[tuple[str, str], ...] = ()  # (what, text): a list after the tables


def run_sections(measurements: Sequence[Measurement],
                 profiles: Sequence[Any] = ()) -> list[Section]:
    """The sections of the report of a run holding `measurements` and `profiles` (the
    run's StoredProfiles)."""
    from accelbench.report.collectives import collectives_table
    from accelbench.report.energy import ABOUT as ENERGY_ABOUT
    from accelbench.report.energy import energy_table
    from accelbench.report.engines import engines_tables
    from accelbench.report.isolate import ABOUT as ISOLATE_ABOUT
    from accelbench.report.isolate import isolate_tables
    from accelbench.report.validation import ABOUT as VALIDATION_ABOUT
    from accelbench.report.validation import validation_tables

    sections = []
    checks = validation_tables(measurements)
    if checks:
        sections.append(Section("validation", "Validation", tuple(checks), VALIDATION_ABOUT))
    measured = [m for m in measurements if m.case.family != "validation"]
    if measured or not checks:
        sections.append(Section("results", "Results", tuple(results_tables(measured))))
    notes = tuple((f"{r.benchmark} {r.params}", r.note) for r in rows(measured) if r.note)
    if notes:
        sections.append(Section("notes", "Failures and warnings", items=notes))
    engines = engines_tables(measurements)
    if engines:
        sections.append(Section("engines", "Engines", tuple(engines)))
    sweeps = collectives_table(measurements)
    if sweeps is not None:
        sections.append(Section("collectives", "Collectives", (sweeps,)))
    isolate = isolate_tables(measurements)
    if isolate:
        sections.append(Section("isolate", "Isolate", tuple(isolate), ISOLATE_ABOUT))
    energy = energy_table(measurements)
    if energy is not None:
        sections.append(Section("energy", "Energy", (energy,), ENERGY_ABOUT))
    if profiles:
        sections.append(Section("profiles", "Profiles", tuple(
            t for p in profiles for t in profile_tables(p.analysis, f"Profile of {p.label}"))))
    return sections


def results_tables(measured: Sequence[Measurement]) -> list[Table]:
    """One table per family of the measured cases, in the order they ran; one empty
    table when none was measured."""
    from accelbench.report.table import COLUMNS, row

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
