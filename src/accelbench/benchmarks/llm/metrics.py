"""The figures of a load from its request records, as vLLM's `benchmark_serving` defines
them, each with an interval where the records can give an honest one.

Conventions (vLLM's, unless said):
- Only measured requests count: warm-up requests are left out of every figure.
- A request completed when its stream ended without an error and carried at least one
  piece of output text; any other measured request failed (`failed`). Latency figures
  are over the completed requests alone. If every request failed, `figures` raises
  ValueError naming the most common error.
- TTFT = arrival of the first piece with output text - the time its request was written.
- TPOT of a request = (E2E - TTFT) / (output tokens - 1), for requests with more than
  one output token (and a token count); its figures are over requests.
- ITL = the gaps between consecutive pieces with output text, every request's pooled (a
  piece that carries several tokens is one gap, as vLLM counts it).
- E2E = end of the stream - the time its request was written.
- The window is the first measured request's send to the last measured request's end;
  `requests`, `output_tokens` and `total_tokens` (prompt and output) are completed
  requests and their tokens over it (vLLM takes the whole benchmark's wall time).
- Goodput (vLLM's `--goodput`): the completed requests whose TTFT, TPOT and E2E are each
  within the SLO's bound, where a bound is given (a request of one output token has
  TPOT 0; one without a token count cannot show its TPOT and does not count), per second
  of the window; `goodput_tokens` their output tokens per second; `slo_met` their share
  of the measured requests (failed ones included), in %. Without a bound, none of the
  three is given.
- `tokens_per_user` (InferenceX's interactivity): the mean over requests of
  (output tokens - 1) / (E2E - TTFT), the decode speed one user sees.
- `output_tokens_per_device`: `output_tokens` over the devices serving.
- `energy_per_token`: the energy given over the output tokens (J/token).
Token figures are left out where a completed request has no token count (an engine
without usage and no tokenizer); `total_tokens` where one has no prompt count.

Intervals (at `confidence`; none with fewer than MIN_REQUESTS completed requests) are
where a repeat run's figure is expected to fall, as `core.between` states a case's
interval: a second run brings noise of its own, so each is a confidence interval of the
true value widened by sqrt(2) (a percentile's: taken from half the count):
- percentiles from order statistics (distribution-free: the binomial argument of
  `core.stats.median_ci`, for any quantile). Requests under load are not independent
  (a queue makes neighbours alike; the gaps of one request are alike), so the values,
  in the order they happened, count as many independent ones as their autocorrelation
  time allows (Geyer's estimator, as MCMC's effective sample size; `effective_count`);
  a percentile too extreme for that many values has no interval;
- means: a t interval on the same effective count. What one load cannot show is a
  correlation as long as itself: near an engine's capacity a queue keeps latencies
  alike over hundreds of requests, and a short load then understates its interval. In a
  simulated FIFO server, a repeat run's mean time in system fell inside the interval
  92% of the time at half capacity over 1000 requests (85% over 300; 52% taking the
  values as independent), and 86% at 80% of capacity over 1000 (76% over 300): measure
  long loads near capacity;
- rates: batch means over SLICES equal time slices of the window (a t interval with
  SLICES - 1 degrees of freedom); a request counts in the slice of its end, its output
  tokens spread over the times their pieces arrived, its prompt tokens at its first;
- `slo_met`: Clopper-Pearson, of half the requests.
The headline figure (the first) is `output_tokens` where tokens were counted, else
`requests`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from accelbench.benchmarks.llm.records import RequestRecord
from accelbench.core.measurement import Figure

CONFIDENCE = 0.95
SLICES = 10  # time slices of the window for batch means
MIN_REQUESTS = 10  # completed requests below which no figure has an interval
# A repeat run's figure differs from this one's by two runs' noise: sqrt(2) times one's.
REPEAT = math.sqrt(2.0)
PERCENTILES = (50, 90, 99)
LATENCIES = ("ttft", "tpot", "itl", "e2e")
SLO_NAMES = ("ttft", "tpot", "e2e")

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_BOUND = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s)\s*$")

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SLO:
    """Latency bounds a request must meet to count as good (seconds; None: no bound)."""

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None

    @classmethod
    def parse(cls, text: str) -> SLO:
        """`"ttft:500ms,tpot:50ms"` (each of ttft, tpot, e2e at most once, with a unit of
        us, ms or s); `""` or `"none"`: no bound."""
        if text.strip().lower() in ("", "none"):
            return cls()
        bounds: dict[str, float] = {}
        for part in text.split(","):
            name, sep, value = part.partition(":")
            name = name.strip().lower()
            if not sep or name not in SLO_NAMES:
                raise ValueError(f"SLO {text!r}: each part is NAME:TIME with NAME one of "
                                 "ttft, tpot, e2e (e.g. ttft:500ms,tpot:50ms)")
            if name in bounds:
                raise ValueError(f"SLO {text!r}: {name} given twice")
            match = _BOUND.match(value)
            if match is None:
                raise ValueError(f"SLO {text!r}: {value.strip()!r} is not a time with a unit "
                                 "(us, ms or s), e.g. 500ms")
            seconds = float(match.group(1)) * _UNITS[match.group(2)]
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"SLO {text!r}: {name} must be a positive time")
            bounds[name] = seconds
        return cls(**bounds)

    @property
    def bounds(self) -> dict[str, float]:
        """The bounds given, by name."""
        return {n: v for n in SLO_NAMES if (v := getattr(self, n)) is not None}

    def met(self, ttft: float, tpot: float | None, e2e: float) -> bool:
        """Whether a request of these latencies is good (tpot None: not known)."""
        seen = {"ttft": ttft, "tpot": tpot, "e2e": e2e}
        for name, bound in self.bounds.items():
            value = seen[name]
            if value is None or value > bound:
                return False
        return True

    def to_dict(self) -> dict[str, float | None]:
        return {"ttft": self.ttft, "tpot": self.tpot, "e2e": self.e2e}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SLO:
        d = d or {}
        return cls(*(None if d.get(n) is None else float(d[n]) for n in SLO_NAMES))

    def __str__(self) -> str:
        """The text `parse` reads back: `ttft:500ms,tpot:50ms`; "" without a bound."""
        return ",".join(f"{n}:{_bound_text(v)}" for n, v in self.bounds.items())


def _bound_text(seconds: float) -> str:
    return f"{seconds:.12g}s" if seconds >= 1 else f"{seconds * 1e3:.12g}ms"


# -- figures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Done:
    """A completed request's figures."""

    record: RequestRecord
    ttft: float
    e2e: float
    tpot: float | None  # None: one output token or no count
    good: bool


def figures(records: Sequence[RequestRecord], *, slo: SLO, devices: int = 1,
            energy_j: float | None = None, confidence: float = CONFIDENCE) -> list[Figure]:
    """The figures of a load (see the module's docstring), the headline first."""
    measured = [r for r in records if not r.warmup]
    if not measured:
        raise ValueError("no measured request")
    done: list[_Done] = []
    errors: list[str] = []
    for r in measured:
        why = failure(r)
        if why is not None:
            errors.append(why)
            continue
        ttft, e2e = r.ttft, r.e2e
        assert ttft is not None and e2e is not None
        tokens = r.output_tokens
        tpot = (e2e - ttft) / (tokens - 1) if tokens is not None and tokens > 1 else None
        seen_tpot = 0.0 if tokens is not None and tokens <= 1 else tpot
        done.append(_Done(r, ttft, e2e, tpot, slo.met(ttft, seen_tpot, e2e)))
    if not done:
        common = Counter(errors).most_common(1)[0][0]
        raise ValueError(f"every request failed: {common}")
    start = min(r.sent for r in measured)
    end = max(max((r.end for r in measured if r.end is not None), default=start),
              max(d.record.chunk_times[-1] for d in done))
    window = end - start
    k = SLICES if len(done) >= MIN_REQUESTS else 0
    # In the order they were sent: how alike neighbours are tells what they are worth.
    done.sort(key=lambda d: (d.record.sent, d.record.index))
    out: list[Figure] = []

    counted = all(d.record.output_tokens is not None for d in done)
    rates: list[Figure] = []
    if window > 0:
        ends = [d.record.end for d in done if d.record.end is not None]
        rates.append(_rate("requests", [(t, 1.0) for t in ends], start, window, k,
                           "request/s", confidence))
        if counted:
            events = _token_events([d.record for d in done])
            output = _rate("output_tokens", events, start, window, k, "token/s", confidence)
            rates.insert(0, output)
            if all(d.record.prompt_tokens is not None for d in done):
                prompts = [(d.record.chunk_times[0], float(d.record.prompt_tokens or 0))
                           for d in done]
                rates.append(_rate("total_tokens", events + prompts, start, window, k,
                                   "token/s", confidence))
            rates.append(_scaled(output, "output_tokens_per_device", 1.0 / max(devices, 1)))
    out += rates

    decode = [(d.record.output_tokens - 1) / (d.e2e - d.ttft) for d in done
              if d.record.output_tokens is not None and d.record.output_tokens > 1
              and d.e2e > d.ttft]
    if decode:
        low, high = (mean_interval(np.array(decode), confidence)
                     if len(done) >= MIN_REQUESTS else (None, None))
        out.append(Figure("tokens_per_user", float(np.mean(decode)), "token/s", True, None,
                          low, high))

    if slo.bounds:
        good = [d for d in done if d.good]
        if window > 0:
            out.append(_rate("goodput", [(d.record.end or end, 1.0) for d in good], start,
                             window, k, "request/s", confidence))
            if counted:
                out.append(_rate("goodput_tokens", _token_events([d.record for d in good]),
                                 start, window, k, "token/s", confidence))
        low, high = (clopper_pearson(len(good), len(measured), confidence, repeat=True)
                     if len(done) >= MIN_REQUESTS else (None, None))
        out.append(Figure("slo_met", 100.0 * len(good) / len(measured), "%", True, None,
                          None if low is None else 100.0 * low,
                          None if high is None else 100.0 * high))

    # Each in the order it happened (ITL: request by request, each one's gaps in turn).
    latency: dict[str, Array] = {
        "ttft": np.array([d.ttft for d in done]),
        "tpot": np.array([d.tpot for d in done if d.tpot is not None]),
        "itl": np.array([g for d in done for g in np.diff(d.record.chunk_times)]),
        "e2e": np.array([d.e2e for d in done]),
    }
    enough = len(done) >= MIN_REQUESTS
    for name in LATENCIES:
        values = latency[name]
        if values.size == 0:
            continue
        low, high = mean_interval(values, confidence) if enough else (None, None)
        out.append(Figure(f"{name}_mean", float(np.mean(values)), "s", False, None, low, high))
        for p in PERCENTILES:
            low, high = (percentile_interval(values, p / 100.0, confidence)
                         if enough else (None, None))
            out.append(Figure(f"{name}_p{p}", float(np.percentile(values, p)), "s", False,
                              None, low, high))

    out.append(Figure("failed", float(len(measured) - len(done)), "request", False))
    if energy_j is not None and counted:
        produced = sum(d.record.output_tokens or 0 for d in done)
        if produced > 0:
            out.append(Figure("energy_per_token", energy_j / produced, "J/token", False))
    return out


def failure(record: RequestRecord) -> str | None:
    """Why a request counts as failed, in one line; None if it completed."""
    if record.error is not None:
        return record.error
    if record.end is None:
        return "the stream did not end"
    if not record.chunk_times:
        return "no output text"
    return None


def _token_events(records: Sequence[RequestRecord]) -> list[tuple[float, float]]:
    """Each request's output tokens spread evenly over the times their pieces arrived."""
    events = []
    for r in records:
        share = (r.output_tokens or 0) / len(r.chunk_times)
        events += [(t, share) for t in r.chunk_times]
    return events


def _rate(name: str, events: Sequence[tuple[float, float]], start: float, window: float,
          k: int, unit: str, confidence: float) -> Figure:
    """Events (time, amount) per second of the window, with a batch-means repeat-run
    interval over k equal slices of it (none when k < 2)."""
    total = sum(a for _, a in events)
    value = total / window
    if k < 2:
        return Figure(name, value, unit)
    times = np.array([t for t, _ in events], dtype=float)
    slices = np.minimum(((times - start) / window * k).astype(int), k - 1).clip(0)
    per = np.bincount(slices, weights=np.array([a for _, a in events], dtype=float),
                      minlength=k) * (k / window)
    se = float(np.std(per, ddof=1)) / math.sqrt(k) * REPEAT
    half = _t_half(se, k - 1, confidence)
    return Figure(name, value, unit, True, None, max(value - half, 0.0), value + half)


def _scaled(f: Figure, name: str, factor: float) -> Figure:
    return Figure(name, f.value * factor, f.unit, f.higher_is_better, None,
                  None if f.low is None else f.low * factor,
                  None if f.high is None else f.high * factor)


def _t_half(se: float, df: float, confidence: float) -> float:
    from scipy.special import stdtrit  # scipy.stats.t.ppf (see core.stats on the import)

    return float(stdtrit(df, 1.0 - (1.0 - confidence) / 2.0)) * se


# -- intervals ---------------------------------------------------------------------------


def autocorrelation_time(series: Array) -> float:
    """How many neighbouring values of `series` are worth one independent value: the
    integrated autocorrelation time 1 + 2 sum(rho_k), by Geyer's initial monotone
    sequence estimator (the sums of pairs of autocorrelations, while positive and
    falling); never below 1, so that no value counts for more than one."""
    n = series.size
    if n < 4:
        return 1.0
    centred = series - float(np.mean(series))
    if not np.any(centred):
        return 1.0
    spectrum = np.fft.rfft(centred, 2 * n)
    autocov = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    rho = autocov / autocov[0]
    pairs = rho[0:n - 1:2][: (n - 1) // 2] + rho[1:n:2][: (n - 1) // 2]
    stop = int(np.argmax(pairs <= 0)) if np.any(pairs <= 0) else pairs.size
    pairs = np.minimum.accumulate(pairs[:stop])
    return max(float(-1.0 + 2.0 * np.sum(pairs)), 1.0)


def effective_count(values: Array, q: float, *, ordered: bool = True) -> float:
    """How many independent values `values` (in the order they happened, if `ordered`)
    are worth for its q-quantile: the count over the autocorrelation time of whether each
    lies below the quantile, taken at q held within [0.1, 0.9] (past an extreme
    quantile too few values fall for their correlation to be read)."""
    n = values.size
    if not ordered or n == 0:
        return float(n)
    level = min(max(q, 0.1), 0.9)
    below = (values <= np.quantile(values, level)).astype(float)
    return n / autocorrelation_time(below)


def percentile_interval(values: Array, q: float, confidence: float = CONFIDENCE, *,
                        ordered: bool = True, repeat: bool = True
                        ) -> tuple[float | None, float | None]:
    """A distribution-free interval of the q-quantile: order statistics [x(r), x(s)]
    with P(r <= B <= s - 1) >= confidence, B ~ Binomial(m, q), m the effective count
    (`effective_count`), halved for a repeat run's interval (`repeat`: the difference of
    two independent estimates varies twice as much as one); the ranks are scaled to the
    values when m is smaller than their count. (None, None) where no rank reaches the
    confidence (too few values for so extreme a q)."""
    from scipy.special import bdtr  # scipy.stats.binom.cdf

    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    worth = effective_count(np.asarray(values, dtype=float), q, ordered=ordered)
    m = math.floor(worth / 2.0 if repeat else worth)
    if m < 1:
        return None, None
    alpha = 1.0 - confidence
    cdf = bdtr(np.arange(m + 1), m, q)
    r = int(np.searchsorted(cdf, alpha / 2.0, side="right"))  # F(r - 1) <= alpha/2
    s = int(np.searchsorted(cdf, 1.0 - alpha / 2.0, side="left")) + 1  # F(s - 1) >= 1-a/2
    if r < 1 or s > m:
        return None, None
    low = max(math.floor(r * n / m), 1)
    high = min(math.ceil(s * n / m), n)
    return float(x[low - 1]), float(x[high - 1])


def mean_interval(values: Array, confidence: float = CONFIDENCE, *, ordered: bool = True,
                  repeat: bool = True) -> tuple[float | None, float | None]:
    """A t interval of the mean of `values` (in the order they happened, if `ordered`:
    its standard error and degrees of freedom from the effective count, the count over
    the autocorrelation time), times sqrt(2) for a repeat run's interval (`repeat`)."""
    n = values.size
    if n < 2:
        return None, None
    mean = float(np.mean(values))
    worth = n / autocorrelation_time(values) if ordered else float(n)
    se = float(np.std(values, ddof=1)) / math.sqrt(worth)
    half = _t_half(se * (REPEAT if repeat else 1.0), max(worth - 1.0, 1.0), confidence)
    return mean - half, mean + half


def clopper_pearson(successes: float, trials: float, confidence: float = CONFIDENCE, *,
                    repeat: bool = False) -> tuple[float | None, float | None]:
    """The exact binomial interval of a share; for a repeat run's share (`repeat`), that
    of half as many trials (twice the variance)."""
    from scipy.special import betaincinv  # scipy.stats.beta.ppf(p, a, b)

    if repeat:
        successes, trials = successes / 2.0, trials / 2.0
    if trials <= 0:
        return None, None
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0 else float(betaincinv(successes, trials - successes + 1,
                                                      alpha / 2))
    high = 1.0 if successes == trials else float(betaincinv(successes + 1,
                                                            trials - successes,
                                                            1 - alpha / 2))
    return low, high
