"""`serve-llm`: an LLM serving engine under load, judged as its users would judge it.

The case gets its engine ready (started here as a server or in this process, or reached by
URL; `engines`), checks the engine's greedy output against eager PyTorch on the same
weights (a wrong engine fails the case and is never timed), then drives it with the load
generator in its own process (`client`): warm-up requests, then the measured ones at their
arrival times and concurrency. Each measured load gives the figures of `metrics` (TTFT,
TPOT, ITL, end-to-end latency percentiles, throughput, goodput at the SLO, tokens per
second per user) with their intervals; a sweep measures several loads in turn, stores every
point for the Pareto chart and reports the figures of the highest load that met the SLO.

The case's time per call is the engine's seconds per output token over the measured
window, so the power read beside the case gives `energy_per_call` in joules per
output token (also named `energy_per_token`). A server that dies mid-case fails the case
with its reason, keeping every load measured before it. No prompt or response text is
stored unless `keep_text` asks for it.
"""

from __future__ import annotations

import math
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.llm.params import PARAMS, URL, ServeLLMParams
from accelbench.core.context import CaseContext
from accelbench.core.measurement import PER_CALL, CaseFailed, CaseResult, Figure
from accelbench.core.registry import Benchmark
from accelbench.core.timing import Timing

if TYPE_CHECKING:
    from accelbench.benchmarks.llm.client import LoadOutcome, LoadPlan
    from accelbench.benchmarks.llm.engines.endpoint import Endpoint
    from accelbench.benchmarks.llm.metrics import SLO
    from accelbench.benchmarks.llm.records import RequestRecord
    from accelbench.benchmarks.llm.sweep import SweepPoint

KEPT_TEXTS = 8  # requests whose text keep_text stores
MAX_KEPT_LATENCIES = 2000  # per-request latencies stored with the record
# The output tokens per second a device serves at this load, and what each user sees.
HEADLINE = ("output_tokens", "goodput")


def measure(ctx: CaseContext, params: ServeLLMParams) -> CaseResult:
    from accelbench.benchmarks.models.engines.packages import require

    require("aiohttp", "serve-llm")  # the load generator's and the in-process engine's HTTP
    from accelbench.benchmarks.llm import metrics, sweep
    from accelbench.benchmarks.llm.engines import endpoint as endpoints

    slo = metrics.SLO.parse(params.slo)
    loads = sweep.parse_sweep(params.sweep) if params.sweep else None
    device = "cpu" if ctx.device.type == "cpu" else f"{ctx.device.type}:{ctx.device.index or 0}"
    options: dict[str, Any] = {}
    if params.engine_args:
        options["args"] = params.engine_args
    with tempfile.TemporaryDirectory(prefix="accelbench-llm-") as folder, \
            endpoints.started(params.engine, params.served_model if params.engine == URL
                              else params.model, device=device, dtype=params.dtype,
                              options=options, ready_timeout=params.ready_timeout,
                              log_dir=Path(folder), url=params.url or None,
                              api_key_env=params.api_key_env or None,
                              python=params.engine_python or None) as endpoint:
        details: dict[str, Any] = {"engine": endpoint.info(), "slo": slo.to_dict(),
                                   "api": params.api}
        details["canary"] = _canary(params, endpoint)
        devices = _devices(params.engine_args)
        details["devices"] = devices
        prompts = _Prompts(params, endpoint)
        if loads is None:
            run = _run_load(ctx, params, endpoint, prompts, slo, devices,
                            params.concurrency, params.rate, details)
            figures, chosen = run.figures, run
            details.update(run.details())
        else:
            figures, chosen = _sweep(ctx, params, endpoint, prompts, slo, devices, loads,
                                     details)
        if params.loadgen:
            figures += _loadgen(params, endpoint, prompts, slo, chosen, details,
                                Path(folder))
        if params.keep_text:
            details["texts"] = prompts.kept(chosen)
    timing = Timing(tuple(chosen.per_token) or (math.nan,), 1, 0, "load")
    details[PER_CALL] = "output token"
    details["samples"] = "the engine's seconds per output token over the measured window"
    return CaseResult(timing, figures=tuple(figures), details=details, time_name="",
                      warnings=tuple(chosen.warnings))


class _Prompts:
    """The prompts of every load: seeded random words of the model's vocabulary, which its
    word-level tokenizer reads back token for token (a URL engine's own tokenizer may read
    them otherwise: its usage then counts the prompt)."""

    def __init__(self, params: ServeLLMParams, endpoint: Endpoint) -> None:
        from accelbench.benchmarks.llm.engines import model_dir

        self.params = params
        self.endpoint = endpoint
        vocab = model_dir.MODEL_CONFIGS[params.model].vocab
        self.token_ids = list(range(model_dir.FIRST_WORD, vocab))
        self.text_of = model_dir.text_of

    def plan(self, concurrency: int, rate: float, seed: int) -> LoadPlan:
        from accelbench.benchmarks.llm import client, workload

        params = self.params
        warmup = params.warmup or max(concurrency, 2)
        planned = workload.plan_requests(
            params.requests, warmup, workload.Lengths.parse(params.input_len),
            workload.Lengths.parse(params.output_len), self.token_ids,
            params.shared_prefix, seed)
        arrivals = workload.Arrivals(rate if rate > 0 else math.inf, params.burstiness,
                                     params.ramp_up)
        measured = sum(1 for p in planned if not p.warmup)
        offsets = workload.arrival_offsets(measured, arrivals, seed)
        return client.LoadPlan(
            url=self.endpoint.url, api=params.api, model=self.endpoint.model,
            prompts=tuple(self.text_of(p.prompt_ids) for p in planned),
            max_tokens=tuple(p.max_tokens for p in planned),
            warmup=tuple(p.warmup for p in planned), offsets=tuple(offsets),
            concurrency=concurrency, request_timeout=params.request_timeout,
            stall_timeout=params.stall_timeout, extra_body=dict(self.endpoint.extra_body),
            api_key_env=params.api_key_env or None,
            tokenizer=None if self.endpoint.tokenizer is None else str(self.endpoint.tokenizer),
            keep_text=KEPT_TEXTS if params.keep_text else 0)

    @staticmethod
    def kept(run: _Load) -> list[dict[str, str]]:
        """The prompt and output text of the first measured requests (keep_text)."""
        out = []
        for r in run.outcome.records:
            if not r.warmup and "text" in r.extra:
                out.append({"prompt": run.plan.prompts[r.index], "output": str(r.extra["text"])})
        return out[:KEPT_TEXTS]


class _Load:
    """One measured load: what the load generator left and the figures made of it."""

    def __init__(self, concurrency: int, rate: float, plan: LoadPlan, outcome: LoadOutcome,
                 figures: list[Figure], per_token: list[float], warnings: list[str]) -> None:
        self.concurrency, self.rate = concurrency, rate
        self.plan, self.outcome = plan, outcome
        self.figures = figures
        self.per_token = per_token
        self.warnings = warnings

    def details(self) -> dict[str, Any]:
        measured = [r for r in self.outcome.records if not r.warmup]
        errors: dict[str, int] = {}
        for r in measured:
            if r.error is not None:
                errors[r.error] = errors.get(r.error, 0) + 1
        ok = [r for r in measured if r.ok]
        return {
            "load": _load(self.concurrency, self.rate),
            "requests_measured": len(measured), "requests_failed": len(measured) - len(ok),
            "errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])[:10]),
            "token_counts": sorted({r.counted_by for r in ok}),
            "window_s": self.outcome.duration,
            "client_cpu_s": self.outcome.client_cpu_s,
            "request_latencies": _latencies(ok),
        }


def _run_load(ctx: CaseContext, params: ServeLLMParams, endpoint: Endpoint, prompts: _Prompts,
              slo: SLO, devices: int, concurrency: int, rate: float,
              details: dict[str, Any], *, seed: int = 0,
              done: Sequence[SweepPoint] = ()) -> _Load:
    from accelbench.benchmarks.llm import client, metrics

    plan = prompts.plan(concurrency, rate, seed)
    deadline = _deadline(params, plan, concurrency)
    start = perf_counter()
    outcome = client.run_load(plan, deadline)
    if ctx.on_timed is not None:
        ctx.on_timed(start, perf_counter())
    warnings = [] if outcome.error is None else [f"load generator: {outcome.error}"]
    died = _died(endpoint)
    measured = [r for r in outcome.records if not r.warmup]
    try:
        figures = metrics.figures(measured, slo=slo, devices=devices)
    except ValueError as exc:
        reason = f"the engine died during the load: {died}" if died else str(exc)
        raise CaseFailed(reason, details={**details, "sweep": [p.to_dict() for p in done],
                                          "load": _load(concurrency, rate)}) from None
    if died:
        raise CaseFailed(f"the engine died during the load: {died}", figures=figures,
                         details={**details, "sweep": [p.to_dict() for p in done]})
    failed = next((f.value for f in figures if f.name == "failed"), 0.0)
    if failed:
        warnings.append(f"{int(failed)} of {len(measured)} requests failed "
                        f"(first: {next(r.error for r in measured if r.error)})")
    if outcome.error is not None and not any(r.ok for r in measured):
        raise CaseFailed(f"load generator: {outcome.error}", details=details)
    return _Load(concurrency, rate, plan, outcome, _headline_first(figures),
                 _per_token(measured, outcome.duration), warnings)


def _sweep(ctx: CaseContext, params: ServeLLMParams, endpoint: Endpoint, prompts: _Prompts,
           slo: SLO, devices: int, loads: Any, details: dict[str, Any]
           ) -> tuple[list[Figure], _Load]:
    """Every load of the sweep in turn, lowest first; the figures of the knee (the highest
    load that met the SLO), or of the lowest load, with a warning, where none did."""
    from accelbench.benchmarks.llm import sweep

    points: list[SweepPoint] = []
    runs: list[_Load] = []
    for value in loads.loads:
        concurrency = int(value) if loads.kind == "concurrency" else params.concurrency
        rate = float(value) if loads.kind == "rate" else params.rate
        run = _run_load(ctx, params, endpoint, prompts, slo, devices, concurrency, rate,
                        details, seed=len(points), done=points)
        point = sweep.point(float(value), loads.kind, run.figures, slo)
        points.append(point)
        runs.append(run)
    knee = sweep.knee(points)
    details["sweep"] = [p.to_dict() for p in points]
    details["sweep_kind"] = loads.kind
    details["knee"] = knee.load if knee is not None else None
    chosen = runs[points.index(knee)] if knee is not None else runs[0]
    details.update(chosen.details())
    figures = list(chosen.figures)
    if knee is not None:
        if math.isfinite(knee.load):  # a rate of "all at once" is no figure
            unit = "request/s" if loads.kind == "rate" else "request"
            figures.append(Figure(f"knee_{loads.kind}", knee.load, unit))
    else:
        chosen.warnings.append(f"no load of the sweep met the SLO ({params.slo}); figures of "
                               f"the lowest, {loads.kind} {loads.loads[0]:g}")
    return figures, chosen


def _died(endpoint: Endpoint) -> str | None:
    """Why the engine is gone (a started server that exited), else None."""
    return endpoint.died()


def _load(concurrency: int, rate: float) -> dict[str, Any]:
    """A load as stored: its concurrency (0: unlimited) and rate ("inf": all at once)."""
    return {"concurrency": concurrency,
            "rate": rate if 0 < rate < math.inf else "inf"}


# LoadGen's figures stored beside the family's own (same names, `loadgen_` first).
LOADGEN_FIGURES = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99")


def _loadgen(params: ServeLLMParams, endpoint: Endpoint, prompts: _Prompts, slo: SLO,
             chosen: _Load, details: dict[str, Any], out_dir: Path) -> list[Figure]:
    """MLPerf LoadGen's Server scenario with token latencies on the same engine, prompts
    and SLO, at the rate asked (or the rate the engine completed under the family's own
    load): its TTFT and TPOT percentiles as `loadgen_*` figures, its verdicts in details."""
    from accelbench.benchmarks.llm import loadgen_llm
    from accelbench.benchmarks.models.engines.packages import require

    require("mlperf_loadgen", "serve-llm's LoadGen comparison")
    measured = next((f.value for f in chosen.figures if f.name == "requests"), 0.0)
    qps = params.rate if params.rate > 0 else measured
    if not (qps > 0 and math.isfinite(qps)):
        chosen.warnings.append("LoadGen: not run, no request rate to run it at")
        return []
    plan = chosen.plan
    measured_prompts = [p for p, w in zip(plan.prompts, plan.warmup, strict=True) if not w]
    lengths = [m for m, w in zip(plan.max_tokens, plan.warmup, strict=True) if not w]
    try:
        result = loadgen_llm.run_server(
            endpoint, measured_prompts, [max(2, m) for m in lengths], qps=qps, slo=slo,
            min_duration=1.0, min_queries=params.requests,
            max_duration=max(60.0, 10 * params.requests / qps), out_dir=out_dir / "loadgen",
            warmup=params.warmup or max(params.concurrency, 2), api=params.api,
            request_timeout=params.request_timeout, stall_timeout=params.stall_timeout,
            api_key_env=params.api_key_env or None)
    except ValueError as exc:
        chosen.warnings.append(f"LoadGen: not run: {exc}")
        return []
    details["loadgen"] = result
    if not result.get("valid"):
        why = result.get("invalid_reason") or result.get("failure") or "see details.loadgen"
        chosen.warnings.append(f"LoadGen: result INVALID ({why})")
    return [Figure(f"loadgen_{name}", float(result[name]), "s", higher_is_better=False)
            for name in LOADGEN_FIGURES if isinstance(result.get(name), (int, float))]


def _canary(params: ServeLLMParams, endpoint: Endpoint) -> dict[str, Any]:
    if not params.canary:
        return {"checked": False, "why": "canary=false"}
    from accelbench.benchmarks.llm.engines import canary

    device = "cpu" if params.engine == URL else _device_of(endpoint)
    result = canary.check(endpoint, api_key_env=params.api_key_env or None, device=device)
    if not result.ok:
        raise CaseFailed(f"accuracy canary: {result.detail}",
                         details={"canary": result.as_dict(), "engine": endpoint.info()})
    return result.as_dict()


def _device_of(endpoint: Endpoint) -> str:
    """Where eager PyTorch's reference runs: the engine's own device."""
    return str(endpoint.options.get("device", "cpu"))


def _deadline(params: ServeLLMParams, plan: LoadPlan, concurrency: int) -> float:
    """How long the load generator may take: its arrivals, then every request's own
    deadline once per wave of the concurrency, and a margin."""
    waves = math.ceil(len(plan.prompts) / concurrency) if concurrency else 2
    last = plan.offsets[-1] if plan.offsets else 0.0
    return last + params.request_timeout * min(waves, 4) + 30.0


def _devices(engine_args: str) -> int:
    """The devices a started server spreads the model over (tensor and pipeline parallel
    sizes in its options), for throughput per device."""
    try:
        words = shlex.split(engine_args)
    except ValueError:
        return 1
    sizes = {"--tensor-parallel-size": 1, "-tp": 1, "--tp": 1, "--tp-size": 1,
             "--pipeline-parallel-size": 1, "-pp": 1}
    found = 1
    for i, word in enumerate(words):
        name, _, value = word.partition("=")
        if name in sizes:
            text = value or (words[i + 1] if i + 1 < len(words) else "1")
            if text.isdigit():
                found *= max(1, int(text))
    return found


def _headline_first(figures: list[Figure]) -> list[Figure]:
    rank = {name: i for i, name in enumerate(HEADLINE)}
    return sorted(figures, key=lambda f: rank.get(f.name, len(rank)))


def _per_token(records: Sequence[RequestRecord], window: float) -> list[float]:
    """The engine's seconds per output token over the measured window: one sample per
    process, so that the processes of a case give its interval and the power read over
    the window gives joules per output token."""
    tokens = sum(r.output_tokens or 0 for r in records if r.ok)
    return [window / tokens] if tokens > 0 and window > 0 else []


def _latencies(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    kept = records[:MAX_KEPT_LATENCIES]
    return {"ttft_s": [round(r.ttft or 0.0, 6) for r in kept],
            "e2e_s": [round(r.e2e or 0.0, 6) for r in kept],
            "output_tokens": [int(r.output_tokens or 0) for r in kept]}


BENCHMARK = Benchmark(
    name="serve-llm",
    family="llm",
    summary="An LLM serving engine under load: TTFT, TPOT, ITL and end-to-end latency "
            "percentiles, throughput and goodput at an SLO, sweeps to the SLO's knee",
    entry="accelbench.benchmarks.llm.declaration:measure",
    interleaves=False,  # an engine and a load generator process of their own
    params=PARAMS,
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    sources=tuple(f"accelbench.benchmarks.llm.{m}" for m in (
        "params", "records", "workload", "client", "metrics", "sweep", "engines.endpoint",
        "engines.server", "engines.inprocess", "engines.model_dir", "engines.canary",
        "loadgen_llm")),
    views=("accelbench.benchmarks.llm.view:sections",),
    typed=ServeLLMParams,
)

__all__ = ["BENCHMARK", "URL", "measure"]
