"""What a load asks of an engine: how long the prompts and the answers are, which tokens
the prompts hold, and when each request arrives.

Everything here is drawn from a seed, so that two runs (and two engines) get the same
requests at the same moments. Conventions follow vLLM's `benchmark_serving`:

- Arrivals: the gaps between requests are drawn from a gamma distribution of shape
  `burstiness` and mean `1 / rate` (burstiness 1 is a Poisson process; below 1 the
  requests come in bursts, above 1 more evenly); the first request arrives at 0. A rate
  of `math.inf` sends every request at once.
- Ramp-up: with `ramp_up` seconds, the rate rises linearly from a tenth of `rate` to
  `rate` over the first `ramp_up` seconds, then stays. The same gamma gaps are drawn (in
  units of the mean gap) and laid on the clock through the inverse of the cumulative rate,
  so a Poisson load stays Poisson, only slower at first.
- Prompts are random token ids from the ids given (a tokenizer's ids that are safe in a
  prompt); with a shared prefix of K tokens, every prompt starts with the same K tokens
  (a system prompt, as for a prefix cache), then its own random tokens up to its length.
  Warm-up prompts share the prefix too: a served system prompt is cached in steady state.
- Warm-up and measured requests are drawn from separate streams of the seed, so the
  measured requests do not change with the number of warm-up requests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A normal length is clipped to [1, mean + NORMAL_TAIL * sd], so that `largest` bounds every
# sample (a context length is sized by it); a draw beyond 4 sd happens once in 30,000.
NORMAL_TAIL = 4.0
RAMP_START = 0.1  # a ramp-up starts at this share of the rate

_FIXED = re.compile(r"\s*(\d+)\s*")
_UNIFORM = re.compile(r"\s*uniform\s*:\s*(\d+)\s*-\s*(\d+)\s*")
_NORMAL = re.compile(r"\s*normal\s*:\s*([0-9.eE+]+)\s*,\s*([0-9.eE+]+)\s*")


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts: `fixed` (low), `uniform` (low..high, both
    included) or `normal` (mean, sd; rounded, clipped to [1, mean + 4 sd])."""

    kind: str
    low: float
    high: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Lengths:
        """ "128", "uniform:64-256" or "normal:128,16"; ValueError (one line) otherwise."""
        if m := _FIXED.fullmatch(text):
            n = int(m.group(1))
            if n < 1:
                raise ValueError(f"length {text!r} must be at least 1")
            return cls("fixed", n, n)
        if m := _UNIFORM.fullmatch(text):
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo < 1 or hi < lo:
                raise ValueError(f"lengths {text!r}: need 1 <= low <= high")
            return cls("uniform", lo, hi)
        if m := _NORMAL.fullmatch(text):
            try:
                mean, sd = float(m.group(1)), float(m.group(2))
            except ValueError:
                mean = sd = math.nan
            if not (math.isfinite(mean) and math.isfinite(sd)) or mean < 1 or sd < 0:
                raise ValueError(f"lengths {text!r}: need a mean >= 1 and a sd >= 0")
            return cls("normal", mean, sd)
        raise ValueError(f"lengths {text!r}: expected N, uniform:LOW-HIGH or normal:MEAN,SD")

    def __str__(self) -> str:
        if self.kind == "fixed":
            return str(int(self.low))
        if self.kind == "uniform":
            return f"uniform:{int(self.low)}-{int(self.high)}"
        return f"normal:{self.low:g},{self.high:g}"

    @property
    def largest(self) -> int:
        """The largest length `sample` can return."""
        if self.kind == "normal":
            return max(1, math.floor(self.low + NORMAL_TAIL * self.high))
        return int(self.high)

    @property
    def smallest(self) -> int:
        return 1 if self.kind == "normal" else int(self.low)

    def sample(self, rng: np.random.Generator, n: int) -> list[int]:
        if self.kind == "fixed":
            return [int(self.low)] * n
        if self.kind == "uniform":
            return [int(x) for x in rng.integers(int(self.low), int(self.high) + 1, size=n)]
        drawn = np.rint(rng.normal(self.low, self.high, size=n))
        return [int(x) for x in np.clip(drawn, 1, self.largest)]


@dataclass(frozen=True)
class Arrivals:
    """When requests arrive: `rate` requests per second on average (`math.inf`: all at
    once), gaps of gamma shape `burstiness` (1: Poisson), and a linear ramp from a tenth
    of the rate over the first `ramp_up` seconds (0: none)."""

    rate: float
    burstiness: float = 1.0
    ramp_up: float = 0.0

    def __post_init__(self) -> None:
        if not self.rate > 0:  # also refuses NaN
            raise ValueError(f"request rate {self.rate} must be above 0 (inf: all at once)")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise ValueError(f"burstiness {self.burstiness} must be a number above 0")
        if not (self.ramp_up >= 0 and math.isfinite(self.ramp_up)):
            raise ValueError(f"ramp-up {self.ramp_up} must be 0 or more seconds")


def _clock_time(expected: np.ndarray, rate: float, ramp_up: float) -> np.ndarray:
    """The times at which the cumulative rate reaches `expected` arrivals: the inverse of
    Lambda(t) = rate * (a t + (1 - a) t^2 / (2 R)) for t < R, with a = RAMP_START, and
    Lambda(R) + rate (t - R) after."""
    if ramp_up <= 0:
        return expected / rate
    a, r = RAMP_START, ramp_up
    in_ramp = rate * r * (1 + a) / 2  # arrivals expected during the ramp
    quad = (1 - a) / (2 * r)
    u = expected / rate
    ramp = (-a + np.sqrt(a * a + 4 * quad * u)) / (2 * quad)
    after = r + (expected - in_ramp) / rate
    return np.where(expected < in_ramp, ramp, after)


def arrival_offsets(n: int, arrivals: Arrivals, seed: int) -> list[float]:
    """Seconds from the start of the load at which each of `n` requests is sent."""
    if n <= 0:
        return []
    if math.isinf(arrivals.rate):
        return [0.0] * n
    rng = np.random.default_rng([seed, 3])
    b = arrivals.burstiness
    gaps = rng.gamma(shape=b, scale=1.0 / b, size=n - 1)  # in mean gaps
    expected = np.concatenate(([0.0], np.cumsum(gaps)))
    return [float(t) for t in _clock_time(expected, arrivals.rate, arrivals.ramp_up)]


@dataclass(frozen=True)
class PlannedRequest:
    prompt_ids: tuple[int, ...]
    max_tokens: int
    warmup: bool


def plan_requests(count: int, warmup: int, input_lengths: Lengths, output_lengths: Lengths,
                  token_ids: Sequence[int], shared_prefix: int, seed: int,
                  ) -> list[PlannedRequest]:
    """`warmup` warm-up requests (not measured), then `count` measured ones.

    A prompt is never shorter than the shared prefix plus one token of its own, so that
    no two prompts are the same; a prefix as long as the longest prompt is refused.
    """
    if count < 0 or warmup < 0:
        raise ValueError("the numbers of requests must be 0 or more")
    if shared_prefix < 0:
        raise ValueError(f"shared prefix {shared_prefix} must be 0 or more tokens")
    if shared_prefix and shared_prefix >= input_lengths.largest:
        raise ValueError(f"a shared prefix of {shared_prefix} tokens leaves no room in "
                         f"prompts of {input_lengths} tokens")
    ids = np.asarray(token_ids, dtype=np.int64)
    if ids.size == 0:
        raise ValueError("no token ids to draw prompts from")
    prefix = tuple(int(t) for t in np.random.default_rng([seed, 2]).choice(ids, shared_prefix))

    def draw(n: int, stream: int, is_warmup: bool) -> list[PlannedRequest]:
        rng = np.random.default_rng([seed, stream])
        inputs = input_lengths.sample(rng, n)
        outputs = output_lengths.sample(rng, n)
        planned = []
        for length, max_tokens in zip(inputs, outputs, strict=True):
            own = max(length, shared_prefix + 1) - shared_prefix
            rest = tuple(int(t) for t in rng.choice(ids, own))
            planned.append(PlannedRequest(prefix + rest, max_tokens, is_warmup))
        return planned

    return draw(warmup, 1, True) + draw(count, 0, False)
