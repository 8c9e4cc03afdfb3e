"""Interval arithmetic, checked against counting on a fine integer grid."""

from __future__ import annotations

import itertools
import random

from accelbench.profile import intervals


def _cells(spans):
    return {t for start, end in spans for t in range(start, end)}


def _random_spans(rng, n=8, horizon=60):
    spans = []
    for _ in range(n):
        start = rng.randrange(horizon)
        spans.append((start, start + rng.randrange(0, 15)))
    return spans


def test_union_intersection_subtraction_match_a_grid():
    rng = random.Random(7)
    for _ in range(200):
        a, b = _random_spans(rng), _random_spans(rng)
        ua, ub = intervals.union(a), intervals.union(b)
        assert _cells(ua) == _cells(a)
        assert all(x[1] < y[0] for x, y in itertools.pairwise(ua))  # disjoint
        assert _cells(intervals.intersect(ua, ub)) == _cells(a) & _cells(b)
        assert _cells(intervals.subtract(ua, ub)) == _cells(a) - _cells(b)
        assert intervals.length(ua) == len(_cells(a))


def test_partition_gives_each_instant_to_the_first_part_and_adds_up():
    rng = random.Random(11)
    for _ in range(200):
        spans = {"a": _random_spans(rng), "b": _random_spans(rng), "c": _random_spans(rng)}
        window = (5, 50)
        parts = intervals.partition(window, spans, ("a", "b", "c"))
        inside = set(range(*window))
        a, b, c = (_cells(spans[k]) & inside for k in "abc")
        assert parts["a"] == len(a)
        assert parts["b"] == len(b - a)
        assert parts["c"] == len(c - a - b)
        assert parts["idle"] == len(inside - a - b - c)
        assert sum(parts.values()) == window[1] - window[0]
