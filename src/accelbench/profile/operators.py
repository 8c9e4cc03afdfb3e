"""Where the time went by name: operators by self time, device activities by time.

A CPU operator's self time is its duration less that of the operators it called
(its children on the same thread), so nested operators are not counted twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.profile import intervals
from accelbench.profile.categories import cpu_op_category, device_category
from accelbench.profile.trace import Event

US = 1e-6  # trace times are in microseconds; analyses report seconds


@dataclass(frozen=True)
class SelfTime:
    """One operator call and the spans of its own work (children cut out)."""

    event: Event
    spans: tuple[intervals.Span, ...]

    @property
    def self_us(self) -> float:
        return intervals.length(self.spans)


def self_times(ops: Iterable[Event]) -> list[SelfTime]:
    """Each operator with its own spans, nesting found per thread from the times."""
    threads: dict[tuple[object, object], list[Event]] = defaultdict(list)
    for op in ops:
        threads[(op.pid, op.tid)].append(op)
    out: list[SelfTime] = []
    for events in threads.values():
        events.sort(key=lambda e: (e.ts, -e.dur))
        children: dict[int, list[intervals.Span]] = defaultdict(list)
        stack: list[int] = []
        for index, event in enumerate(events):
            while stack and events[stack[-1]].end <= event.ts:
                stack.pop()
            if stack:
                parent = events[stack[-1]]
                children[stack[-1]].append((event.ts, min(event.end, parent.end)))
            stack.append(index)
        for index, event in enumerate(events):
            own = intervals.subtract([(event.ts, event.end)],
                                     intervals.union(children.get(index, ())))
            out.append(SelfTime(event, tuple(own)))
    return out


def cpu_spans_by_category(selves: Sequence[SelfTime]) -> dict[str, list[intervals.Span]]:
    spans: dict[str, list[intervals.Span]] = defaultdict(list)
    for item in selves:
        spans[cpu_op_category(item.event.name)].extend(item.spans)
    return spans


def device_spans_by_category(events: Iterable[Event]) -> dict[str, list[intervals.Span]]:
    spans: dict[str, list[intervals.Span]] = defaultdict(list)
    for event in events:
        spans[device_category(event.cat, event.name)].append((event.ts, event.end))
    return spans


def top_operators(selves: Sequence[SelfTime], top: int) -> list[dict[str, Any]]:
    """Operators by self time; `share` is of all operators' self time."""
    rows: dict[str, dict[str, Any]] = {}
    for item in selves:
        row = rows.setdefault(item.event.name, {"name": item.event.name, "calls": 0,
                                                "self_s": 0.0, "total_s": 0.0})
        row["calls"] += 1
        row["self_s"] += item.self_us * US
        row["total_s"] += item.event.dur * US
    return _ranked(rows.values(), "self_s", top, cpu_op_category)


def top_kernels(events: Sequence[Event], top: int) -> list[dict[str, Any]]:
    """Device activities (kernels, copies, fills) by time; `share` is of all of them."""
    rows: dict[str, dict[str, Any]] = {}
    for event in events:
        row = rows.setdefault(event.name, {"name": event.name, "calls": 0, "time_s": 0.0,
                                           "category": device_category(event.cat, event.name)})
        row["calls"] += 1
        row["time_s"] += event.dur * US
    return _ranked(rows.values(), "time_s", top, None)


def _ranked(rows: Iterable[dict[str, Any]], key: str, top: int,
            categorize: Callable[[str], str] | None) -> list[dict[str, Any]]:
    ordered = sorted(rows, key=lambda r: (-r[key], r["name"]))
    total = sum(r[key] for r in ordered)
    for row in ordered:
        row["share"] = row[key] / total if total > 0 else 0.0
        if categorize is not None:
            row["category"] = categorize(row["name"])
    return ordered[:top]
