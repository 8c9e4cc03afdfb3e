"""One MLPerf LoadGen test: its settings, its SUT and QSL callbacks, its detail log read.

LoadGen writes its results to files, not to Python: `mlperf_log_detail.txt` holds one
`:::MLLOG {json}` line per key (result_validity, early_stopping_met, the latency
percentiles, the scenario's throughput, ...), which `parse_detail` reads into a dict.
The files go to a temporary folder; what a result needs is kept in the case's details.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from accelbench.benchmarks.serving.scenarios import (
    LOADGEN_NAMES,
    MULTI_STREAM,
    OFFLINE,
    SERVER,
    SINGLE_STREAM,
    Settings,
)

_PREFIX = ":::MLLOG "
# What the case keeps of each test's detail log.
KEPT = ("loadgen_version", "effective_scenario", "effective_target_qps",
        "effective_target_latency_ns", "effective_min_duration_ms",
        "effective_min_query_count", "effective_samples_per_query", "generated_query_count",
        "result_validity", "result_perf_constraints_met", "result_min_duration_met",
        "result_min_queries_met", "early_stopping_met", "early_stopping_result",
        "result_invalid_reason", "result_query_count", "result_overlatency_query_count",
        "result_qps_with_loadgen_overhead", "result_qps_without_loadgen_overhead",
        "result_scheduled_samples_per_sec", "result_completed_samples_per_sec",
        "result_samples_per_second", "early_stopping_latency_ss", "early_stopping_latency_ms",
        "result_90.00_percentile_latency_ns", "result_99.00_percentile_latency_ns",
        "result_90.00_percentile_per_query_latency_ns",
        "result_99.00_percentile_per_query_latency_ns", "result_mean_latency_ns",
        "num_errors")


def parse_detail(text: str) -> dict[str, Any]:
    """The key -> value pairs of a LoadGen detail log (the last of each key wins)."""
    values: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith(_PREFIX):
            continue
        try:
            entry = json.loads(line[len(_PREFIX):])
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "key" in entry:
            values[str(entry["key"])] = entry.get("value")
    return values


@dataclass(frozen=True)
class Outcome:
    """What one LoadGen test reported (its detail log's values)."""

    values: dict[str, Any]

    def seconds(self, key: str) -> float | None:
        value = self.values.get(key)
        return float(value) / 1e9 if isinstance(value, (int, float)) else None

    def number(self, key: str) -> float | None:
        value = self.values.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def valid(self) -> bool:
        return self.values.get("result_validity") == "VALID"

    @property
    def early_stopping_met(self) -> bool:
        return bool(self.values.get("early_stopping_met"))

    @property
    def within_bound(self) -> bool:
        """Server: LoadGen's verdict that the latency percentile is within the bound."""
        return bool(self.values.get("result_perf_constraints_met"))

    @property
    def early_stopping(self) -> str:
        return " ".join(str(self.values.get("early_stopping_result", "")).split())

    def kept(self) -> dict[str, Any]:
        return {k: self.values[k] for k in KEPT if k in self.values}


def test_settings(lg: ModuleType, settings: Settings) -> Any:
    """LoadGen's TestSettings for a case: performance mode, the case's durations."""
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, LOADGEN_NAMES[settings.scenario])
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = max(1, round(settings.min_duration_s * 1000))
    ts.min_query_count = settings.min_queries
    expected_ns = max(1, round(settings.expected_latency_s * 1e9))
    if settings.scenario == SINGLE_STREAM:
        ts.single_stream_expected_latency_ns = expected_ns
    elif settings.scenario == MULTI_STREAM:
        ts.multi_stream_samples_per_query = settings.samples_per_query
        ts.multi_stream_expected_latency_ns = expected_ns
    elif settings.scenario == SERVER:
        ts.server_target_qps = settings.target_qps
        ts.server_target_latency_ns = max(1, round(settings.latency_bound_s * 1e9))
    elif settings.scenario == OFFLINE:
        ts.offline_expected_qps = settings.target_qps
    return ts


def run_test(lg: ModuleType, settings: Settings, issue: Callable[[Any], None],
             flush: Callable[[], None]) -> Outcome:
    """Run one LoadGen test with these callbacks; the outcome from its detail log."""
    with tempfile.TemporaryDirectory(prefix="accelbench-loadgen-") as folder:
        log = lg.LogSettings()
        log.log_output.outdir = folder
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        sut = lg.ConstructSUT(issue, flush)
        qsl = lg.ConstructQSL(settings.samples, settings.samples, _nothing, _nothing)
        try:
            lg.StartTestWithLogSettings(sut, qsl, test_settings(lg, settings), log)
        finally:
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        detail = Path(folder) / "mlperf_log_detail.txt"
        text = detail.read_text(encoding="utf-8", errors="replace") if detail.exists() else ""
    return Outcome(parse_detail(text))


def _nothing(samples: Any) -> None:
    """The QSL's load and unload: every sample is resident on the device already."""
