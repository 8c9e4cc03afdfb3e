"""A sweep of one serving case over load (concurrency or request rate), and what it
shows: the highest load that still meets the SLO (the knee) and the points on the front
of per-user speed against per-device throughput (InferenceX's Pareto chart).

A load meets the SLO when no request failed and, for every bound the SLO gives, the
SLO_PERCENTILE of that latency is within it (as MLPerf's Server scenario judges TTFT
and TPOT at their 99th percentile).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.benchmarks.llm.metrics import SLO
from accelbench.core.measurement import Figure

CONCURRENCY = "concurrency"
RATE = "rate"
KINDS = (CONCURRENCY, RATE)
SLO_PERCENTILE = "p99"
# The two axes of the Pareto chart, both higher better.
USER_AXIS = "tokens_per_user"
DEVICE_AXIS = "output_tokens_per_device"


@dataclass(frozen=True)
class Sweep:
    """What `parse_sweep` reads: the kind of load and its values, lowest first."""

    kind: str
    loads: tuple[float, ...]

    def __str__(self) -> str:
        return f"{self.kind}=" + ",".join(_load_text(v) for v in self.loads)


@dataclass(frozen=True)
class SweepPoint:
    """One load of a sweep: its figures' values by name and whether it met the SLO."""

    load: float
    kind: str
    figures: Mapping[str, float] = field(default_factory=dict)
    meets_slo: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"sweep point: kind must be one of {', '.join(KINDS)}, "
                             f"not {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        # math.inf (a rate of all at once) is not JSON: it is written as null; a figure
        # that is not finite is left out.
        return {"load": self.load if math.isfinite(self.load) else None, "kind": self.kind,
                "figures": {k: float(v) for k, v in self.figures.items()
                            if math.isfinite(v)},
                "meets_slo": self.meets_slo}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepPoint:
        load = d.get("load")
        return cls(math.inf if load is None else float(load), str(d["kind"]),
                   {str(k): float(v) for k, v in dict(d.get("figures") or {}).items()
                    if isinstance(v, int | float)},
                   bool(d.get("meets_slo", False)))

    @property
    def label(self) -> str:
        return f"{self.kind} {_load_text(self.load)}"


def point(load: float, kind: str, figures: Sequence[Figure], slo: SLO) -> SweepPoint:
    """The sweep point of a load measured with `figures` (`metrics.figures`)."""
    values = {f.name: f.value for f in figures}
    return SweepPoint(load, kind, values, meets_slo(values, slo))


def meets_slo(values: Mapping[str, float], slo: SLO) -> bool:
    """No request failed, and each bound of `slo` holds at its SLO_PERCENTILE."""
    if values.get("failed", 0.0) > 0:
        return False
    for name, bound in slo.bounds.items():
        seen = values.get(f"{name}_{SLO_PERCENTILE}")
        if seen is None or not math.isfinite(seen) or seen > bound:
            return False
    return True


def parse_sweep(text: str) -> Sweep:
    """`"concurrency=1,2,4,8"` (whole numbers from 1) or `"rate=0.5,1,2"` (request/s;
    `inf`: all at once), the loads sorted lowest first; ValueError with a one-line
    message otherwise."""
    kind, sep, values = text.partition("=")
    kind = kind.strip().lower()
    if not sep or kind not in KINDS:
        raise ValueError(f"sweep {text!r}: write concurrency=1,2,4 or rate=0.5,1,2")
    loads = []
    for part in values.split(","):
        part = part.strip()
        try:
            load = float(part)
        except ValueError:
            raise ValueError(f"sweep {text!r}: {part!r} is not a number") from None
        if math.isnan(load) or load <= 0:
            raise ValueError(f"sweep {text!r}: every load must be above 0")
        if kind == CONCURRENCY and (not math.isfinite(load) or load != int(load)):
            raise ValueError(f"sweep {text!r}: a concurrency is a whole number")
        if load in loads:
            raise ValueError(f"sweep {text!r}: {part} is given twice")
        loads.append(load)
    return Sweep(kind, tuple(sorted(loads)))


def knee(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The point of the highest load that meets the SLO; None where none does."""
    meeting = [p for p in points if p.meets_slo]
    return max(meeting, key=lambda p: p.load) if meeting else None


def pareto(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    """The points no other point beats on both tokens per user and output tokens per
    device (both higher better; a point without both is left out), by tokens per user."""
    scored = [p for p in points if _finite(p, USER_AXIS) and _finite(p, DEVICE_AXIS)]
    front = []
    for p in scored:
        x, y = p.figures[USER_AXIS], p.figures[DEVICE_AXIS]
        beaten = any(q.figures[USER_AXIS] >= x and q.figures[DEVICE_AXIS] >= y
                     and (q.figures[USER_AXIS] > x or q.figures[DEVICE_AXIS] > y)
                     for q in scored)
        if not beaten:
            front.append(p)
    return sorted(front, key=lambda p: (p.figures[USER_AXIS], -p.figures[DEVICE_AXIS]))


def _finite(p: SweepPoint, name: str) -> bool:
    value = p.figures.get(name)
    return value is not None and math.isfinite(value)


def _load_text(load: float) -> str:
    return "inf" if math.isinf(load) else f"{load:g}"
