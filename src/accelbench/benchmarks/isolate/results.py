"""The stored results of `isolate`: each case's pairs and its verdict, read back from the
record (no torch). A record whose verdict cannot be read (a merged record of another
version) is left out rather than shown half."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.isolate.verdict import Verdict
from accelbench.core.measurement import Measurement

BENCHMARK = "isolate"


@dataclass(frozen=True)
class IsolateResult:
    measurement: Measurement
    verdict: Verdict

    @property
    def nodes(self) -> list[Any]:
        nodes = self.measurement.details.get("nodes")
        return list(nodes) if isinstance(nodes, list) else []


def isolate_results(measurements: Iterable[Measurement]) -> list[IsolateResult]:
    out = []
    for m in measurements:
        if m.case.benchmark != BENCHMARK or not m.ok:
            continue
        stored = m.details.get("verdict")
        if not isinstance(stored, dict):
            continue
        try:
            verdict = Verdict.from_dict(stored)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        out.append(IsolateResult(m, verdict))
    return out


def named_anything(measurements: Iterable[Measurement]) -> bool:
    """Whether any isolate case named a slow node, rank or link."""
    return any(r.verdict.named for r in isolate_results(measurements))
