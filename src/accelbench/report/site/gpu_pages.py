"""The site's pages of GPUs: an index of every GPU the store knows (by serial, else UUID),
and a page per GPU with the nodes it has been in, its figures over time per case
(`analysis.gpu_history`, as `accelbench diagnose --by-gpu` finds them) and their change
points. Pure functions of the histories, as the other pages are of the runs."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.analysis.gpu_history import GpuHistory, gpu_name, where
from accelbench.analysis.history import Series
from accelbench.core.units import (
    MISSING,
    axis_scale,
    format_change,
    format_timestamp,
    format_value,
)
from accelbench.core.view import BAD, GOOD, WARN, Lines, LineSeries
from accelbench.report.site.model import (
    Block,
    Grid,
    Link,
    Page,
    Plot,
    Row,
    Scope,
    case_href,
    gpu_href,
    run_href,
)

GPUS = "gpus.html"


def gpus_page(histories: Sequence[GpuHistory]) -> Page:
    rows = []
    for h in histories:
        g = h.gpu
        falls = sum(1 for f in h.findings if f.change.change < 0)
        rows.append(Row((
            Link(gpu_name(g), gpu_href(g.key)), g.product or MISSING, g.host,
            ", ".join(dict.fromkeys(s.host for s in g.stays)),
            format_timestamp(g.first_seen), format_timestamp(g.last_seen),
            str(len(h.series)), str(falls)),
            BAD if h.regressed else WARN if h.findings else None,
            Scope(node=g.host), f"gpu:{g.key}"))
    about = ("Every GPU the runs recorded, by its serial (else its UUID), whichever node it "
             "was in; the GPUs whose figure of a case ends on a regression first.")
    intro = (() if histories else
             ("No GPU identities stored yet: runs on a GPU record each GPU's serial and "
              "UUID from this version of accelbench on.",))
    table = Grid("GPUs", ("GPU", "Product", "Now in", "Nodes", "First run (UTC)",
                          "Last run (UTC)", "Cases", "Falls"), tuple(rows),
                 frozenset({6, 7}))
    return Page(GPUS, "GPUs", (Block("GPUs", about, tables=(table,)),), intro)


def gpu_page(h: GpuHistory) -> Page:
    g = h.gpu
    name = gpu_name(g)
    stays = Grid("Nodes", ("Node", "First run (UTC)", "Last run (UTC)", "Runs"), tuple(
        Row((s.host, format_timestamp(s.first_seen), format_timestamp(s.last_seen),
             str(s.runs)), None, Scope(node=s.host), f"stay:{s.host}:{s.first_seen}")
        for s in g.stays), frozenset({3}))
    steps = Grid("Change points", ("Case", "Stack", "Change", "From (UTC)", "Run", "p",
                                   "Finding"), tuple(
        Row((Link(f.series.case.label, case_href(f.series.case.key)),
             f.series.generation_key, format_change(f.change.change),
             format_timestamp(f.change.started_at), Link(f.change.run_id,
                                                         run_href(f.change.run_id)),
             MISSING if f.p_value is None else f"{f.p_value:.2g}", f.describe()),
            BAD if f.change.change < 0 else GOOD,
            Scope(bench=f.series.case.benchmark, stack=f.series.generation_key),
            f"step:{f.series.case.key}:{f.change.run_id}")
        for f in h.findings), frozenset({2}))
    blocks = [Block("Where it has been", "The nodes this GPU's runs were measured in.",
                    tables=(stays,), anchor="nodes"),
              Block("Change points", (
                  "Every step `accelbench history` finds in this GPU's series (at the "
                  "site's threshold), with Welch's test on the runs either side of it."),
                  tables=(steps,), anchor="steps")]
    blocks += [_series_block(name, s) for s in h.series]
    ids = ", ".join(f"{label} {value}" for label, value in (
        ("serial", g.serial), ("UUID", g.uuid)) if value)
    intro = (f"{g.product or 'GPU'}{f', {ids}' if ids else ''}; {where(g)}.",
             "One chart per case and stack: each point a run's figure on this GPU, "
             "whichever node it was in, the band its interval, dashed lines the steps, red "
             "rings the figures measured on a busy host or a throttled device.")
    return Page(gpu_href(g.key), f"GPU {name}", tuple(blocks), intro)


def _series_block(name: str, s: Series) -> Block:
    factor, unit = axis_scale([p.value for p in s.points], s.unit)
    steps = {c.index: c for c in s.change_points}
    line = LineSeries(
        name, [p.started_at for p in s.points], [p.value / factor for p in s.points],
        band=[(p.ci_low / factor, p.ci_high / factor) for p in s.points],
        marked=[j for j, p in enumerate(s.points) if p.contended or p.throttled],
        steps=sorted(steps),
        tips=[f"{p.host}, run {p.run_id}, {format_timestamp(p.started_at)} UTC: "
              f"{format_value(p.value, s.unit)}" for p in s.points])
    rows = []
    for j, p in enumerate(s.points):
        flags = [flag for flag, on in (("contended", p.contended), ("throttled", p.throttled),
                                       ("noisy", p.noisy)) if on]
        step = steps.get(j)
        rows.append(Row((
            Link(p.run_id, run_href(p.run_id)), format_timestamp(p.started_at), p.host,
            format_value(p.value, s.unit),
            (f"{format_value(p.ci_low, s.unit)} to {format_value(p.ci_high, s.unit)}"
             if p.stated else MISSING),
            ", ".join(flags) or MISSING, step.describe() if step is not None else MISSING),
            BAD if step is not None and step.change < 0 else
            GOOD if step is not None else WARN if flags else None,
            Scope(node=p.host), f"{s.case.key}:{p.run_id}"))
    chart = Lines(f"{s.figure} of {s.case.label}", [line], "run start (UTC)",
                  f"{s.figure} ({unit})", dates=True, marked_label="busy host or throttled")
    table = Grid(f"Points of {s.case.label} on {s.generation_key}",
                 ("Run", "Started (UTC)", "Node", s.figure, "Interval", "Marks", "Step"),
                 tuple(rows), frozenset({3}))
    return Block(s.case.label, "", plots=(Plot(
        f"{s.case.label} on {s.generation_key}", table, chart,
        caption="Band: each run's interval. Dashed: a step. Ring: busy host or throttled."),),
        scope=Scope(bench=s.case.benchmark, stack=s.generation_key))
