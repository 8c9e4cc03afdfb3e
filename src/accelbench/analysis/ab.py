"""The verdicts of an A/B (`accelbench ab`), read from its two stored runs.

Each case of an A/B was measured in pairs of processes, one per stack, and each side's
run keeps, with the case, the headline figure every one of its processes measured in
round order (details["pair_values"]). The verdicts are a function of those two lists and
the A/B's settings (`core.request.AbRequest`): pair i of a case is A's i-th process with
B's i-th, and `core.sequential` judges the pairs. `accelbench ab` stopped each case
when this judgement decided it, so reading the runs back gives the verdicts it printed.

A change is called at the A/B's α shared by its cases not yet called when the case was
judged (Holm's step-down: α / k, k kept with the case), so that the chance of any case
being called faster or slower when it does not differ is at most α, however many rounds
each case took; "same" at the case's own α (`core.sequential`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.analysis.tuning import tuning_differences, tuning_of
from accelbench.core.measurement import STATUS_OK, STATUS_SKIPPED, Measurement
from accelbench.core.request import AbRequest
from accelbench.core.sequential import (
    FASTER,
    IN_JOBS,
    IN_SEQUENCE,
    IN_TURNS,
    INCONCLUSIVE,
    PAIR_VALUES,
    PAIRING,
    SAME,
    SHARES,
    SLOWER,
    PairedVerdict,
    case_alpha,
    judge,
)

if TYPE_CHECKING:
    from accelbench.store import Store, StoredRun
    from accelbench.store.records import RunRecord

__all__ = ["FASTER", "INCONCLUSIVE", "NOT_COMPARED", "PAIR_VALUES", "SAME", "SLOWER",
           "AbCase", "AbResult", "ab_of", "case_alpha", "find_ab", "gate", "pair_values",
           "pairs_in", "verdicts"]

NOT_COMPARED = "not compared"  # failed or skipped on a side, or no figure
_MAX_VALUES = 100_000


@dataclass(frozen=True)
class AbCase:
    """One case of an A/B: its verdict from its pairs, or why it has none."""

    key: str
    label: str
    family: str
    figure: str
    unit: str
    higher_is_better: bool
    a_value: float | None
    b_value: float | None
    verdict: PairedVerdict | None
    reason: str = ""  # why not compared
    skipped: bool = False  # skipped on both sides: nothing for a gate to judge
    # How the GEMM/convolution tuning of the sides differ (analysis.tuning).
    tuning_differs: tuple[str, ...] = ()
    # How its pairs ran (core.sequential: IN_TURNS, IN_SEQUENCE, IN_JOBS); None where
    # the record does not say (made before `ab` kept it).
    pairing: str | None = None
    seconds: float | None = None  # what its pairs took on both sides, where recorded
    call_alpha: float | None = None  # the level its change was judged at (α / shares)

    @property
    def outcome(self) -> str:
        return self.verdict.verdict if self.verdict is not None else NOT_COMPARED

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "family": self.family,
                "figure": self.figure, "unit": self.unit,
                "higher_is_better": self.higher_is_better,
                "a": _finite(self.a_value), "b": _finite(self.b_value),
                "verdict": self.outcome, "reason": self.reason or None,
                **(self.verdict.to_dict() if self.verdict is not None else {}),
                "tuning_differs": list(self.tuning_differs), "pairing": self.pairing,
                "seconds": self.seconds, "call_alpha": self.call_alpha}


def pair_values(m: Measurement) -> list[float]:
    """The headline figure each process of `m` measured, in order, as `ab` stored it;
    empty when it holds none that reads (a record from anywhere is untrusted)."""
    found = m.details.get(PAIR_VALUES)
    if not isinstance(found, list) or len(found) > _MAX_VALUES:
        return []
    values = []
    for value in found:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return []
        values.append(float(value))
    return values


def verdicts(a: Sequence[Measurement], b: Sequence[Measurement], ab: AbRequest,
             final: bool = True) -> list[AbCase]:
    """Every case of side A matched with B's by its key, judged from its pairs; `final`
    where no more rounds will run (an undecided case is then inconclusive)."""
    by_key: Mapping[str, Measurement] = {m.case.key: m for m in b}
    return [_case(m, by_key.get(m.case.key), ab, len(a), final) for m in a]


def _case(a: Measurement, b: Measurement | None, ab: AbRequest, cases: int,
          final: bool) -> AbCase:
    figure = a.primary
    name, unit = (figure.name, figure.unit) if figure is not None else ("", "")
    higher = figure.higher_is_better if figure is not None else True

    def unjudged(reason: str, skipped: bool = False) -> AbCase:
        return AbCase(a.case.key, a.case.label, a.case.family, name, unit, higher,
                      _value(a), _value(b), None, reason, skipped)

    if b is None:
        return unjudged("not measured in B")
    if a.status == b.status == STATUS_SKIPPED:
        return unjudged(f"skipped: {a.reason or a.status}", skipped=True)
    for side, m in (("A", a), ("B", b)):
        if m.status != STATUS_OK:
            return unjudged(f"{m.status} in {side}: {m.reason or m.status}")
    if figure is None or b.primary is None or b.primary.name != figure.name:
        return unjudged("no headline figure on both sides")
    values_a, values_b = pair_values(a), pair_values(b)
    pairs = min(len(values_a), len(values_b))
    if pairs == 0:
        return unjudged("no paired processes")
    shares = _shares(a, cases)
    verdict = judge(values_a[:pairs], values_b[:pairs], higher, ab.min_effect, ab.alpha,
                    final=final, cases=shares, horizon=ab.max_rounds)
    tuning = tuning_differences(tuning_of(a.details), tuning_of(b.details))
    pairing = a.details.get(PAIRING)
    seconds = a.details.get("ab_seconds")
    return AbCase(a.case.key, a.case.label, a.case.family, name, unit, higher, _value(a),
                  _value(b), verdict, tuning_differs=tuple(tuning),
                  pairing=pairing if pairing in (IN_TURNS, IN_SEQUENCE, IN_JOBS) else None,
                  seconds=(float(seconds) if isinstance(seconds, int | float)
                           and not isinstance(seconds, bool) and math.isfinite(seconds)
                           and seconds >= 0 else None),
                  call_alpha=case_alpha(ab.alpha, shares))


def _shares(m: Measurement, cases: int) -> int:
    """The cases α was shared by when `ab` last judged the case (`core.sequential
    .step_down`): as stored where that is a count within the A/B's cases, else all of
    them (a run stored before the step-down: Bonferroni's level, as it was judged)."""
    shares = m.details.get(SHARES)
    if isinstance(shares, int) and not isinstance(shares, bool) and 1 <= shares <= cases:
        return shares
    return cases


def gate(cases: Sequence[AbCase], fraction: float) -> tuple[list[AbCase], list[AbCase]]:
    """The cases a --fail-on-regression gate at `fraction` fails (decided slower by at
    least that), and those it cannot decide (not decided, and such a slowdown within
    their interval; or not compared at all: no evidence is no pass)."""
    regressed = [c for c in cases if c.verdict is not None and c.verdict.regressed_by(fraction)]
    undecided = [c for c in cases if (c.verdict is None and not c.skipped)
                 or (c.verdict is not None and c.verdict.may_have_regressed_by(fraction))]
    return regressed, undecided


def _value(m: Measurement | None) -> float | None:
    if m is None or m.status != STATUS_OK or m.primary is None:
        return None
    return m.primary.value


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class AbResult:
    """A stored A/B: its two runs, its settings and the verdict per case."""

    id: str
    a: StoredRun
    b: StoredRun
    ab: AbRequest
    cases: list[AbCase]

    @property
    def rounds(self) -> int:
        """The most pairs any case took."""
        return max((c.verdict.pairs for c in self.cases if c.verdict is not None), default=0)

    def label(self, side: str) -> str:
        """A side as people tell it: its stack and the PyTorch it ran."""
        run = self.a if side == "a" else self.b
        stack = self.ab.a if side == "a" else self.ab.b
        torch = run.fingerprint.get("torch")
        version = torch.get("version") if isinstance(torch, Mapping) else None
        shown = stack.describe()
        return f"{shown} (torch {version})" if isinstance(version, str) else shown

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for case in self.cases:
            out[case.outcome] = out.get(case.outcome, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "run_a": self.a.record.id, "run_b": self.b.record.id,
                "a": self.label("a"), "b": self.label("b"),
                "min_effect": self.ab.min_effect, "alpha": self.ab.alpha,
                "case_alpha": case_alpha(self.ab.alpha, len(self.cases)),
                "max_rounds": self.ab.max_rounds, "budget_s": self.ab.budget,
                "rounds": self.rounds, "counts": self.counts(),
                "cases": [c.to_dict() for c in self.cases]}


def ab_of(record: RunRecord) -> AbRequest | None:
    """The A/B settings a stored run was made with, with its id and side; None for a run
    of no A/B (or whose request does not read: a record from anywhere is untrusted)."""
    from accelbench.core.request import RequestError, RunRequest

    if record.request is None or record.request.get("ab") is None:
        return None
    try:
        ab = RunRequest.from_dict(dict(record.request), f"run {record.id}").ab
    except RequestError:
        return None
    return ab if ab is not None and ab.id is not None and ab.side is not None else None


def pairs_in(runs: Sequence[StoredRun]) -> list[AbResult]:
    """The A/Bs both of whose runs are among `runs`, oldest first."""
    sides: dict[str, dict[str, tuple[StoredRun, AbRequest]]] = {}
    for run in sorted(runs, key=lambda r: (r.record.started_at, r.record.id)):
        ab = ab_of(run.record)
        if ab is not None and ab.id is not None and ab.side is not None:
            sides.setdefault(ab.id, {})[ab.side] = (run, ab)
    out = []
    for pair_id, found in sides.items():
        if "a" in found and "b" in found:
            (run_a, ab), (run_b, _) = found["a"], found["b"]
            out.append(AbResult(pair_id, run_a, run_b, ab,
                                verdicts(run_a.measurements, run_b.measurements, ab)))
    return out


def find_ab(store: Store, ref: str) -> AbResult:
    """The A/B a stored run (`ref`: an id, a prefix, "latest") belongs to, with its
    other side; a UserError for a run of no A/B, or one whose other side is missing."""
    from accelbench.errors import UserError

    run = store.load_run(ref)
    ab = ab_of(run.record)
    if ab is None:
        raise UserError(f"run {run.record.id} is not a side of an A/B (`accelbench ab` "
                        "makes them)")
    for record in store.list_runs():
        other = ab_of(record)
        if (record.id != run.record.id and other is not None and other.id == ab.id
                and other.side != ab.side):
            found = pairs_in([run, store.load_run(record.id)])
            if found:
                return found[0]
    raise UserError(f"run {run.record.id} is side {ab.side.upper() if ab.side else '?'} of "
                    f"A/B {ab.id}, whose other run is not in this store")
