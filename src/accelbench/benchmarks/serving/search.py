"""The Server scenario's search: the highest Poisson QPS whose latency percentile LoadGen
finds within the bound.

Each trial is a whole LoadGen Server test at one QPS. From a starting guess the search
doubles the rate until a trial misses the bound (or halves it until one meets it), then
bisects between the highest rate that met the bound and the lowest that missed it, until
the two are within `precision` of each other or the trials run out. The answer is the
highest rate that met the bound, with that trial's LoadGen verdicts (early stopping
included). The trial is a parameter, so the logic is tested without LoadGen or a clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIN_QPS = 1e-3


@dataclass(frozen=True)
class Trial:
    qps: float
    met: bool  # the latency percentile within the bound
    result: Any = None  # what the trial measured (the LoadGen outcome and the SUT's times)


@dataclass(frozen=True)
class Search:
    best: Trial | None  # the highest rate that met the bound; None: none did
    trials: tuple[Trial, ...]
    # "converged", "trials" (ran out of them), "no trial missed the bound", or
    # "nothing met the bound"
    stopped: str


def search_qps(trial: Callable[[float], Trial], start: float, *, max_trials: int,
               precision: float = 0.05, max_qps: float = 1e7) -> Search:
    if not start > 0:
        raise ValueError("the search starts from a positive rate")
    if max_trials < 1:
        raise ValueError("the search needs at least one trial")
    trials: list[Trial] = []

    def run(qps: float) -> Trial:
        outcome = trial(qps)
        trials.append(outcome)
        return outcome

    first = run(min(start, max_qps))
    low = first if first.met else None  # highest met
    high = None if first.met else first  # lowest missed
    while len(trials) < max_trials and (low is None or high is None):
        if low is None:
            assert high is not None
            if high.qps / 2 < MIN_QPS:
                break
            outcome = run(high.qps / 2)
        else:
            if low.qps >= max_qps:
                break
            outcome = run(min(low.qps * 2, max_qps))
        if outcome.met:
            low = outcome
        else:
            high = outcome
    while (len(trials) < max_trials and low is not None and high is not None
           and high.qps / low.qps - 1 > precision):
        outcome = run((low.qps + high.qps) / 2)
        if outcome.met:
            low = outcome
        else:
            high = outcome
    if low is None:
        return Search(None, tuple(trials), "nothing met the bound")
    if high is None:
        return Search(low, tuple(trials), "no trial missed the bound")
    converged = high.qps / low.qps - 1 <= precision
    return Search(low, tuple(trials), "converged" if converged else "trials")
