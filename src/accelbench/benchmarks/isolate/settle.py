"""How sure `isolate` is: passes over every pair until the naming holds still.

One pass measures every pair once (`pairs`). On a noisy host one pass can name a link
that the next pass finds as fast as the others, so `isolate` repeats passes and judges
each one on its own (`verdict.judge`) as well as all of them pooled. It stops:

- settled: the last `agree` passes named the same nodes, ranks and links (nothing,
  often), each of those names was named in most passes, and the pooled figures name
  exactly those: the naming is conclusive, except that naming nothing is an answer only
  where the pairs spread narrowly enough that a slow link would have stood out
  (`verdict.Verdict.blind`);
- out of time or passes: `budget_s` would be overrun by another pass (one pass is always
  made), or `max_passes` were made, before the naming settled: it is inconclusive, and
  says what each pass named.

A conclusive name comes with its evidence: in how many passes it was named, and how far
the pooled figure lies from the median in robust standard deviations. Two runs on a
noisy host can then disagree only when at least one of them says it is inconclusive.

Every rank makes the same decision from the same data: the ranks share every pass's
figures and rank 0's clock, so no rank stops a pass early.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SETTLED = "settled"
BUDGET = "time budget"
MAX_PASSES = "most passes"


@dataclass(frozen=True)
class Settling:
    """When to stop: `agree` passes in a row naming the same, within `max_passes` passes
    and `budget_s` seconds."""

    agree: int = 3
    max_passes: int = 10
    budget_s: float = 120.0

    def __post_init__(self) -> None:
        if self.agree < 1 or self.max_passes < 1 or not self.budget_s > 0:
            raise ValueError("agree and max_passes must be at least 1, budget_s positive")


@dataclass(frozen=True)
class Settled:
    """What the passes came to: why they stopped, and whether the naming is conclusive."""

    passes: tuple[tuple[str, ...], ...]  # what each pass named, in order
    stopped: str  # SETTLED, BUDGET or MAX_PASSES
    conclusive: bool
    agree: int
    blind: str | None = None  # why the nothing the passes settled on says nothing

    def named_in(self, name: str) -> int:
        """In how many passes `name` was named."""
        return sum(name in named for named in self.passes)

    def describe(self) -> str:
        n = len(self.passes)
        if self.conclusive:
            return (f"conclusive: the last {self.agree} of {n} passes named the same, as "
                    "the pooled figures do")
        if self.stopped == SETTLED and self.blind:
            return f"inconclusive: {n} passes named nothing, but {self.blind}"
        why = {BUDGET: "the time budget ended", MAX_PASSES: f"{n} passes were made",
               SETTLED: "the pooled figures name otherwise"}[self.stopped]
        return (f"inconclusive: {why} before {self.agree} passes in a row named the same "
                f"({_history(self.passes)})")

    def to_dict(self) -> dict[str, Any]:
        return {"passes": [list(p) for p in self.passes], "stopped": self.stopped,
                "conclusive": self.conclusive, "agree": self.agree, "blind": self.blind}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settled:
        stopped = str(d["stopped"])
        if stopped not in (SETTLED, BUDGET, MAX_PASSES):
            raise ValueError(f"unknown reason to stop: {stopped!r}")
        blind = d.get("blind")
        return cls(tuple(tuple(str(n) for n in p) for p in d["passes"]), stopped,
                   bool(d["conclusive"]), int(d["agree"]),
                   None if blind is None else str(blind))


def agreed(passes: Sequence[Sequence[str]], agree: int) -> bool:
    """Whether the last `agree` passes named the same (as sets)."""
    if len(passes) < agree:
        return False
    last = [frozenset(p) for p in passes[-agree:]]
    return all(p == last[0] for p in last)


def next_step(passes: Sequence[Sequence[str]], elapsed_s: float,
              settling: Settling) -> str | None:
    """Why to stop after these passes (`elapsed_s` since the first began), or None to
    make another: settled, the most passes made, or another pass of the mean length
    would overrun the budget."""
    if agreed(passes, settling.agree):
        return SETTLED
    if len(passes) >= settling.max_passes:
        return MAX_PASSES
    if elapsed_s + elapsed_s / max(1, len(passes)) > settling.budget_s:
        return BUDGET
    return None


def repeat(one_pass: Callable[[], tuple[Sequence[str], float]], settling: Settling
           ) -> tuple[list[list[str]], str]:
    """Make passes until `next_step` says stop: `one_pass()` measures one pass and returns
    what it named and the seconds since the first pass began. Returns what each pass
    named and why they stopped."""
    named: list[list[str]] = []
    while True:
        names, elapsed_s = one_pass()
        named.append(list(names))
        stopped = next_step(named, elapsed_s, settling)
        if stopped is not None:
            return named, stopped


def settle(passes: Sequence[Sequence[str]], pooled: Sequence[str], stopped: str,
           agree: int, blind: str | None = None) -> Settled:
    """The outcome: conclusive when the passes settled on what the pooled figures name,
    and, where that is nothing, nothing made the pooled figures `blind` to a slow link."""
    conclusive = (stopped == SETTLED
                  and frozenset(passes[-1]) == frozenset(pooled)
                  and all(2 * sum(name in p for p in passes) > len(passes) for name in pooled)
                  and (bool(pooled) or blind is None))
    return Settled(tuple(tuple(p) for p in passes), stopped, conclusive, agree,
                   blind if not pooled else None)


def _history(passes: Sequence[Sequence[str]]) -> str:
    return "; ".join(f"pass {i + 1}: {', '.join(p) if p else 'nothing'}"
                     for i, p in enumerate(passes))
