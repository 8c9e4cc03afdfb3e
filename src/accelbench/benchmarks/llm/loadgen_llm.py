"""MLPerf LoadGen's Server scenario with token latencies, driving an LLM endpoint.

LoadGen schedules the queries (Poisson arrivals at `qps`) and keeps the clock: the system
under test sends each query's prompt to the endpoint as one streamed request and tells
LoadGen `FirstTokenComplete` when the first piece of output text arrives and
`QuerySamplesComplete` (with the request's output token count) when the stream ends.
LoadGen then reports its own TTFT and TPOT percentiles, and judges the run VALID when the
99th percentiles are within the SLO's TTFT and TPOT bounds, the minimum duration and query
count are met, and its early-stopping test passes. LoadGen's TPOT of a query is
(latency - first token latency) / (tokens - 1), as vLLM's.

The requests are the load generator's own exchanges (`client`: the same request body,
stream parser, timeouts and one-line errors as its process), run on an asyncio loop in a
thread of this process, with LoadGen told of the first token the moment the parser takes
the first piece of output text; LoadGen's issue callback only hands each query to that
loop and returns. A request that
fails is still completed for LoadGen (else it would wait for it forever), counted in
`failed`, and makes the result invalid. LoadGen's log files (summary, detail) and the
requests' records (`records.jsonl`, no text) are written to `out_dir`.
"""

from __future__ import annotations

import array
import asyncio
import dataclasses
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.llm.records import RequestRecord
from accelbench.benchmarks.serving.loadgen import parse_detail

if TYPE_CHECKING:
    from accelbench.benchmarks.llm.client import LoadPlan
    from accelbench.benchmarks.llm.engines.endpoint import Endpoint
    from accelbench.benchmarks.llm.metrics import SLO

# Where the SLO leaves a bound open, LoadGen is still given one (it requires both): a
# bound no request can exceed within a run.
_OPEN_BOUND_S = 1e6
# LoadGen's detail-log keys for token latencies (6.x), and the names they get here.
_PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")
_SECONDS = {
    "ttft_min": "result_first_token_min_latency_ns",
    "ttft_max": "result_first_token_max_latency_ns",
    "ttft_mean": "result_first_token_mean_latency_ns",
    **{f"ttft_p{p.rstrip('0').rstrip('.')}": f"result_first_token_{p}_percentile_latency_ns"
       for p in _PERCENTILES},
    "tpot_min": "result_time_to_output_token_min",
    "tpot_max": "result_time_to_output_token_max",
    "tpot_mean": "result_time_to_output_token_mean",
    **{f"tpot_p{p.rstrip('0').rstrip('.')}": f"result_time_per_output_token_{p}_percentile_ns"
       for p in _PERCENTILES},
    "e2e_mean": "result_mean_latency_ns",
    **{f"e2e_p{p.rstrip('0').rstrip('.')}": f"result_{p}_percentile_latency_ns"
       for p in _PERCENTILES},
}
_NUMBERS = {
    "completed_qps": "result_completed_samples_per_sec",
    "scheduled_qps": "result_scheduled_samples_per_sec",
    "tokens_per_s": "result_completed_tokens_per_second",
    "query_count": "result_query_count",
    "overlatency_queries": "result_overlatency_query_count",
    "loadgen_errors": "num_errors",
}
_FLAGS = {
    "perf_constraints_met": "result_perf_constraints_met",
    "min_duration_met": "result_min_duration_met",
    "min_queries_met": "result_min_queries_met",
    "early_stopping_met": "early_stopping_met",
}
_TEXTS = {
    "loadgen_version": "loadgen_version",
    "invalid_reason": "result_invalid_reason",
    "early_stopping_ttft": "early_stopping_ttft_result",
    "early_stopping_tpot": "early_stopping_tpot_result",
}


def loadgen() -> ModuleType:
    """The LoadGen module; ImportError with a one-line hint when it is not installed."""
    try:
        import mlperf_loadgen
    except ImportError as exc:
        raise ImportError("MLPerf LoadGen is not installed (pip install mlcommons-loadgen)"
                          ) from exc
    return mlperf_loadgen


def settings(lg: ModuleType, *, qps: float, slo: SLO | None, min_duration: float,
             min_queries: int, max_duration: float = 0.0, seed: int = 0) -> Any:
    """LoadGen's TestSettings: Server, performance only, token latencies, the SLO's TTFT
    and TPOT as the 99th-percentile bounds (its end-to-end bound as the query bound)."""
    if not (math.isfinite(qps) and qps > 0):
        raise ValueError(f"qps must be a positive rate, not {qps!r}")
    ts = lg.TestSettings()
    ts.scenario = lg.TestScenario.Server
    ts.mode = lg.TestMode.PerformanceOnly
    ts.server_target_qps = float(qps)
    ts.min_duration_ms = max(1, round(min_duration * 1000))
    ts.min_query_count = max(1, int(min_queries))
    if max_duration > 0:
        ts.max_duration_ms = max(ts.min_duration_ms, round(max_duration * 1000))
    ts.use_token_latencies = True
    ts.ttft_latency = _ns(slo.ttft if slo is not None else None)
    ts.tpot_latency = _ns(slo.tpot if slo is not None else None)
    ts.server_target_latency_ns = _ns(slo.e2e if slo is not None else None)
    ts.schedule_rng_seed = ts.sample_index_rng_seed = ts.qsl_rng_seed = int(seed)
    return ts


def _ns(seconds: float | None) -> int:
    return max(1, round((_OPEN_BOUND_S if seconds is None else seconds) * 1e9))


def figures(values: dict[str, Any]) -> dict[str, Any]:
    """LoadGen's own figures from its detail log's values: latencies in seconds, rates,
    its verdicts; a key LoadGen did not write is left out."""
    out: dict[str, Any] = {}
    for name, key in _SECONDS.items():
        value = values.get(key)
        if isinstance(value, (int, float)):
            out[name] = float(value) / 1e9
    for name, key in _NUMBERS.items():
        value = values.get(key)
        if isinstance(value, (int, float)):
            out[name] = value
    for name, key in _FLAGS.items():
        if key in values:
            out[name] = bool(values[key])
    for name, key in _TEXTS.items():
        if key in values:
            out[name] = " ".join(str(values[key]).split())
    out["loadgen_valid"] = values.get("result_validity") == "VALID"
    return out


class LoadGenSUT:
    """LoadGen's system under test: each query becomes one streamed request on an asyncio
    loop in its own thread; LoadGen hears of its first token and of its end from there."""

    def __init__(self, lg: Any, plan: LoadPlan, prompts: Sequence[str],
                 max_tokens: Sequence[int]) -> None:
        self._lg = lg
        self._plan = plan
        self._prompts = list(prompts)
        self._max_tokens = list(max_tokens)
        self.records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="accelbench-llm-sut", daemon=True)
        self._session: Any = None
        self._counter: Any = None
        self._pending: set[Any] = set()
        self._t0 = 0.0
        self._count = 0
        # LoadGen reads a response's data only in accuracy mode; a byte keeps it valid.
        self._byte = array.array("B", b"\0")

    def __enter__(self) -> LoadGenSUT:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self._loop).result()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    async def _open(self) -> None:
        from accelbench.benchmarks.llm.client import open_session, token_counter

        # No pool limit: LoadGen's arrivals, not a client pool, decide what is in flight.
        self._session = open_session(self._plan)
        self._counter = token_counter(self._plan.tokenizer)

    async def _close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._session.close()

    def warm(self, count: int) -> None:
        """Send the first `count` prompts at once and wait for them (not measured)."""
        async def all_of() -> None:
            await asyncio.gather(*(self._request(i, i % len(self._prompts), None, True)
                                   for i in range(count)))
        if count > 0:
            asyncio.run_coroutine_threadsafe(all_of(), self._loop).result()

    def start_clock(self) -> None:
        self._t0 = time.perf_counter()

    # LoadGen's callbacks (its issue thread).
    def issue(self, query_samples: Any) -> None:
        for sample in query_samples:
            with self._lock:
                index = self._count
                self._count += 1
            self._loop.call_soon_threadsafe(self._spawn, index, int(sample.index),
                                            int(sample.id))

    def flush(self) -> None:
        """LoadGen's flush: every query is sent as it comes, nothing is held back."""

    def _spawn(self, index: int, sample: int, sample_id: int) -> None:
        task = self._loop.create_task(self._request(index, sample, sample_id, False))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _request(self, index: int, sample: int, sample_id: int | None,
                       warmup: bool) -> None:
        from accelbench.benchmarks.llm import client

        told = False

        def first_token() -> None:
            nonlocal told
            if sample_id is not None and not told:
                told = True
                self._lg.FirstTokenComplete([self._response(sample_id, 1)])

        record: RequestRecord | None = None
        tokens = 0
        try:
            # The client's own exchange (parser, timeouts, errors), with LoadGen told of
            # the first piece of output text the moment the parser takes it.
            record, _ = await client.stream_request(
                self._session, self._plan, index, self._prompts[sample],
                self._max_tokens[sample], self._t0, warmup, counter=self._counter,
                on_first_token=first_token)
            tokens = record.output_tokens if record.output_tokens is not None \
                else len(record.chunk_times)
            if record.ok and tokens < 2:
                record = dataclasses.replace(
                    record, error=f"the engine wrote {tokens} output token(s); TPOT needs "
                                  "at least 2")
        except Exception as exc:  # never leave LoadGen waiting for a query
            record = RequestRecord(index, warmup, math.nan, math.nan,
                                   error=client.one_line(f"{type(exc).__name__}: {exc}"))
        finally:
            if sample_id is not None:
                # LoadGen wants a first token before the end and at least 2 tokens: a
                # failed request is told as both now (it is counted as failed here).
                first_token()
                self._lg.QuerySamplesComplete([self._response(sample_id, max(2, tokens))])
            if record is not None and not warmup:
                with self._lock:
                    self.records.append(record)

    def _response(self, sample_id: int, tokens: int) -> Any:
        address, _ = self._byte.buffer_info()
        return self._lg.QuerySampleResponse(sample_id, address, 1, tokens)


def plan_for(endpoint: Endpoint, *, api: str = "completions", request_timeout: float = 600.0,
             stall_timeout: float = 60.0, api_key_env: str | None = None) -> LoadPlan:
    """The client's plan for requests to this endpoint (the prompts are given per request)."""
    from accelbench.benchmarks.llm.client import LoadPlan

    return LoadPlan(url=endpoint.url, api=api, model=endpoint.model, prompts=(),
                    max_tokens=(), warmup=(), offsets=(), concurrency=0,
                    request_timeout=request_timeout, stall_timeout=stall_timeout,
                    extra_body=dict(endpoint.extra_body), api_key_env=api_key_env,
                    tokenizer=None if endpoint.tokenizer is None else str(endpoint.tokenizer))


def run_server(endpoint: Endpoint, prompts: Sequence[str], max_tokens: Sequence[int], *,
               qps: float, slo: SLO | None, min_duration: float, min_queries: int,
               out_dir: Path, max_duration: float = 0.0, warmup: int = 0,
               api: str = "completions", request_timeout: float = 600.0,
               stall_timeout: float = 60.0, api_key_env: str | None = None,
               seed: int = 0) -> dict[str, Any]:
    """One LoadGen Server test against `endpoint` at `qps` queries/s, each query one of
    `prompts` (with its `max_tokens`, at least 2) picked by LoadGen: LoadGen's figures
    (seconds, queries/s, tokens/s), its verdicts, `failed` (requests that did not
    complete) and `valid` (LoadGen's VALID and no request failed)."""
    if not prompts or len(prompts) != len(max_tokens):
        raise ValueError("give one max_tokens per prompt, and at least one prompt")
    if min(max_tokens) < 2:
        raise ValueError("max_tokens must be at least 2 (LoadGen's TPOT needs two tokens)")
    lg = loadgen()
    test = settings(lg, qps=qps, slo=slo, min_duration=min_duration,
                    min_queries=min_queries, max_duration=max_duration, seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(out_dir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    plan = plan_for(endpoint, api=api, request_timeout=request_timeout,
                    stall_timeout=stall_timeout, api_key_env=api_key_env)
    plan.headers()  # an API key's variable that is not set: ValueError before any query
    with LoadGenSUT(lg, plan, prompts, max_tokens) as sut:
        sut.warm(warmup)
        sut.start_clock()
        handle = lg.ConstructSUT(sut.issue, sut.flush)
        qsl = lg.ConstructQSL(len(prompts), len(prompts), _nothing, _nothing)
        try:
            lg.StartTestWithLogSettings(handle, qsl, test, log)
        finally:
            lg.DestroyQSL(qsl)
            lg.DestroySUT(handle)
    records = sorted(sut.records, key=lambda r: r.index)
    with (out_dir / "records.jsonl").open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record.to_dict()) + "\n")
    detail = out_dir / "mlperf_log_detail.txt"
    values = parse_detail(detail.read_text(encoding="utf-8", errors="replace")
                          if detail.exists() else "")
    result = figures(values)
    failures = [r.error for r in records if not r.ok]
    result["requests"] = len(records)
    result["failed"] = len(failures)
    if failures:
        common, _ = Counter(str(e) for e in failures).most_common(1)[0]
        result["failure"] = common
    result["valid"] = bool(result["loadgen_valid"]) and not failures
    result["target_qps"] = float(qps)
    return result


def _nothing(samples: Any) -> None:
    """The QSL's load and unload: the prompts are text in memory already."""
