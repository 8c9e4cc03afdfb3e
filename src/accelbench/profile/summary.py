"""A profile's analysis for people: summary rows and a Markdown section.

Pure functions of the stored analysis (no torch), for the terminal, `accelbench
report` and anything else that reads the store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.profile.analysis import FORMAT_VERSION
from accelbench.profile.categories import PARTS, short_name

_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTES = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def profile_summary_rows(analysis: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows: window, time breakdown, launches, overlap, memory, top items."""
    if analysis.get("format_version", 1) > FORMAT_VERSION:
        return [("Profile", f"analysis format {analysis['format_version']} is newer than "
                            f"this accelbench reads ({FORMAT_VERSION})")]
    if "error" in analysis:
        return [("Profile", f"not analysed: {analysis['error']}")]
    rows: list[tuple[str, str]] = []
    window = analysis.get("window", {})
    steps = window.get("steps", 0)
    step_s = window.get("step_s") or {}
    text = f"{steps} steps, {seconds(window.get('duration_s'))}"
    if step_s:
        text += f" ({seconds(step_s.get('median'))} per step, median)"
    rows.append(("Profiled", text))
    breakdown = analysis.get("breakdown")
    if breakdown:
        basis = "Device time" if analysis.get("basis") == "device" else "CPU time"
        rows.append((basis, ", ".join(f"{p} {pct(breakdown['shares'].get(p))}" for p in PARTS)))
    launches = analysis.get("launches")
    if launches:
        overhead = (launches.get("cpu_overhead_s") or {}).get("median")
        delay = (launches.get("launch_delay_s") or {}).get("median")
        rows.append(("Kernel launches", f"{launches['launches_per_step']:.3g} per step; "
                     f"CPU cost {seconds(overhead)}, launch-to-start {seconds(delay)} "
                     "(medians)"))
    overlap = analysis.get("overlap")
    if overlap:
        rows.append(("Communication", f"{seconds(overlap['communication_s'])}, "
                     f"{pct(overlap['ratio'])} overlapped with compute, "
                     f"{seconds(overlap['exposed_s'])} exposed"))
    memory = analysis.get("memory")
    if memory is not None:
        peaks = memory.get("peak_allocated_bytes") or {}
        rows.append(("Memory peak", ", ".join(f"{d} {nbytes(v)}" for d, v in peaks.items())
                     or "nothing allocated in the profiled steps"))
    for key, label, time_key in (("top_kernels", "Top kernel", "time_s"),
                                 ("top_operators", "Top operator", "self_s")):
        items = analysis.get(key) or []
        if items:
            top = items[0]
            rows.append((label, f"{short_name(top['name'])}: {seconds(top[time_key])} "
                                f"({pct(top['share'])})"))
    return rows


def profile_markdown(analysis: Mapping[str, Any], title: str = "Profile") -> str:
    """A Markdown section: the summary, the breakdown and the top tables."""
    lines = [f"### {_cell(title)}", ""]
    lines += [f"- **{_cell(label)}**: {_cell(value)}" for label, value in
              profile_summary_rows(analysis)]
    breakdown = analysis.get("breakdown")
    if breakdown and "error" not in analysis:
        basis = "device" if analysis.get("basis") == "device" else "CPU"
        lines += ["", f"Where the {basis} time of the profiled steps went:", ""]
        lines += _table(("part", "time", "share"), [
            (p, seconds(breakdown["parts_s"].get(p)), pct(breakdown["shares"].get(p)))
            for p in PARTS
        ] + [("total", seconds(breakdown.get("total_s")), "100%")])
    kernels = analysis.get("top_kernels") or []
    if kernels:
        lines += ["", "Top device kernels by time:", ""]
        lines += _table(("kernel", "kind", "calls", "time", "share"), [
            (short_name(k["name"]), k["category"], str(k["calls"]), seconds(k["time_s"]),
             pct(k["share"])) for k in kernels
        ])
    operators = analysis.get("top_operators") or []
    if operators:
        lines += ["", "Top operators by self time:", ""]
        lines += _table(("operator", "calls", "self", "total", "share"), [
            (short_name(o["name"]), str(o["calls"]), seconds(o["self_s"]),
             seconds(o["total_s"]), pct(o["share"])) for o in operators
        ])
    return "\n".join(lines) + "\n"


def seconds(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for scale, unit in _TIME:
        if abs(value) >= scale or unit == "ns":
            return f"{_sig(value / scale)} {unit}"
    return "-"  # pragma: no cover


def nbytes(value: float | None) -> str:
    if value is None:
        return "-"
    for scale, unit in _BYTES:
        if abs(value) >= scale or unit == "B":
            return f"{_sig(value / scale)} {unit}"
    return "-"  # pragma: no cover


def pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _sig(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


def _cell(text: Any) -> str:
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " "))


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
