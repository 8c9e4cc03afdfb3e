"""What `isolate` adds to a run's report: one matrix per fabric and metric, what was
named slow, and heat maps of the pairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelbench.benchmarks.isolate.results import IsolateResult, isolate_results
from accelbench.benchmarks.isolate.verdict import (
    BY_NAME,
    METRICS,
    RULE,
    Fabric,
    Named,
    fabric_title,
)
from accelbench.core.measurement import Measurement
from accelbench.core.units import MISSING, axis_scale, format_size, format_value
from accelbench.core.view import BAD, WARN, HeatMap, Section, Table

NAMED_TITLE = "Isolate: slow nodes and links"
NAMED_HEADER = ("Named", "Fabric", "Metric", "Figure", "Median", "Slower", "Robust SD",
                "Passes")
ABOUT = (
    "Every pair of nodes (one rank each) and every pair of ranks within a node, measured "
    "in rounds of disjoint pairs at once (they share the fabric; --serial measures one at "
    "a time): the ping-pong latency (half the round trip), the send/recv bandwidth both "
    f"ways at once, the all-reduce bus bandwidth. The rule, {RULE}."
)
HEAT_METRICS = ("busbw", "latency")
PASSES = ("It repeats passes over every pair until the last few name the same (a settled, "
          "conclusive naming) or its time or passes run out (inconclusive, exit 9); the "
          "figures shown pool every pass.")  # drawn as heat maps; every metric has a table


def sentence(n: Named) -> str:
    """One line for a named node, rank or link, with the figures it was judged on."""
    metric = BY_NAME[n.metric]
    shown = format_value(n.value, metric.unit)
    center = format_value(n.center, metric.unit)
    head = f"{n.what} {n.name} is slow"
    if n.ends_unknown:
        head += " (which end cannot be told: one link between two)"
    if n.z is None:
        return f"{head}: {metric.title} {shown}, below the floor of {center}"
    against = "the median pair" if n.what == "link" else f"the median {n.what}"
    where = ("" if n.what == "link"
             else f" (median of its {n.pairs} pairs, {n.slow_pairs} of them slow)")
    return (f"{head}: {metric.title} {shown}{where} against {center} for {against}, "
            f"{n.slowness:.3g}x slower, {abs(n.z):.3g} robust SD away")


def verdict_lines(result: IsolateResult) -> list[str]:
    """What the case named, one line each with the passes that named it, or "nothing
    named"; then how sure it is, and the fabrics' notes. An inconclusive naming says
    its candidates as such."""
    verdict, settled = result.verdict, result.verdict.settled
    lines = []
    for n in verdict.named:
        line = sentence(n)
        if settled is not None:
            line += f"; named in {settled.named_in(n.name)} of {len(settled.passes)} passes"
        lines.append(line if verdict.conclusive else f"not sure: {line}")
    if not verdict.named:
        lines.append("nothing named: no node, rank or link is slow by the rule")
    if settled is not None:
        lines.append(settled.describe())
    return lines + [note for f in verdict.fabrics for note in f.notes]


def matrix_table(f: Fabric, metric: str, heading: str = "") -> Table:
    unit = BY_NAME[metric].unit
    named = {n.name for n in f.named}
    rows = []
    for member, values in zip(f.members, f.matrices.get(metric, []), strict=False):
        rows.append((member, *(MISSING if v is None else format_value(v, unit)
                               for v in values)))
    title = f"Isolate{heading}: {BY_NAME[metric].title}, {fabric_title(f)}"
    return Table(title, ("", *f.members), rows,
                 numeric=frozenset(range(1, len(f.members) + 1)),
                 styles=[BAD if m in named else None for m in f.members])


def named_table(results: Sequence[IsolateResult]) -> Table:
    """Each named member or link with its evidence; an inconclusive one as not sure."""
    rows, notes = [], []
    styles: list[str | None] = []
    for r in results:
        settled = r.verdict.settled
        for f in r.verdict.fabrics:
            for n in f.named:
                unit = BY_NAME[n.metric].unit
                passes = (MISSING if settled is None
                          else f"{settled.named_in(n.name)} of {len(settled.passes)}")
                sure = "" if r.verdict.conclusive else " (not sure)"
                rows.append((f"{n.what} {n.name}{sure}", fabric_title(f),
                             BY_NAME[n.metric].title, format_value(n.value, unit),
                             format_value(n.center, unit), f"{n.slowness:.3g}x",
                             "floor" if n.z is None else f"{abs(n.z):.3g}", passes))
                styles.append(BAD if r.verdict.conclusive else WARN)
        notes += verdict_lines(r)
    notes.append(f"The rule, {RULE}.")
    return Table(NAMED_TITLE, NAMED_HEADER, rows, notes=notes,
                 numeric=frozenset({3, 4, 5, 6}), styles=styles)


def isolate_tables(measurements: Iterable[Measurement]) -> list[Table]:
    """What was named, then every matrix; empty when no isolate case succeeded."""
    results = isolate_results(measurements)
    if not results:
        return []
    tables = [named_table(results)]
    for r in results:
        heading = _heading(r) if len(results) > 1 else ""
        tables += [matrix_table(f, m.name, heading) for f in r.verdict.fabrics for m in METRICS]
    return tables


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    """The Isolate section: its tables and a heat map per fabric and metric."""
    tables = isolate_tables(measurements)
    if not tables:
        return []
    return [Section("isolate", "Isolate", tuple(tables), f"{ABOUT} {PASSES}",
                    charts=tuple(heat_maps(measurements)))]


def heat_maps(measurements: Iterable[Measurement]) -> list[HeatMap]:
    """A heat map per fabric (the nodes, the ranks of each node) of the bus bandwidth and
    of the latency of every pair, the named members marked."""
    out = []
    for r in isolate_results(measurements):
        for f in r.verdict.fabrics:
            marked = [m for n in f.named for m in (n.name.split("-") if n.what == "link"
                                                   else [n.name])]
            named = ", ".join(dict.fromkeys(n.name for n in f.named)) or "none"
            for name in HEAT_METRICS:
                metric = BY_NAME[name]
                matrix = f.matrices.get(name, [])
                factor, shown = axis_scale([v for row in matrix for v in row], metric.unit)
                out.append(HeatMap(
                    f"Isolate: {metric.title}, {fabric_title(f)}", list(f.members),
                    [[None if v is None else v / factor for v in row] for row in matrix],
                    colorbar_label=f"{metric.title} ({shown})",
                    caption=f"Named slow: {named} (in red). Dark: slow.",
                    cells=[["" if v is None else format_value(v, metric.unit) for v in row]
                           for row in matrix],
                    low_is_bad=metric.higher_is_better, marked=marked))
    return out


def _heading(r: IsolateResult) -> str:
    sizes = r.measurement.details.get("bytes")
    return f" ({format_size(sizes)})" if isinstance(sizes, int) else ""
