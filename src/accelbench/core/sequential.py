"""A/B on one machine: paired processes, judged after every round by an anytime-valid test.

`accelbench ab` measures each case in pairs of fresh processes, one under stack A and one
under stack B, back to back and in balanced order (A B, then B A, ...). The unit of
evidence is a pair: d = ln(B / A) of the case's headline figure, each side's value being
what one process measured. Whatever the host does on a scale longer than a pair (another
job starting, clocks, steal time) moves both members alike and cancels in d; the
alternating order turns a steady drift within a pair into noise of either sign rather
than a bias for one side.

The test is the anytime-valid ("safe") t-test: the Bayes factor of a Gaussian mean with
unknown variance, with a normal prior of variance `g` on the standardised effect and the
right-Haar prior 1/σ on the scale (Rouder et al. 2009, eq. 7; Lai 1976). Under "no
difference" it is a nonnegative martingale in the number of pairs (the scale-invariant
reduction: Pérez-Ortiz, Lardy, de Heide and Grünwald 2024), so by Ville's inequality the
chance it ever reaches 1/α, at any round one cares to look, is at most α. Inverted, it is
a confidence sequence for the mean of d, valid at every round at once: after each round
a case may stop, and the interval it stops with still holds with 1 - α. That is what lets
`ab` look after every round and stop each case as soon as it is decided, where a fixed-n
test looked at every round would raise false alarms far above α.

The verdict reads the interval of the speed ratio as `compare` does, with the minimum
effect δ, at two levels. An A/B judges many cases at once, and the question it is asked
in CI is whether *any* case changed, so a change is called from the interval at α / m
for m cases (Bonferroni: the chance of any false faster or slower among them is at most
α, however many rounds each case took); "same" is a statement about one case, called
from its own interval at α (a case truly changed by δ or more is called the same with a
chance of at most α):

- faster / slower: the interval at α / m excludes 1 and the change is at least δ;
- same: the whole interval at α lies within (1 - δ, 1 + δ);
- otherwise undecided: the case runs another round, and at the budget it is
  inconclusive, with the pairs a confidence sequence of its noise would need.

The price of looking at every round is a wider interval than a fixed-n t-test's at the
same n (about 1.8x at ten pairs); it buys stopping as soon as the answer is known. The
prior variance g sets where the interval is narrowest: g = 8 (an effect of about three
times the pairs' noise expected a priori, as a real change on a quiet pair is) gives a
finite interval from three pairs at α = 0.05 and from five at α = 0.05 / 20, where g = 2
needs four and six, at a cost of under 3% in width from ten pairs on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

FASTER = "faster"
SLOWER = "slower"
SAME = "same"
UNDECIDED = "undecided"  # goes on to another round
INCONCLUSIVE = "inconclusive"  # undecided at the budget

PRIOR_G = 8.0  # the prior variance of the standardised effect (see the module docstring)
MAX_PAIRS = 10_000  # "rounds needed" is not sought beyond this
# A measurement's details key where `ab` keeps each process's headline figure, in round
# order: the pairs are read back from the two runs' records.
PAIR_VALUES = "pair_values"
# And how its pairs ran: the two processes taking turns on the same CPUs (the host's
# drift cancels), one after the other (a case that runs a protocol of its own), or as
# two torchrun jobs one after the other (a distributed case).
PAIRING = "ab_pairing"
IN_TURNS, IN_SEQUENCE, IN_JOBS = "turns", "sequence", "jobs"


def case_alpha(alpha: float, cases: int) -> float:
    """The level each of `cases` cases is judged at, so that the chance of any false call
    among them is at most `alpha` (Bonferroni)."""
    return alpha / max(1, cases)


def boundary(pairs: int, alpha: float, g: float = PRIOR_G) -> float:
    """The t statistic (of the mean of `pairs` values against a hypothesised mean) beyond
    which the safe t-test's Bayes factor reaches 1/α: inf where it cannot yet reach it.

    The Bayes factor is (1 + ng)^(-1/2) ((1 + t²/ν) / (1 + t²/(ν(1 + ng))))^((ν+1)/2),
    ν = n - 1; it grows with t², so the boundary solves BF = 1/α for t² in closed form."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    nu = pairs - 1
    if nu < 1:
        return math.inf
    big = 1.0 + pairs * g
    k = math.exp((0.5 * math.log(big) - math.log(alpha)) * 2.0 / (nu + 1))
    if k >= big:  # even t -> infinity leaves the Bayes factor below 1/alpha
        return math.inf
    u = (k - 1.0) / (1.0 - k / big)
    return math.sqrt(nu * u)


def radius(pairs: int, sd: float, alpha: float, g: float = PRIOR_G) -> float:
    """Half the width of the confidence sequence for the mean after `pairs` pairs of
    standard deviation `sd`."""
    return boundary(pairs, alpha, g) * sd / math.sqrt(pairs) if pairs >= 2 else math.inf


@dataclass(frozen=True)
class PairedVerdict:
    """B over A for one case from its pairs: the ratio of the headline figure and the
    same as a speed (> 1 is B faster), each with the case's anytime-valid interval at
    level α; the speed's interval at the level a change call needs (α shared by the A/B's
    cases); the verdict, and for an undecided case the pairs its noise would need."""

    pairs: int
    ratio: float
    low: float
    high: float
    speed: float
    speed_low: float
    speed_high: float
    verdict: str
    sd: float | None  # of ln(B / A) between pairs; None below two pairs
    pairs_needed: int | None = None  # for an undecided case; None: not within MAX_PAIRS
    reason: str = ""
    call_low: float = 0.0  # the speed's interval at the change call's level
    call_high: float = math.inf

    @property
    def change(self) -> float:
        """+0.12 is 12% faster, -0.08 is 8% slower."""
        return self.speed - 1.0

    @property
    def decided(self) -> bool:
        return self.verdict in (FASTER, SLOWER, SAME)

    def regressed_by(self, fraction: float) -> bool:
        """Decided slower by at least `fraction` (0.05 for 5%)."""
        return (self.verdict == SLOWER and self.speed <= 1.0 - fraction + 1e-12
                and self.call_high < 1.0)

    def may_have_regressed_by(self, fraction: float) -> bool:
        """Not decided, and a slowdown of `fraction` lies within its interval: a gate at
        `fraction` can neither pass nor fail it."""
        return not self.decided and self.call_low <= 1.0 - fraction + 1e-12

    def to_dict(self) -> dict[str, object]:
        return {"pairs": self.pairs, "ratio": _finite(self.ratio),
                "ratio_ci": [_finite(self.low), _finite(self.high)],
                "speedup": _finite(self.speed),
                "speedup_ci": [_finite(self.speed_low), _finite(self.speed_high)],
                "speedup_call_ci": [_finite(self.call_low), _finite(self.call_high)],
                "change_pct": _finite(100.0 * self.change), "verdict": self.verdict,
                "sd": self.sd, "pairs_needed": self.pairs_needed,
                "reason": self.reason or None}


def judge(a: Sequence[float], b: Sequence[float], higher_is_better: bool, min_effect: float,
          alpha: float, final: bool = False, g: float = PRIOR_G, cases: int = 1
          ) -> PairedVerdict:
    """The verdict on pairs (a[i], b[i]) of one case's headline figure, each pair measured
    back to back, the case one of `cases` judged together; `final` at the budget, where
    an undecided case is inconclusive.

    A change (faster, slower) is called only from the interval at α / cases, so that the
    chance of any false call among the cases is at most α; "same" is called from the
    case's own interval at α, so that a case truly changed by the minimum effect or more
    is called the same with a chance of at most α."""
    if len(a) != len(b):
        raise ValueError("a and b must hold the same number of pairs")
    pairs = [(x, y) for x, y in zip(a, b, strict=True)
             if math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0]
    n = len(pairs)
    undecided = INCONCLUSIVE if final else UNDECIDED
    if n == 0:
        return PairedVerdict(0, math.nan, 0.0, math.inf, math.nan, 0.0, math.inf, undecided,
                             None, None, "no pair with a positive figure on both sides")
    d = [math.log(y / x) for x, y in pairs]
    mean = math.fsum(d) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in d) / (n - 1)) if n >= 2 else None
    call_alpha = case_alpha(alpha, cases)
    r = radius(n, sd, alpha, g) if sd is not None else math.inf
    r_call = radius(n, sd, call_alpha, g) if sd is not None else math.inf
    ratio, low, high = math.exp(mean), _exp(mean - r), _exp(mean + r)
    speed, speed_low, speed_high = _as_speed(mean, r, higher_is_better)
    _, call_low, call_high = _as_speed(mean, r_call, higher_is_better)
    verdict = _verdict(speed, call_low, call_high, speed_low, speed_high, min_effect)
    needed, reason = None, ""
    if verdict == UNDECIDED:
        verdict = undecided
        needed = (pairs_needed(mean, sd, min_effect, alpha, g, call_alpha)
                  if sd is not None else None)
        reason = _why_undecided(n, sd, needed)
    return PairedVerdict(n, ratio, low, high, speed, speed_low, speed_high, verdict, sd,
                         needed, reason, call_low, call_high)


def _as_speed(mean: float, r: float, higher_is_better: bool) -> tuple[float, float, float]:
    """The speed (> 1: B faster) and its interval, of a mean ln(B / A) ± r."""
    sign = 1.0 if higher_is_better else -1.0
    return math.exp(sign * mean), _exp(sign * mean - r), _exp(sign * mean + r)


def _verdict(speed: float, call_low: float, call_high: float, low: float, high: float,
             min_effect: float) -> str:
    if (call_low > 1.0 or call_high < 1.0) and abs(speed - 1.0) >= min_effect - 1e-12:
        return FASTER if speed > 1.0 else SLOWER
    if low > 1.0 - min_effect and high < 1.0 + min_effect:
        return SAME
    return UNDECIDED


def pairs_needed(mean: float, sd: float, min_effect: float, alpha: float,
                 g: float = PRIOR_G, call_alpha: float | None = None) -> int | None:
    """The fewest pairs at which a case with this mean and noise (ln(B / A)) would be
    decided, were they to stay as they are: its interval at `call_alpha` (default α)
    narrow enough to exclude no change when the change is beyond the minimum effect, or
    its interval at α narrow enough to lie within the minimum effect when it is not; None
    beyond MAX_PAIRS."""
    band = math.log1p(min_effect) if min_effect > 0 else 0.0
    if abs(mean) >= band:
        needed_radius, level = abs(mean), call_alpha or alpha
    else:
        needed_radius, level = band - abs(mean), alpha
    if needed_radius <= 0:
        return None
    if sd <= 0:
        return 4
    lo, hi = 2, MAX_PAIRS
    if radius(hi, sd, level, g) >= needed_radius:
        return None
    while lo < hi:  # the radius shrinks with n from where it is finite
        mid = (lo + hi) // 2
        if radius(mid, sd, level, g) < needed_radius:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _why_undecided(n: int, sd: float | None, needed: int | None) -> str:
    if sd is None:
        return f"{n} pair so far; at least 2 tell the noise"
    noise = f"pairs differ by ±{100.0 * math.expm1(sd):.1f}% (sd)"
    if needed is None:
        return f"{noise}: more than {MAX_PAIRS} pairs would be needed at this noise"
    return f"{noise}: about {needed} pairs would decide it at this noise"


def _exp(x: float) -> float:
    if x == math.inf:
        return math.inf
    if x == -math.inf:
        return 0.0
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
