"""Is B different from A across runs: the evidence, its test and its three-way verdict.

The unit of evidence is the value one worker process measured, as in a run's own
interval (`core.between`): a process lands on other pages, caches, clocks and neighbours,
so its samples are not independent of each other and pooling them claims a precision no
rerun reproduces. A side of a comparison (one run, or several) is summarised on the log
scale, noise on speed being multiplicative:

- one run: the mean of its processes' log values, with the variance of that mean from
  their spread (s² / n, n - 1 degrees of freedom), s floored, for a CPU case, at how much
  the host's own speed moved between the run's processes, as in the run's interval;
- several runs: the mean of the runs' means, with the variance from the spread of the
  run means (s² / k, k - 1 degrees of freedom): a run's own conditions (its host's state,
  its placement) are part of the noise a rerun sees.

What one run cannot see is the noise between runs. Where the store holds repeated runs of
the same case on the same stack and host, their run-to-run spread (`NoiseFloor`, from
successive differences) is a floor for each side's variance: the side's variance is at
least floor² / k.

The test is Welch's t on the two log means, with Welch-Satterthwaite degrees of freedom.
Unlike a rank test it can reach significance with three processes a side (a two-sided
Mann-Whitney test on 3 + 3 values cannot go below p = 0.1), and its interval for the
ratio, exp(difference ± t · se), is the one the verdict reads:

- faster / slower: the interval excludes 1 and the change is at least the minimum effect;
- same: the interval excludes 1 but the change is below the minimum effect, or the whole
  interval lies within ± the minimum effect;
- inconclusive: the interval holds both no change and a change of the minimum effect, or
  the figures cannot be judged (contended, throttled, too few processes), with the reason
  and how many runs a side would detect the minimum effect at this noise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FASTER = "faster"
SLOWER = "slower"
SAME = "same"
INCONCLUSIVE = "inconclusive"

# The reasons a comparison is inconclusive.
CONTENDED = "contended"
THROTTLED = "throttled"
TOO_FEW = "too few processes"
WIDE = "wide interval"
UNSETTLED = "unsettled"

TEST_NAME = "welch-t on log process values"
POWER = 0.8  # the power the runs-needed estimate is for
MIN_FLOOR_RUNS = 3  # repeated runs a noise floor needs (two run-to-run differences)
STEP_TOLERANT = 5  # successive differences from which the largest is left out


@dataclass(frozen=True)
class NoiseFloor:
    """The run-to-run noise of one case on one stack and host, learned from its stored
    runs: the standard deviation of a run's log figure, from the mean square of successive
    differences in time order (von Neumann's), which a slow drift barely moves. With five
    differences or more the largest one is left out, so that one real step in the series
    does not pass for noise."""

    rel_sd: float  # a run's figure moves by about this share from run to run (1 sd)
    runs: int  # the repeated runs it was learned from

    @property
    def df(self) -> int:
        return max(1, self.runs - 1)

    def describe(self) -> str:
        return f"±{self.rel_sd:.1%} run to run over {self.runs} runs"

    def to_dict(self) -> dict[str, float | int]:
        return {"rel_sd": self.rel_sd, "runs": self.runs}


def noise_floor(run_figures: Sequence[float]) -> NoiseFloor | None:
    """The floor from one figure per run (oldest first); None with fewer than
    MIN_FLOOR_RUNS positive figures."""
    logs = [math.log(v) for v in run_figures if v > 0 and math.isfinite(v)]
    if len(logs) < MIN_FLOOR_RUNS:
        return None
    steps = sorted((b - a) ** 2 for a, b in itertools.pairwise(logs))
    if len(steps) >= STEP_TOLERANT:
        steps = steps[:-1]
    return NoiseFloor(math.sqrt(sum(steps) / (2.0 * len(steps))), len(logs))


@dataclass(frozen=True)
class Side:
    """One side of a comparison on the log scale: the mean, the variance of that mean
    (None when nothing tells it), its degrees of freedom and where the variance came
    from."""

    mean: float
    var: float | None
    df: float
    runs: int
    processes: int  # in all its runs
    source: str  # "processes", "runs", "noise floor" or "none"
    floor: NoiseFloor | None = None

    @property
    def per_run_var(self) -> float | None:
        """The variance of one run's log figure, as this side's evidence has it."""
        return None if self.var is None else self.var * self.runs


def side(per_run: Sequence[Iterable[float]], floor: NoiseFloor | None = None,
         process_floor: float = 0.0) -> Side:
    """A side from the process values of each of its runs (one sequence per run).
    `process_floor`: an sd of log values one run's processes vary by at least (the host's
    speed spread, `core.between`), as in the run's own interval."""
    runs = [[math.log(v) for v in map(float, values) if v > 0 and math.isfinite(v)]
            for values in per_run]
    runs = [r for r in runs if r]
    if not runs:
        raise ValueError("no positive process value")
    processes = sum(len(r) for r in runs)
    means = [_mean(r) for r in runs]
    mean = _mean(means)
    var: float | None
    if len(runs) >= 2:
        var, df, source = _var(means) / len(runs), float(len(runs) - 1), "runs"
    elif processes >= 2:
        var = max(_var(runs[0]), process_floor ** 2) / processes
        df, source = float(processes - 1), "processes"
    else:
        var, df, source = None, 0.0, "none"
    if floor is not None:
        floored = floor.rel_sd ** 2 / len(runs)
        if var is None or floored > var:
            var, df, source = floored, float(floor.df), "noise floor"
    return Side(mean, var, df, len(runs), processes, source, floor)


@dataclass(frozen=True)
class Evidence:
    """B over A: the ratio of geometric means of the process values, its interval, the
    p-value of Welch's test, and what the verdict reads from them."""

    ratio: float
    low: float
    high: float
    p_value: float | None  # None when no variance is known on either side
    df: float
    per_run_var: float | None  # the larger side's, to size more runs

    @property
    def significant(self) -> bool:
        return self.p_value is not None and (self.low > 1.0 or self.high < 1.0)


def weigh(a: Side, b: Side, alpha: float = 0.05) -> Evidence:
    """Welch's t on the log means of `a` and `b`. A side with no variance of its own
    borrows the other's per-process variance (the same noise is assumed on both sides)."""
    from scipy.stats import t as student_t

    diff = b.mean - a.mean
    ratio = math.exp(diff)
    var_a, var_b, df_a, df_b = _borrowed(a, b)
    if var_a is None or var_b is None:
        return Evidence(ratio, 0.0, math.inf, None, 0.0, None)
    se2 = var_a + var_b
    if se2 <= 0:
        return Evidence(ratio, ratio, ratio, 0.0 if diff else 1.0, math.inf,
                        max(var_a * a.runs, var_b * b.runs))
    df = se2 ** 2 / ((var_a ** 2 / df_a if df_a else 0.0) + (var_b ** 2 / df_b if df_b else 0.0)
                     or math.inf)
    se = math.sqrt(se2)
    t = float(student_t.ppf(1.0 - alpha / 2.0, df))
    p = float(2.0 * student_t.sf(abs(diff) / se, df))
    return Evidence(ratio, math.exp(diff - t * se), math.exp(diff + t * se), p, df,
                    max(var_a * a.runs, var_b * b.runs))


def _borrowed(a: Side, b: Side) -> tuple[float | None, float | None, float, float]:
    var_a, var_b = a.var, b.var
    if var_a is None and var_b is not None and b.source == "processes":
        var_a = var_b * b.processes / a.processes
        return var_a, var_b, b.df, b.df
    if var_b is None and var_a is not None and a.source == "processes":
        var_b = var_a * a.processes / b.processes
        return var_a, var_b, a.df, a.df
    return var_a, var_b, a.df, b.df


def three_way(evidence: Evidence, min_effect: float, higher_is_better: bool) -> str:
    """FASTER, SLOWER, SAME or INCONCLUSIVE from the interval of B over A (of a figure
    where higher is better, or lower when not)."""
    if evidence.p_value is None:
        return INCONCLUSIVE
    speed, low, high = evidence.ratio, evidence.low, evidence.high
    if not higher_is_better:
        speed, low, high = 1.0 / speed, _inverse(high), _inverse(low)
    if evidence.significant:
        if abs(speed - 1.0) >= min_effect - 1e-12:
            return FASTER if speed > 1.0 else SLOWER
        return SAME
    if low > 1.0 - min_effect and high < 1.0 + min_effect:
        return SAME
    return INCONCLUSIVE


def runs_needed(per_run_var: float | None, min_effect: float, alpha: float = 0.05,
                power: float = POWER) -> int | None:
    """Runs a side that would detect a change of `min_effect` with `power`, at a run's
    noise `per_run_var` (log scale): 2 σ² (z(1 - α/2) + z(power))² / ln(1 + effect)²."""
    from scipy.stats import norm

    if per_run_var is None or not min_effect > 0:
        return None
    z = float(norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power))
    return max(2, math.ceil(2.0 * per_run_var * z * z / math.log1p(min_effect) ** 2))


def _inverse(value: float) -> float:
    return math.inf if value == 0 else 1.0 / value


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _var(values: Sequence[float]) -> float:
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)
