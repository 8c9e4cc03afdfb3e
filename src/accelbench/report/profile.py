"""A profile's stored analysis (`profile.analysis.analyze`) for people: summary rows, the
tables of where the time went, its top kernels and operators, and a Markdown section.

Pure functions of the stored analysis dict (no torch), for `accelbench profile`,
`accelbench report` and anything else that reads the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelbench.core.formats import read_version
from accelbench.core.units import format_bytes, format_number, format_share, format_time
from accelbench.core.view import Table
from accelbench.errors import StoreError
from accelbench.profile.analysis import FORMAT_VERSION
from accelbench.profile.categories import PARTS, short_name
from accelbench.report.text import escape, markdown_table


def format_problem(analysis: Mapping[str, Any]) -> str | None:
    """Why this accelbench cannot read the analysis (a newer or invalid format), or None.
    A report shows that in place of the profile rather than failing as a whole."""
    try:
        read_version(dict(analysis), "profile analysis", FORMAT_VERSION)
    except StoreError as e:
        return str(e)
    return None


def profile_summary_rows(analysis: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows: window, time breakdown, launches, overlap, memory, top items."""
    problem = format_problem(analysis)
    if problem:
        return [("Profile", problem)]
    if "error" in analysis:
        return [("Profile", f"not analysed: {analysis['error']}")]
    rows: list[tuple[str, str]] = []
    window = analysis.get("window", {})
    steps = window.get("steps", 0)
    step_s = window.get("step_s") or {}
    text = f"{steps} steps, {format_time(window.get('duration_s'))}"
    if step_s:
        text += f" ({format_time(step_s.get('median'))} per step, median)"
    rows.append(("Profiled", text))
    breakdown = analysis.get("breakdown")
    if breakdown:
        basis = "Device time" if analysis.get("basis") == "device" else "CPU time"
        rows.append((basis, ", ".join(f"{p} {format_share(breakdown['shares'].get(p))}"
                                      for p in PARTS)))
    launches = analysis.get("launches")
    if launches:
        overhead = (launches.get("cpu_overhead_s") or {}).get("median")
        delay = (launches.get("launch_delay_s") or {}).get("median")
        rows.append(("Kernel launches",
                     f"{format_number(launches['launches_per_step'])} per step; "
                     f"CPU cost {format_time(overhead)}, launch-to-start "
                     f"{format_time(delay)} (medians)"))
    overlap = analysis.get("overlap")
    if overlap:
        rows.append(("Communication", f"{format_time(overlap['communication_s'])}, "
                     f"{format_share(overlap['ratio'])} overlapped with compute, "
                     f"{format_time(overlap['exposed_s'])} exposed"))
    memory = analysis.get("memory")
    if memory is not None:
        peaks = memory.get("peak_allocated_bytes") or {}
        rows.append(("Memory peak",
                     ", ".join(f"{d} {format_bytes(v)}" for d, v in peaks.items())
                     or "nothing allocated in the profiled steps"))
    for key, label, time_key in (("top_kernels", "Top kernel", "time_s"),
                                 ("top_operators", "Top operator", "self_s")):
        items = analysis.get(key) or []
        if items:
            top = items[0]
            rows.append((label, f"{short_name(top['name'])}: {format_time(top[time_key])} "
                                f"({format_share(top['share'])})"))
    return rows


def _readable(analysis: Mapping[str, Any]) -> bool:
    return "error" not in analysis and format_problem(analysis) is None


# -- terminal ----------------------------------------------------------------------------


def top_tables(analysis: Mapping[str, Any]) -> list[Table]:
    """The top device kernels and the top operators by self time, as tables."""
    if not _readable(analysis):
        return []
    tables = []
    for key, title, time_key in (("top_kernels", "Top device kernels", "time_s"),
                                 ("top_operators", "Top operators (self time)", "self_s")):
        items = analysis.get(key) or []
        if items:
            tables.append(Table(title, ("name", "kind", "calls", "time", "share"), [
                (short_name(i["name"]), str(i["category"]), str(i["calls"]),
                 format_time(i[time_key]), format_share(i["share"])) for i in items
            ], numeric=frozenset({2, 3, 4})))
    return tables


def breakdown_table(analysis: Mapping[str, Any]) -> Table | None:
    """Where the time of the profiled steps went, part by part; None when the analysis
    has no breakdown."""
    breakdown = analysis.get("breakdown")
    if not breakdown or "error" in analysis:
        return None
    basis = "device" if analysis.get("basis") == "device" else "CPU"
    return Table(f"Where the {basis} time of the profiled steps went", ("part", "time", "share"), [
        (p, format_time(breakdown["parts_s"].get(p)), format_share(breakdown["shares"].get(p)))
        for p in PARTS
    ] + [("total", format_time(breakdown.get("total_s")), "100%")], numeric=frozenset({1, 2}))


# -- Markdown ----------------------------------------------------------------------------


def profile_markdown(analysis: Mapping[str, Any], title: str = "Profile") -> str:
    """A Markdown section: the summary, the breakdown and the top tables."""
    lines = [f"### {escape(title)}", ""]
    lines += [f"- **{escape(label)}**: {escape(value)}" for label, value in
              profile_summary_rows(analysis)]
    breakdown = breakdown_table(analysis)
    if breakdown is not None:
        lines += ["", f"{breakdown.title}:", ""]
        lines += markdown_table(breakdown.header, breakdown.rows, breakdown.numeric)
    kernels = analysis.get("top_kernels") or []
    if kernels:
        lines += ["", "Top device kernels by time:", ""]
        lines += markdown_table(("kernel", "kind", "calls", "time", "share"), [
            (short_name(k["name"]), k["category"], str(k["calls"]), format_time(k["time_s"]),
             format_share(k["share"])) for k in kernels
        ])
    operators = analysis.get("top_operators") or []
    if operators:
        lines += ["", "Top operators by self time:", ""]
        lines += markdown_table(("operator", "calls", "self", "total", "share"), [
            (short_name(o["name"]), str(o["calls"]), format_time(o["self_s"]),
             format_time(o["total_s"]), format_share(o["share"])) for o in operators
        ])
    return "\n".join(lines) + "\n"
