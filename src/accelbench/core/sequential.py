"""A/B on one machine: paired processes, judged after every round by repeated t-tests
whose boundaries are calibrated for looking after every round.

`accelbench ab` measures each case in pairs of fresh processes, one under stack A and one
under stack B, back to back and in balanced order (A B, then B A, ...). The unit of
evidence is a pair: d = ln(B / A) of the case's headline figure, each side's value being
what one process measured. Whatever the host does on a scale longer than a pair (another
job starting, clocks, steal time) moves both members alike and cancels in d; the
alternating order turns a steady drift within a pair into noise of either sign rather
than a bias for one side.

The test is a group-sequential one: a t-test on the pairs after every round from the
third pair on, up to the A/B's most rounds (its horizon), each look at the same nominal
level (Pocock's design), that level chosen so that the chance of crossing at *any* look
is α (Jennison and Turnbull 2000, ch. 11, repeated t-tests). Under Gaussian pair noise the
sequence of t statistics is free of the noise's scale and of the mean tested against, so
that level is found once, by a seeded simulation of normal pairs (`nominal_level`), for
any case. Inverted, the boundaries give repeated confidence intervals: intervals that
hold with 1 - α at every round at once, so a case may stop at any round, and the interval
it stops with still holds. A fixed-n t-test looked at every round would raise false
alarms far above α.

The verdict reads the intervals of the speed ratio as `compare` does, with the minimum
effect δ. An A/B judges many cases at once, and the question it is asked in CI is whether
*any* case changed, so a change is called from the two-sided interval at α / k, k being
the cases not yet called faster or slower: Holm's step-down, made sequential (Bartroff
and Lai 2010, `step_down`). It starts at α / m for m cases (Bonferroni), and each case
called frees its share for the others, so that where a stack changes many cases, each
call makes the next easier; the chance of any false faster or slower among them stays
at most α, however many rounds each case took. "Same" is a statement about one case,
called as an equivalence test is (two one-sided tests, each at α): from the case's
repeated interval whose each bound holds with 1 - α, so that a case truly changed by δ
or more is called the same with a chance of at most α:

- faster / slower: the interval at α / k excludes 1 and the change is at least δ;
- same: the case's interval lies within (1 - δ, 1 + δ);
- otherwise undecided: the case runs another round, and at the budget it is
  inconclusive, with the pairs its noise would need.

Why this test and not an always-valid one (the safe t-test, a confidence sequence for
an unbounded number of looks): an A/B has a horizon, its most rounds, and a boundary
made for that horizon is narrower where an A/B spends its rounds. At nine pairs, the
"same" bound here is t = 3.1 against the safe t-test's 4.2 (g = 8), so a quiet case is
called the same with about half the pairs; the change call at α / 22 gains less (6.4
against 6.8). Beyond the horizon, nothing is judged (`boundary` is infinite there).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FASTER = "faster"
SLOWER = "slower"
SAME = "same"
UNDECIDED = "undecided"  # goes on to another round
INCONCLUSIVE = "inconclusive"  # undecided at the budget

FIRST_LOOK = 3  # the first number of pairs judged (two tell the noise with one degree)
HORIZON = 20  # the rounds an A/B runs at most, unless it asks otherwise
MAX_HORIZON = 200  # the most rounds a boundary is calibrated for
MAX_PAIRS = 10_000  # "pairs needed" is not sought beyond this
# The nominal level's simulation: enough normal pair sequences for about this many to
# cross at the level sought (at least SIM_MIN_PATHS, at most SIM_MAX_PATHS), and the
# level taken where SIM_MARGIN x α of them cross, so that the simulation's own error
# (about 3% at 1,500 crossings) cannot take the attained rate above α.
SIM_CROSSINGS = 1_500
SIM_MIN_PATHS = 200_000
SIM_MAX_PATHS = 2_000_000
SIM_MARGIN = 0.9
SIM_SEED = 20261207
_SIM_CHUNK = 50_000
# A measurement's details key where `ab` keeps each process's headline figure, in round
# order: the pairs are read back from the two runs' records.
PAIR_VALUES = "pair_values"
# And how its pairs ran: the two processes taking turns on the same CPUs (the host's
# drift cancels), one after the other (a case that runs a protocol of its own), or as
# two torchrun jobs one after the other (a distributed case).
PAIRING = "ab_pairing"
# And the cases α was shared by when the case was last judged (`step_down`): a change is
# called at α / that.
SHARES = "ab_alpha_shares"
IN_TURNS, IN_SEQUENCE, IN_JOBS = "turns", "sequence", "jobs"


def case_alpha(alpha: float, cases: int) -> float:
    """The level each of `cases` cases is judged at, so that the chance of any false call
    among them is at most `alpha` (Bonferroni)."""
    return alpha / max(1, cases)


def step_down(active: Sequence[int], total: int, called: int,
              judge_at: Callable[[int, int], PairedVerdict | None]
              ) -> dict[int, tuple[PairedVerdict | None, int]]:
    """One round's verdicts on the `active` cases of an A/B of `total` cases, `called` of
    them called faster or slower in earlier rounds: Holm's step-down made sequential
    (Bartroff and Lai 2010). `judge_at(case, shares)` judges a case with α shared by
    `shares` cases: those not called yet. Each call in the round frees its share, and
    the cases still undecided are judged again at the larger level, until a pass calls
    none. Returns each active case's last verdict and the shares it was judged with.

    Why the chance of any false call stays at most α: of m cases, let m0 not differ. Until
    the first of them is called, only changed cases have been called, at most m - m0,
    so every look at one of the m0 was at α / m0 or below; and the chance that any of the
    m0 ever crosses its repeated boundary at α / m0 is at most m0 x α / m0. A case called
    "same" or stopped as futile frees nothing: it may be one of the m0."""
    verdicts: dict[int, tuple[PairedVerdict | None, int]] = {}
    waiting = list(active)
    while waiting:
        shares = max(1, total - called)
        new = 0
        for case in list(waiting):
            verdict = judge_at(case, shares)
            verdicts[case] = (verdict, shares)
            if verdict is not None and verdict.decided:
                waiting.remove(case)
                new += verdict.verdict in (FASTER, SLOWER)
        if not new:
            break
        called += new
    return verdicts


@functools.lru_cache(maxsize=64)
def nominal_level(alpha: float, horizon: int, two_sided: bool) -> float:
    """The p-value each look (a t-test on the first n pairs, n from FIRST_LOOK to
    `horizon`) is judged at, so that the chance of crossing at any look is at most α.

    Found by simulation: under Gaussian pair noise, the t statistics' sequence does not
    depend on the noise's scale or the mean tested against, so sequences of standard
    normal pairs stand for every case. Seeded: the same α and horizon give the same
    level on every run. 0 where the horizon holds no look."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    horizon = min(horizon, MAX_HORIZON)
    if horizon < FIRST_LOOK:
        return 0.0
    import numpy as np
    from scipy import special

    target = SIM_MARGIN * alpha
    paths = int(min(SIM_MAX_PATHS, max(SIM_MIN_PATHS, SIM_CROSSINGS / target)))
    looks = np.arange(FIRST_LOOK, horizon + 1)
    df = (looks - 1).astype(float)
    # A look can cross at a level below α only where its own p-value is below α: the
    # p-values are computed only there, and the rest of the looks count as 1.
    least = special.stdtrit(df, 1.0 - (alpha / 2 if two_sided else alpha))
    n = np.arange(1, horizon + 1, dtype=float)
    rng = np.random.default_rng(SIM_SEED)
    smallest = []
    for start in range(0, paths, _SIM_CHUNK):
        z = rng.standard_normal((min(_SIM_CHUNK, paths - start), horizon))
        total, squares = np.cumsum(z, axis=1), np.cumsum(z * z, axis=1)
        mean = total / n
        var = np.maximum(squares - n * mean * mean, 1e-300) / np.maximum(n - 1.0, 1.0)
        t = (mean / np.sqrt(var / n))[:, looks - 1]
        stat = np.abs(t) if two_sided else t
        p = np.ones_like(stat)
        rows, cols = np.nonzero(stat >= least)
        tail = special.stdtr(df[cols], -stat[rows, cols])
        p[rows, cols] = 2.0 * tail if two_sided else tail
        smallest.append(p.min(axis=1))
    return float(np.quantile(np.concatenate(smallest), target))


def boundary(pairs: int, alpha: float, horizon: int = HORIZON, two_sided: bool = True,
             beyond: bool = False) -> float:
    """The t statistic (of the mean of `pairs` values against a hypothesised mean) beyond
    which the repeated t-test of an A/B of `horizon` rounds crosses at level α (each side
    at α where one-sided): inf below FIRST_LOOK pairs, and past the horizon unless
    `beyond` (an estimate of what more pairs would give: the horizon's nominal level
    carried on, which a longer horizon would lower)."""
    if pairs < FIRST_LOOK or (pairs > min(horizon, MAX_HORIZON) and not beyond):
        return math.inf
    level = nominal_level(alpha, max(horizon, FIRST_LOOK) if beyond else horizon, two_sided)
    if level <= 0.0:
        return math.inf
    from scipy import special

    return float(special.stdtrit(pairs - 1, 1.0 - (level / 2 if two_sided else level)))


def radius(pairs: int, sd: float, alpha: float, horizon: int = HORIZON,
           two_sided: bool = True, beyond: bool = False) -> float:
    """Half the width of the repeated confidence interval for the mean after `pairs`
    pairs of standard deviation `sd` (each bound at α where one-sided)."""
    if pairs < 2:
        return math.inf
    return boundary(pairs, alpha, horizon, two_sided, beyond) * sd / math.sqrt(pairs)


@dataclass(frozen=True)
class PairedVerdict:
    """B over A for one case from its pairs: the ratio of the headline figure and the
    same as a speed (> 1 is B faster), each with the case's repeated confidence interval
    (each bound holding with 1 - α at every round: the interval "same" is judged by); the
    speed's two-sided interval at the level a change call needs (α shared by the A/B's
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
          alpha: float, final: bool = False, cases: int = 1, horizon: int = HORIZON
          ) -> PairedVerdict:
    """The verdict on pairs (a[i], b[i]) of one case's headline figure, each pair measured
    back to back, α shared by `cases` cases (`step_down`: those of the A/B not called yet)
    in an A/B of at most `horizon` rounds; `final` at the budget, where an undecided case
    is inconclusive.

    A change (faster, slower) is called only from the two-sided interval at α / cases, so
    that the chance of any false call among the cases is at most α; "same" is called from
    the case's own interval, each bound at α (two one-sided tests), so that a case truly
    changed by the minimum effect or more is called the same with a chance of at most α."""
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
    r = radius(n, sd, alpha, horizon, two_sided=False) if sd is not None else math.inf
    r_call = radius(n, sd, call_alpha, horizon) if sd is not None else math.inf
    ratio, low, high = math.exp(mean), _exp(mean - r), _exp(mean + r)
    speed, speed_low, speed_high = _as_speed(mean, r, higher_is_better)
    _, call_low, call_high = _as_speed(mean, r_call, higher_is_better)
    verdict = _verdict(speed, call_low, call_high, speed_low, speed_high, min_effect)
    needed, reason = None, ""
    if verdict == UNDECIDED:
        verdict = undecided
        needed = (pairs_needed(mean, sd, min_effect, alpha, call_alpha, horizon)
                  if sd is not None else None)
        reason = _why_undecided(n, sd, needed, horizon)
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
                 call_alpha: float | None = None, horizon: int = HORIZON) -> int | None:
    """The fewest pairs at which a case with this mean and noise (ln(B / A)) would be
    decided, were they to stay as they are: its two-sided interval at `call_alpha`
    (default α) narrow enough to exclude no change when the change is beyond the minimum
    effect, or its interval with each bound at α narrow enough to lie within the minimum
    effect when it is not. Past the horizon, an estimate (`boundary`'s `beyond`); None
    beyond MAX_PAIRS."""
    band = math.log1p(min_effect) if min_effect > 0 else 0.0
    if abs(mean) >= band:
        needed_radius, level, two_sided = abs(mean), call_alpha or alpha, True
    else:
        needed_radius, level, two_sided = band - abs(mean), alpha, False
    if needed_radius <= 0:
        return None
    if sd <= 0:
        return FIRST_LOOK

    return _fewest(lambda n: radius(n, sd, level, horizon, two_sided, beyond=True)
                   >= needed_radius)


def pairs_to_pass(log_speed: float, sd: float, fraction: float, call_alpha: float,
                  horizon: int = HORIZON) -> int | None:
    """The fewest pairs at which a case with this mean (ln of B's speed-up over A) and
    noise would have its interval at `call_alpha` above a slowdown of `fraction`, so
    that a gate at `fraction` (`PairedVerdict.may_have_regressed_by`) passes it, were
    they to stay as they are; None where no number would (its mean at or below that
    slowdown, or beyond MAX_PAIRS)."""
    needed_radius = log_speed - math.log1p(-fraction)
    if needed_radius <= 0:
        return None
    if sd <= 0:
        return FIRST_LOOK
    return _fewest(lambda n: radius(n, sd, call_alpha, horizon, True, beyond=True)
                   >= needed_radius)


def _fewest(wide: Callable[[int], bool]) -> int | None:
    """The fewest pairs from FIRST_LOOK on whose interval is no longer `wide` (its radius
    shrinks with the pairs); None beyond MAX_PAIRS."""
    if wide(MAX_PAIRS):
        return None
    lo, hi = FIRST_LOOK, MAX_PAIRS
    while lo < hi:
        mid = (lo + hi) // 2
        if wide(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _why_undecided(n: int, sd: float | None, needed: int | None, horizon: int) -> str:
    if sd is None:
        return f"{n} pair so far; at least {FIRST_LOOK} are judged"
    noise = f"pairs differ by ±{100.0 * math.expm1(sd):.1f}% (sd)"
    if needed is None:
        return f"{noise}: more than {MAX_PAIRS} pairs would be needed at this noise"
    if needed > horizon:
        return (f"{noise}: about {needed} pairs would decide it at this noise (more than "
                f"the {horizon} rounds asked for)")
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
