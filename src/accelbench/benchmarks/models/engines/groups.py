"""Engines side by side: each engine's case of a model, precision and batch beside the
eager case of the same run, with its speed-up over eager.

Cases pair when they are of the same benchmark (`infer-engine` or `generate`), device and
parameters but for the engine and its settings. The speed-up is eager's time per call
over the engine's, a ratio of medians with its 95% interval (a bootstrap over the two
cases' raw samples, as `compare` computes its ratios), so > 1 is faster than eager. A
case that failed (out of parity, a failed export) is listed with its reason and has no
speed-up: a wrong engine never scores. Pure function of stored records; no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.analysis.significance import RatioEstimate, ratio_of_medians
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement

ENGINE_BENCHMARKS = ("infer-engine", "generate")
EAGER = "eager"
# Engine settings: not part of what makes two cases the same model, precision and batch.
ENGINE_SETTINGS = frozenset({"engine", "provider", "ort_level", "int8"})


@dataclass(frozen=True)
class EngineRow:
    measurement: Measurement
    speedup: RatioEstimate | None  # eager time / this engine's time; None without a pair

    @property
    def case(self) -> Case:
        return self.measurement.case

    @property
    def engine(self) -> str:
        label = str(self.case.param_dict.get("engine", EAGER))
        settings = [f"{k}={v}" for k, v in self.case.params
                    if k in ENGINE_SETTINGS - {"engine"} and v not in ("", None)]
        return " ".join([label, *settings])

    @property
    def parity(self) -> dict[str, Any] | None:
        value = self.measurement.details.get("parity")
        return value if isinstance(value, dict) else None

    @property
    def providers(self) -> str:
        details = self.measurement.details.get("engine_details")
        used = details.get("providers_used") if isinstance(details, dict) else None
        return ", ".join(str(p) for p in used) if isinstance(used, list) else ""


@dataclass(frozen=True)
class EngineGroup:
    """One model, precision and batch (and whatever else the cases share)."""

    benchmark: str
    device: str
    shared: tuple[tuple[str, Any], ...]  # the parameters the group's cases share
    rows: tuple[EngineRow, ...]

    @property
    def shown(self) -> tuple[tuple[str, Any], ...]:
        """The shared parameters a table shows (not those left at an "off" default)."""
        names = {k for r in self.rows for k in r.case.shown}
        return tuple((k, v) for k, v in self.shared if k in names)

    @property
    def model(self) -> str:
        return str(dict(self.shared).get("model", ""))


def _key(case: Case) -> tuple[Any, ...]:
    return (case.benchmark, case.device,
            tuple((k, v) for k, v in case.params if k not in ENGINE_SETTINGS))


def engine_groups(measurements: Iterable[Measurement]) -> list[EngineGroup]:
    """The engine cases among `measurements` (one run), grouped, each with its speed-up
    over the eager case of its group; groups of which no case was measured are left
    out."""
    groups: dict[tuple[Any, ...], list[Measurement]] = {}
    for m in measurements:
        if m.case.benchmark in ENGINE_BENCHMARKS:
            groups.setdefault(_key(m.case), []).append(m)
    out = []
    for (benchmark, device, shared), ms in groups.items():
        if not any(m.ok for m in ms):
            continue
        eager = next((m for m in ms if m.ok and _is_eager(m.case) and m.samples), None)
        rows = tuple(EngineRow(m, speedup(eager, m)) for m in ms)
        out.append(EngineGroup(benchmark, device, shared, rows))
    return out


def _is_eager(case: Case) -> bool:
    return bool(case.param_dict.get("engine", EAGER) == EAGER)


def speedup(eager: Measurement | None, m: Measurement) -> RatioEstimate | None:
    """median(eager's time per call) / median(m's), with its interval; None when either
    side has no samples, m failed, or m is the eager case itself."""
    if eager is None or m is eager or not m.ok or not m.samples or not eager.samples:
        return None
    return ratio_of_medians(m.samples, eager.samples, m.confidence)


def has_engines(measurements: Sequence[Measurement]) -> bool:
    return any(m.case.benchmark in ENGINE_BENCHMARKS for m in measurements)
