"""Interval arithmetic on time spans: unions, intersections, a prioritised partition.

Spans are (start, end) pairs in one time unit; every function returns sorted,
non-overlapping spans, so lengths can be added without counting anything twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Span = tuple[float, float]


def union(spans: Iterable[Span]) -> list[Span]:
    """Merge overlapping and touching spans; empty spans are dropped."""
    merged: list[list[float]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def length(spans: Iterable[Span]) -> float:
    return sum(end - start for start, end in spans)


def intersect(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """Where two unions overlap (both must be sorted and non-overlapping)."""
    out: list[Span] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """The parts of union a not covered by union b."""
    out: list[Span] = []
    j = 0
    for start, end in a:
        cursor = start
        while j < len(b) and b[j][1] <= cursor:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def clip(spans: Iterable[Span], window: Span) -> list[Span]:
    lo, hi = window
    return [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]


def partition(
    window: Span, spans_by_part: Mapping[str, Iterable[Span]], priority: Sequence[str],
    rest: str = "idle",
) -> dict[str, float]:
    """Split a window into parts: each instant counts once, for the first part in
    `priority` that covers it, else for `rest`. The values add up to the window."""
    taken: list[Span] = []
    out: dict[str, float] = {}
    for part in priority:
        covered = union(clip(spans_by_part.get(part, ()), window))
        own = subtract(covered, taken)
        out[part] = length(own)
        taken = union([*taken, *own])
    out[rest] = (window[1] - window[0]) - length(taken)
    return out
