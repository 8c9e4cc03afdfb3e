"""`serve`: an engine of `infer-engine` under MLPerf LoadGen, in one of its four scenarios.

The engine is prepared and checked for parity exactly as `infer-engine` does (a wrong
engine fails the case and never scores), for the batch the scenario calls it with: one
sample (single-stream, server), the query's samples (multi-stream), or `offline_batch`.
The query sample library is SAMPLES seeded samples already on the device. A few calls
first estimate the service time, which gives LoadGen its hints (expected latency,
expected QPS) and the server search its starting rate.

Figures: single-stream `p90` (LoadGen's 90th percentile latency) and `p99`;
multi-stream `p99` of query latency; offline `throughput`; server `qps`, the highest rate
whose 99th percentile LoadGen finds within `latency_bound` (searched, see `search`),
with `p99` and `throughput` at that rate. Every scenario has `throughput` (samples/s),
and all but offline `goodput`: throughput times the share of queries within
`latency_bound` (LoadGen's over-latency count for server, the SUT's own query latencies
for the streams). Offline has no latency bound in MLPerf (its one query lasts the whole
test), so no goodput. LoadGen's
validity and early-stopping verdicts and the settings of every test are stored.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.benchmarks.mathmode import tf32_worker_env
from accelbench.benchmarks.models import MODEL_SOURCES, engines, tasks
from accelbench.benchmarks.models.engines.packages import require
from accelbench.benchmarks.models.infer_engine import ENGINE_PARAMS, ready_engine
from accelbench.benchmarks.models.params import model_params
from accelbench.benchmarks.serving import loadgen, scenarios, search
from accelbench.benchmarks.serving.scenarios import (
    MULTI_STREAM,
    OFFLINE,
    SERVER,
    SINGLE_STREAM,
    ServeParams,
    Settings,
)
from accelbench.benchmarks.serving.sut import QueueSUT
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark
from accelbench.core.timing import Timing

CALIBRATION_CALLS = 5
MAX_KEPT_SAMPLES = 1000  # service times kept in the record
_SHARED = ("model", "dtype", "seq", "image", "config")


def measure(ctx: CaseContext, params: ServeParams) -> CaseResult:
    import torch

    lg = require("mlperf_loadgen", "the serve benchmark")
    unused = scenarios.unused_settings(params)
    if unused:
        raise CaseSkipped(unused)
    settings = scenarios.settings_from_params(params)
    with ready_engine(ctx, params, settings.batch) as ready:
        spec, setup = ready.setup.spec, ready.setup
        pool = tasks.make_batch(torch, spec, settings.samples, setup.seq, setup.image,
                                ready.device, torch.float32, seed=2000)
        names = tasks.input_names(spec)
        inputs = [pool.tensors[n] for n in names]
        device = ready.device

        def run_batch(indices: Sequence[int]) -> None:
            padded = list(indices) + [indices[-1]] * (settings.batch - len(indices))
            where = torch.tensor(padded, device=device)
            ready.prepared.run(tuple(t.index_select(0, where) for t in inputs))
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        with torch.inference_mode():
            calls = _calibrate(ctx, run_batch, settings)
        service = float(statistics.median(calls))
        tuned = _hints(settings, calls)

        def test(at: Settings) -> tuple[loadgen.Outcome, QueueSUT]:
            sut = QueueSUT(lg, run_batch, at.batch, context=torch.inference_mode)
            with sut:
                outcome = loadgen.run_test(lg, at, sut.issue, sut.flush)
            if sut.error is not None:
                raise CaseFailed(f"the engine failed under LoadGen: "
                                 f"{type(sut.error).__name__}: {sut.error}")
            return outcome, sut

        if settings.scenario == SERVER:
            found = _server(test, tuned, params.max_trials, service)
            outcome, sut = found.best.result if found.best else found.trials[-1].result
            extra = _search_details(found)
        else:
            outcome, sut = test(tuned)
            found, extra = None, {}
        used = tuned.at_qps(found.best.qps) if found and found.best else tuned
        details = {**ready.details(), "scenario": settings.scenario,
                   "loadgen_settings": used.to_dict(),
                   "loadgen": outcome.kept(), "service_time_s": service,
                   "samples_per_call": settings.batch, **extra}
    if found is not None and found.best is None:
        raise CaseFailed(f"no rate met the p99 bound of {settings.latency_bound_s:g} s: "
                         f"{_trials_text(found)}")
    figures = scenario_figures(settings, outcome, sut.query_latencies,
                               None if found is None or found.best is None else found.best.qps)
    if ready.compile_time is not None:
        figures.append(Figure("compile_time", ready.compile_time, "s", higher_is_better=False))
    warnings = list(ready.warnings)
    if not outcome.valid:
        warnings.append(f"LoadGen: result INVALID ({_invalid(outcome)})")
    kept = tuple(sut.service_times[:MAX_KEPT_SAMPLES]) or (service,)
    timing = Timing(kept, 1, CALIBRATION_CALLS, "loadgen")
    details["samples"] = "engine service time per call under LoadGen (s), in order"
    return CaseResult(timing, figures=tuple(figures), details=details, time_name="",
                      warnings=tuple(warnings))


def scenario_figures(settings: Settings, outcome: loadgen.Outcome,
                     query_latencies: Sequence[float], qps: float | None) -> list[Figure]:
    """The scenario's headline figure first, then the others; goodput beside throughput."""
    figures: list[Figure] = []
    scenario = settings.scenario
    if scenario == SINGLE_STREAM:
        throughput = outcome.number("result_qps_with_loadgen_overhead")
        figures += _latencies(outcome, ("p90", "result_90.00_percentile_latency_ns"),
                              ("p99", "result_99.00_percentile_latency_ns"))
        early = outcome.seconds("early_stopping_latency_ss")
        if early:
            figures.append(Figure("p90_early_stopping", early, "s", higher_is_better=False))
    elif scenario == MULTI_STREAM:
        figures += _latencies(outcome, ("p99", "result_99.00_percentile_per_query_latency_ns"),
                              ("p90", "result_90.00_percentile_per_query_latency_ns"))
        mean = outcome.seconds("result_mean_query_latency_ns") or (
            statistics.fmean(query_latencies) if query_latencies else None)
        throughput = settings.samples_per_query / mean if mean else None
        early = outcome.seconds("early_stopping_latency_ms")
        if early:
            figures.append(Figure("p99_early_stopping", early, "s", higher_is_better=False))
    elif scenario == OFFLINE:
        throughput = outcome.number("result_samples_per_second")
    else:
        throughput = outcome.number("result_completed_samples_per_sec")
        assert qps is not None
        figures.append(Figure("qps", qps, "query/s"))
        figures += _latencies(outcome, ("p99", "result_99.00_percentile_latency_ns"))
    if throughput is not None:
        if scenario == OFFLINE:
            figures.insert(0, Figure("throughput", throughput, "sample/s"))
        else:
            figures.append(Figure("throughput", throughput, "sample/s"))
        share = None if scenario == OFFLINE else within_bound(settings, outcome,
                                                               query_latencies)
        if share is not None:
            figures.append(Figure("goodput", throughput * share, "sample/s"))
    return figures


def within_bound(settings: Settings, outcome: loadgen.Outcome,
                 query_latencies: Sequence[float]) -> float | None:
    """The share of queries that finished within the latency bound."""
    if settings.scenario == SERVER:
        total = outcome.number("result_query_count")
        over = outcome.number("result_overlatency_query_count")
        if total and over is not None:
            return max(0.0, 1.0 - over / total)
        return None
    if not query_latencies:
        return None
    return sum(1 for t in query_latencies if t <= settings.latency_bound_s) / \
        len(query_latencies)


def _latencies(outcome: loadgen.Outcome, *named: tuple[str, str]) -> list[Figure]:
    out = []
    for name, key in named:
        value = outcome.seconds(key)
        if value is not None:
            out.append(Figure(name, value, "s", higher_is_better=False))
    return out


def _calibrate(ctx: CaseContext, run_batch: Any, settings: Settings) -> list[float]:
    """The seconds of a few engine calls of the scenario's batch."""
    def call(index: int) -> Callable[[], None]:
        return lambda: run_batch([index % settings.samples])

    return [ctx.clock.time(call(i), 1) for i in range(CALIBRATION_CALLS)]


def _hints(settings: Settings, service: list[float]) -> Settings:
    """LoadGen's hints from the service times. LoadGen makes its queries in advance
    from them and a test that runs out of queries misses its minimum duration, so they
    err on the side of more queries: a quarter of the fastest call's time as the
    expected latency, and 1.5 times the rate of the fastest call as offline's QPS."""
    from dataclasses import replace

    fastest = min(service)
    if settings.scenario == OFFLINE:
        return replace(settings, target_qps=1.5 * settings.batch / fastest)
    if settings.scenario in (SINGLE_STREAM, MULTI_STREAM):
        return replace(settings, expected_latency_s=fastest / 4)
    return settings


def _server(test: Any, settings: Settings, max_trials: int, service: float) -> search.Search:
    """The search over Server rates, each trial a LoadGen test."""
    def trial(qps: float) -> search.Trial:
        outcome, sut = test(settings.at_qps(qps))
        return search.Trial(qps, outcome.within_bound, (outcome, sut))

    if max_trials == 1 and not settings.target_qps:
        raise CaseSkipped("server with max_trials=1 needs target_qps")
    start = settings.target_qps or 0.5 / service  # half of what one worker can serve
    return search.search_qps(trial, start, max_trials=max_trials)


def _search_details(found: search.Search) -> dict[str, Any]:
    best = found.best
    out: dict[str, Any] = {
        "qps_search": found.stopped,
        "trials": [{"qps": t.qps, "within_bound": t.met,
                    "p99_s": t.result[0].seconds("result_99.00_percentile_latency_ns"),
                    "early_stopping_met": t.result[0].early_stopping_met,
                    "valid": t.result[0].valid} for t in found.trials],
    }
    if best is not None:
        outcome = best.result[0]
        out["early_stopping"] = {"met": outcome.early_stopping_met,
                                 "verdict": outcome.early_stopping}
    return out


def _trials_text(found: search.Search) -> str:
    return ", ".join(f"{t.qps:.3g} QPS: p99 "
                     f"{t.result[0].seconds('result_99.00_percentile_latency_ns') or 0:.3g} s"
                     for t in found.trials)


def _invalid(outcome: loadgen.Outcome) -> str:
    reasons = []
    if not outcome.values.get("result_min_duration_met", True):
        reasons.append("min duration not met")
    if not outcome.values.get("result_min_queries_met", True):
        reasons.append("min queries not met")
    if not outcome.values.get("result_perf_constraints_met", True):
        reasons.append("latency bound missed")
    if not outcome.early_stopping_met:
        reasons.append(f"early stopping not met: {outcome.early_stopping}")
    return "; ".join(reasons) or str(outcome.values.get("result_invalid_reason", ""))


SERVE_PARAMS = (
    Param("scenario", "str", SINGLE_STREAM, help="single-stream (p90), multi-stream (p99), "
          "offline (samples/s) or server (highest QPS within the bound)",
          choices=scenarios.SCENARIOS),
    Param("latency_bound", "str", "100ms", help="server's p99 bound, and goodput's bound in "
          "every scenario: a positive duration such as 50ms", check=scenarios.duration_problem),
    Param("min_duration", "str", "", help="LoadGen's minimum test duration, e.g. 2s ('': "
          "LoadGen's default, 10 s)", check=scenarios.optional_duration_problem),
    Param("min_queries", "int", 0, help="LoadGen's minimum query count (0: its default, 100)",
          minimum=0, maximum=10_000_000),
    Param("samples_per_query", "int", 0, help="multi-stream: samples per query (0: "
          "LoadGen's 8)", minimum=0, maximum=4096),
    Param("offline_batch", "int", 0, help="offline: samples per engine call (0: 8)",
          minimum=0, maximum=4096),
    Param("target_qps", "float", 0.0, help="server: the rate the search starts from (0: half "
          "of what one engine call per sample can serve)", minimum=0.0),
    Param("max_trials", "int", 8, help="server: LoadGen tests the QPS search may run (1: one "
          "test at target_qps)", minimum=1, maximum=100),
)

BENCHMARK = Benchmark(
    name="serve",
    family="serving",
    summary="An inference engine under MLPerf LoadGen: SingleStream, MultiStream, Offline "
            "and Server (QPS search under a p99 bound), with goodput",
    entry="accelbench.benchmarks.serving.bench:measure",
    interleaves=False,  # LoadGen's own threads time the queries
    params=(*(p for p in model_params(batch=1) if p.name in _SHARED), *ENGINE_PARAMS,
            *SERVE_PARAMS),
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    sources=(*MODEL_SOURCES, *engines.ENGINE_SOURCES, "accelbench.benchmarks.models.infer",
             "accelbench.benchmarks.models.infer_engine",
             *(f"accelbench.benchmarks.serving.{m}"
               for m in ("loadgen", "scenarios", "search", "sut"))),
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.models.view:sections",),
    typed=ServeParams,
)
