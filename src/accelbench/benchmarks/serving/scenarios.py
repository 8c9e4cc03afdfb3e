"""The four LoadGen scenarios and a case's LoadGen settings, read from its parameters.

| scenario      | LoadGen     | headline figure                              |
|---------------|-------------|----------------------------------------------|
| single-stream | SingleStream| p90 latency of single-sample queries         |
| multi-stream  | MultiStream | p99 latency of queries of N samples          |
| offline       | Offline     | samples/s, all samples in one query          |
| server        | Server      | highest Poisson QPS whose p99 is within bound|

Durations are written with a unit (`100ms`, `2s`, `500us`); a bare number is seconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ServeParams:
    """The parameters of a serve case (`bench.BENCHMARK.params`)."""

    model: str
    dtype: str
    seq: int
    image: int
    config: str
    engine: str
    provider: str
    ort_level: str
    int8: str
    scenario: str
    latency_bound: str
    min_duration: str
    min_queries: int
    samples_per_query: int
    offline_batch: int
    target_qps: float
    max_trials: int


SINGLE_STREAM, MULTI_STREAM, OFFLINE, SERVER = "single-stream", "multi-stream", "offline", \
    "server"
SCENARIOS = (SINGLE_STREAM, MULTI_STREAM, OFFLINE, SERVER)
LOADGEN_NAMES = {SINGLE_STREAM: "SingleStream", MULTI_STREAM: "MultiStream",
                 OFFLINE: "Offline", SERVER: "Server"}

# LoadGen's own defaults (TestSettings in loadgen/test_settings.h), used when a case
# leaves a setting at 0 or "".
LOADGEN_MIN_DURATION_S = 10.0
LOADGEN_MIN_QUERIES = 100
LOADGEN_SAMPLES_PER_QUERY = 8
OFFLINE_BATCH = 8
SAMPLES = 64  # the query sample library: distinct seeded samples, resident on the device

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")
MAX_DURATION_S = 1e6


def parse_duration(text: str) -> float:
    """Seconds from "100ms", "2s", "0.5"; ValueError unless a positive finite duration."""
    match = _DURATION.match(text)
    unit = match.group(2) if match else ""
    if match is None or unit not in (*_UNITS, ""):
        raise ValueError(f"{text!r} is not a duration (a number with ns, us, ms, s or min)")
    seconds = float(match.group(1)) * _UNITS.get(unit, 1.0)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_DURATION_S):
        raise ValueError(f"{text!r} is not a positive duration of at most "
                         f"{MAX_DURATION_S:g} s")
    return seconds


def duration_problem(text: str) -> str | None:
    """Parameter check: a positive duration, or "" where that means LoadGen's default."""
    try:
        parse_duration(text)
    except ValueError as exc:
        return str(exc)
    return None


def optional_duration_problem(text: str) -> str | None:
    return None if text == "" else duration_problem(text)


@dataclass(frozen=True)
class Settings:
    """What one LoadGen test of a case is run with (stored with the result)."""

    scenario: str
    latency_bound_s: float
    min_duration_s: float
    min_queries: int
    samples_per_query: int  # multi-stream: samples per query
    batch: int  # samples per engine call: 1, the query's samples, or offline's batch
    samples: int = SAMPLES
    target_qps: float = 0.0  # server: Poisson rate; offline: expected rate (a hint)
    expected_latency_s: float = 0.0  # single/multi-stream: LoadGen's hint

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "loadgen_scenario": LOADGEN_NAMES[self.scenario]}

    def at_qps(self, qps: float) -> Settings:
        from dataclasses import replace

        return replace(self, target_qps=qps)


def settings_from_params(params: ServeParams) -> Settings:
    scenario = params.scenario
    spq = params.samples_per_query or LOADGEN_SAMPLES_PER_QUERY
    batch = {SINGLE_STREAM: 1, SERVER: 1, MULTI_STREAM: spq,
             OFFLINE: params.offline_batch or OFFLINE_BATCH}[scenario]
    return Settings(
        scenario=scenario,
        latency_bound_s=parse_duration(params.latency_bound),
        min_duration_s=(parse_duration(params.min_duration) if params.min_duration
                        else LOADGEN_MIN_DURATION_S),
        min_queries=params.min_queries or LOADGEN_MIN_QUERIES,
        samples_per_query=spq if scenario == MULTI_STREAM else 1,
        batch=batch,
        target_qps=params.target_qps,
    )


def unused_settings(params: ServeParams) -> str | None:
    """A setting given to a scenario it does not apply to, in words, or None."""
    scenario = params.scenario
    if params.samples_per_query and scenario != MULTI_STREAM:
        return f"samples_per_query applies to multi-stream, not {scenario}"
    if params.offline_batch and scenario != OFFLINE:
        return f"offline_batch applies to offline, not {scenario}"
    if params.target_qps and scenario != SERVER:
        return f"target_qps applies to server, not {scenario}"
    return None
