"""`accelbench ab`: the same cases measured under two stacks on this machine, in pairs of
processes, round after round, until each case is decided or the budget is spent.

Each side is planned as a run of its own (`session.Supervised`: its fingerprint read in
its own interpreter) and stored as an ordinary run; the two runs carry the same A/B id in
their requests. A round measures every case still undecided once under each stack, in
fresh processes. The two processes of a pair measure the case at once, taking turns on
the same CPUs (`runner.turns`), so that what the host does meanwhile touches both; which
of them starts alternates from round to round and from case to case. Distributed cases
run as one torchrun job per side per round, one after the other, in the same alternating
order.

After each round every case with its pairs is judged (`core.sequential`: a change
called at the A/B's α shared by its cases not called yet, `step_down`); a decided case
stops, and is stored on both sides with every process's figure in round order and the
share of α it was judged with. A futile one stops too: from five pairs on, one whose
noise would need more than twice the pairs it can still reach (`max_rounds`, or fewer
where the budget's rounds left are fewer), and from two, one that would need more than
that even at a fraction of the noise measured (`_futile`; stopping it makes no call, so
the error rates hold; its rounds go to the cases that can still be decided). With a
budget, once no case is left but futile ones, each that the rest of the budget alone
could decide goes on (`_revive`); they are stored when decided or at the end.
A case whose benchmark runs a protocol of its own (`Benchmark.interleaves` false) cannot
take turns: its pair is measured one after the other, each process unpinned. From its
second pair on, a case whose set-up took longer than its sampling samples for as long as
its set-up took (`_sampling_time`).
At `max_rounds` or when the budget is spent, the cases still undecided are stored as they
are and are inconclusive. A failure
or skip on either side stops that case on both. Ctrl-C stores what was measured, in whole
pairs, and ends both runs as interrupted.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from accelbench.core.measurement import STATUS_OK, Measurement, merge_processes
from accelbench.core.request import AbRequest
from accelbench.core.sequential import (
    FASTER,
    IN_JOBS,
    IN_SEQUENCE,
    IN_TURNS,
    MAX_HORIZON,
    PAIR_VALUES,
    PAIRING,
    SHARES,
    SLOWER,
    PairedVerdict,
    case_alpha,
    judge,
    pairs_needed,
    pairs_to_pass,
    step_down,
)
from accelbench.errors import EXIT_INTERNAL, EXIT_USAGE, UserError
from accelbench.runner.messages import MeasureCase
from accelbench.runner.plan import PlannedCase, ValidRequest
from accelbench.runner.recorder import Outcome, RunRecorder
from accelbench.runner.rounds import HostSpeeds, _measure
from accelbench.runner.session import Supervised, _segments, timeouts
from accelbench.runner.stack import StackWorkers
from accelbench.runner.supervisor import WorkerLost
from accelbench.runner.turns import TurnPair, pair_cpus

if TYPE_CHECKING:
    from accelbench.core.timing import TimingPolicy
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.store import Store

SIDES = ("a", "b")
# A case whose noise, from this many pairs on, would need more than FUTILE_FACTOR times
# max_rounds pairs stops as inconclusive (an estimate from few pairs is rough: hence the
# margin).
FUTILE_AFTER = 5
FUTILE_FACTOR = 2
# Before that, from this many pairs on, one that would need more pairs than it can reach
# even at a fraction of its noise so far (a hopeless case on this host: its rounds are
# better spent on the others): a quarter at two pairs, half from three.
HOPELESS_AFTER = 2
# A case's processes sample at most this many times the sampling time asked for
# (`_sampling_time`).
SAMPLING_CAP = 5
_NEVER_CONVERGED = 1e-9  # a target interval no sampling reaches


class AbListener(Protocol):
    """Progress of an A/B, for the terminal."""

    def planned(self, cases: int, run_a: str, run_b: str) -> None: ...

    def round_done(self, number: int, decided: int, cases: int, elapsed: float,
                   left: float) -> None:
        """After round `number`: `left` is the most seconds the A/B may still take (the
        rounds left at the pace so far, within the budget)."""


class QuietAb:
    def planned(self, cases: int, run_a: str, run_b: str) -> None:
        pass

    def round_done(self, number: int, decided: int, cases: int, elapsed: float,
                   left: float) -> None:
        pass


@dataclass
class AbOutcome:
    """What an A/B measured: each side's run, the verdict per case, the rounds run and
    why it stopped ("done": every case decided or futile; "max rounds", "budget" or
    "interrupted")."""

    id: str
    a: Outcome
    b: Outcome
    ab: AbRequest
    rounds: int = 0
    elapsed: float = 0.0
    stopped: str = "done"

    @property
    def interrupted(self) -> bool:
        return self.a.interrupted or self.b.interrupted


@dataclass
class _Side:
    name: str
    executor: Supervised
    workers: StackWorkers
    fingerprint: Fingerprint | None = None
    recorder: RunRecorder | None = None
    speeds: HostSpeeds = field(default_factory=HostSpeeds)


class _Case:
    """One case's processes on both sides so far, in round order, and how its pairs ran."""

    def __init__(self, planned: PlannedCase) -> None:
        self.planned = planned
        self.parts: dict[str, list[Measurement]] = {"a": [], "b": []}
        self.done = False
        self.pairing = IN_JOBS if planned.benchmark.distributed else IN_TURNS
        self.cost = 0.0  # seconds its last pair took
        self.seconds = 0.0  # and all its pairs
        self.sampling: float | None = None  # each process's, from the second pair on
        self.called = False  # faster or slower
        self.shares: int | None = None  # the cases α was shared by at its last judgement
        self.revived = False  # going on with budget no other case needs
        self.recorded = False

    @property
    def futile(self) -> bool:
        """Stopped as futile: done, and not stored yet (the budget may revive it)."""
        return self.done and not self.recorded

    @property
    def pairs(self) -> int:
        return min(len(self.parts["a"]), len(self.parts["b"]))

    def failed(self) -> bool:
        return any(p.status != STATUS_OK for parts in self.parts.values() for p in parts)


def run_ab(valid: ValidRequest, store: Store, listener: AbListener | None = None,
           argv: Sequence[str] = (), worker_factory: Callable[[str], object] | None = None,
           clock: Callable[[], float] = time.monotonic) -> AbOutcome:
    """Run the A/B `valid.request.ab` asks, storing both sides' runs in `store`.
    `worker_factory(side)`, for tests, gives a side's base worker factory."""
    ab = valid.request.ab
    if ab is None:
        raise UserError("not an A/B request: it has no `ab` settings")
    if ab.max_rounds > MAX_HORIZON:
        raise UserError(f"an A/B runs at most {MAX_HORIZON} rounds (max_rounds "
                        f"{ab.max_rounds}): its test is calibrated for that many looks")
    listener = listener or QuietAb()
    sides = []
    try:
        for name in SIDES:
            workers = StackWorkers(getattr(ab, name))
            base = worker_factory(name) if worker_factory is not None else None
            factory = workers.factory(base)  # type: ignore[arg-type]
            sides.append(_Side(name, Supervised(valid, valid.request.case_timeout, factory),
                               workers))
        return _conduct(valid, ab, sides, store, listener, argv, clock)
    finally:
        for side in sides:
            side.executor.close()
            side.workers.close()


def _conduct(valid: ValidRequest, ab: AbRequest, sides: list[_Side], store: Store,
             listener: AbListener, argv: Sequence[str], clock: Callable[[], float]
             ) -> AbOutcome:
    started = clock()
    plans = []
    for side in sides:
        try:
            fingerprint = side.executor.fingerprint()
        except UserError as exc:
            stack = getattr(ab, side.name)
            code, hint = exc.exit_code, ""
            if stack.python is not None and code == EXIT_INTERNAL:
                # The interpreter given cannot run accelbench's worker: the stack is at fault.
                code = EXIT_USAGE
                hint = ("; it needs PyTorch and accelbench's dependencies: "
                        f"`{stack.python} -m pip install accelbench` installs them")
            raise UserError(f"stack {side.name.upper()} ({stack.describe()}): {exc}{hint}",
                            code) from None
        side.fingerprint, planned = side.executor.plan(fingerprint)
        plans.append(planned)
    _check_same_cases(plans[0], plans[1], sides)
    cases = [_Case(p) for p in plans[0]]
    pair_id = uuid.uuid4().hex[:12]
    for side in sides:
        assert side.fingerprint is not None
        request = valid.request.replace(ab=dataclasses.replace(ab, id=pair_id,
                                                               side=side.name))
        side.recorder = RunRecorder(store, side.fingerprint, request.suite, argv, None,
                                    request)
        side.recorder.planned([c.planned for c in cases])
    a_rec, b_rec = (s.recorder for s in sides)
    assert a_rec is not None and b_rec is not None
    listener.planned(len(cases), a_rec.run_id, b_rec.run_id)
    outcome = AbOutcome(pair_id, a_rec.outcome, b_rec.outcome, ab)
    try:
        for number in range(ab.max_rounds):
            if all(c.done for c in cases) and not _revive(cases, ab, clock() - started):
                break
            if ab.budget is not None and clock() - started >= ab.budget:
                outcome.stopped = "budget"
                break
            complete = _round(number, cases, sides, valid, ab, started, clock)
            outcome.rounds = number + 1
            _judge(cases, sides, valid, ab)
            # The budget's rounds go to the cases that can use them: those that would need
            # more pairs than it leaves them stop, the rounds being costed without the
            # cases that stop at a first estimate.
            elapsed = clock() - started
            first = _reachable(cases, ab, number + 1, elapsed)
            going = [c for c in cases if not c.done and (c.revived or not _futile(c, ab, first))]
            reach = _reachable(going, ab, number + 1, elapsed)
            for case in cases:
                if not case.done and not case.revived and _futile(case, ab, reach):
                    case.done = True
            elapsed = clock() - started
            listener.round_done(number + 1, sum(c.done for c in cases), len(cases), elapsed,
                                _left(ab, number + 1, elapsed, all(c.done for c in cases)))
            if not complete:
                outcome.stopped = "budget"
                break
        else:
            if not all(c.done for c in cases):
                outcome.stopped = "max rounds"
    except KeyboardInterrupt as stop:
        outcome.stopped = "interrupted"
        for side in sides:
            assert side.recorder is not None
            side.recorder.interrupt(stop)
            side.executor.interrupted(stop, side.recorder)
    for index, case in enumerate(cases):
        if not case.recorded and case.pairs:
            _record(index, case, sides, valid)
    outcome.a = a_rec.finish()
    outcome.b = b_rec.finish()
    outcome.elapsed = clock() - started
    return outcome


def _revive(cases: Sequence[_Case], ab: AbRequest, elapsed: float) -> bool:
    """With a budget, once every case is decided or stopped as futile, a futile one that
    the rest of the budget, given to it alone, could still decide goes on: it was stopped
    while the other cases shared the rounds. One that could not stays stopped, and the
    A/B ends without spending the rest. Looking at it again is one more look of the kind
    the boundary is calibrated for, so α holds. Whether any was revived."""
    if ab.budget is None:
        return False
    left = max(0.0, ab.budget - elapsed)
    revived = False
    for case in cases:
        if not case.futile or case.cost <= 0:
            continue
        alone = int(min(ab.max_rounds, case.pairs + left // case.cost))
        if alone > case.pairs and not _futile(case, ab, alone):
            case.done, case.revived = False, True
            revived = True
    return revived


def _left(ab: AbRequest, rounds: int, elapsed: float, done: bool) -> float:
    """The most seconds the A/B may still take: the rounds left at the pace so far, at
    most what is left of the budget."""
    if done:
        return 0.0
    left = (ab.max_rounds - rounds) * elapsed / max(1, rounds)
    return max(0.0, min(left, ab.budget - elapsed)) if ab.budget is not None else left


def _check_same_cases(a: Sequence[PlannedCase], b: Sequence[PlannedCase],
                      sides: Sequence[_Side]) -> None:
    keys_a, keys_b = [c.case.key for c in a], [c.case.key for c in b]
    if keys_a == keys_b:
        return
    fa, fb = (s.fingerprint for s in sides)
    where = ""
    if fa is not None and fb is not None and fa.device.type != fb.device.type:
        where = f" (A runs on {fa.device.type}, B on {fb.device.type})"
    raise UserError(f"the two stacks plan different cases{where}: an A/B compares the same "
                    "cases on the same device")


def _round(number: int, cases: list[_Case], sides: list[_Side], valid: ValidRequest,
           ab: AbRequest, started: float, clock: Callable[[], float]) -> bool:
    """One round over the cases still undecided; False when the budget ran out before
    every case had its pair (the round's unpaired process is dropped)."""
    # Each process of a pair samples for the whole sampling time rather than stopping once
    # its own interval is narrow: the two take turns, so their samples cover the same
    # stretch of the host's time, which is what the pair's ratio needs.
    policy = dataclasses.replace(valid.policy, target_rel_ci=_NEVER_CONVERGED)
    timeout_for = timeouts(valid.request.case_timeout)
    for first, segment in _segments([c.planned for c in cases]):
        pending = [first + i for i in range(len(segment)) if not cases[first + i].done]
        if not pending:
            continue
        if segment[0].benchmark.distributed:
            began = clock()
            _distributed_round(number, [cases[i] for i in pending], sides, valid)
            for i in pending:  # the jobs' time shared by their cases
                cases[i].cost = (clock() - began) / len(pending)
                cases[i].seconds += cases[i].cost
            continue
        for offset, index in enumerate(pending):
            if ab.budget is not None and clock() - started >= ab.budget:
                return False
            case = cases[index]
            order = sides if (number + offset) % 2 == 0 else sides[::-1]
            began = clock()
            sampling = _sampling_time(case, policy.max_time)
            _measure_pair(case, order, dataclasses.replace(policy, max_time=sampling),
                          timeout_for(case.planned), f"r{number}-c{index}")
            case.cost = clock() - began
            case.seconds += case.cost
    for side in sides:  # every round in fresh processes
        side.executor.slot.replace()
    return True


def _measure_pair(case: _Case, order: Sequence[_Side], policy: TimingPolicy, timeout: float,
                  name: str) -> None:
    """The case measured by both sides' workers at once, taking turns (runner.turns), the
    first of `order` starting; one after the other where a worker cannot take turns. A
    worker lost fails its part, is replaced, and its partner goes on alone."""
    workers = {side.name: side.executor.slot.for_case(case.planned, side.executor.device)
               for side in order}
    if not (case.planned.benchmark.interleaves
            and all(hasattr(w, "send") and hasattr(w, "ready") for w in workers.values())):
        case.pairing = IN_SEQUENCE
        for side in order:
            slot, device = side.executor.slot, side.executor.device
            case.parts[side.name].append(_measure(slot, workers[side.name], case.planned,
                                                  device, policy, timeout))
        return
    from accelbench.runner.lifeline import owned_folder

    with owned_folder() as folder:
        pair = TurnPair(folder, name)
        started = time.time()
        parts: dict[str, Measurement] = {}
        waiting: list[_Side] = []
        threads = case.planned.case.param_dict.get("threads")
        cpus = (pair_cpus(threads) if case.planned.case.device == "cpu"
                and isinstance(threads, int) else None)
        for position, side in enumerate(order):
            message = MeasureCase(case.planned, side.executor.device, policy,
                                  pair.spec(side.name, first=position == 0, cpus=cpus))
            try:
                workers[side.name].send(message)  # type: ignore[attr-defined]
                waiting.append(side)
            except WorkerLost as lost:
                parts[side.name] = _lost(side, case, str(lost), started, pair)
        deadline = time.monotonic() + 2 * timeout  # each waits while the other measures
        while waiting:
            for side in list(waiting):
                worker = workers[side.name]
                late = time.monotonic() >= deadline
                if not (late or worker.ready()):  # type: ignore[attr-defined]
                    continue
                waiting.remove(side)
                try:
                    reply = worker.receive(0.0 if late else 5.0)  # type: ignore[attr-defined]
                except WorkerLost as lost:
                    parts[side.name] = _lost(side, case, str(lost), started, pair)
                    continue
                parts[side.name] = _part(case, reply, started)
            time.sleep(0.02)
        for side in order:
            case.parts[side.name].append(parts[side.name])


def _lost(side: _Side, case: _Case, reason: str, started: float, pair: TurnPair
          ) -> Measurement:
    """A side's worker was lost in a pair: its part fails, the slot gets a fresh worker,
    and its partner is handed the turn for good."""
    from accelbench.core.measurement import STATUS_FAILED, not_measured

    side.executor.slot.replace()
    pair.release("b" if side.name == "a" else "a")
    return not_measured(case.planned.case, STATUS_FAILED, reason, started,
                        time.time() - started)


def _part(case: _Case, reply: object, started: float) -> Measurement:
    from accelbench.core.measurement import STATUS_FAILED, not_measured
    from accelbench.runner.messages import CaseMeasured, Refused

    if isinstance(reply, CaseMeasured):
        return Measurement.from_dict(reply.record)
    reason = reply.message if isinstance(reply, Refused) else f"unexpected reply {reply!r}"
    return not_measured(case.planned.case, STATUS_FAILED, reason, started,
                        time.time() - started)


def _distributed_round(number: int, cases: list[_Case], sides: list[_Side],
                       valid: ValidRequest) -> None:
    """One torchrun job per side over the distributed cases still undecided."""
    import os

    from accelbench.core.worker_env import combined
    from accelbench.runner.launcher import RankGroup

    for side in (sides if number % 2 == 0 else sides[::-1]):
        side.executor.slot.release()  # the ranks get the devices to themselves
        device = side.executor.device
        refused = side.executor.refused.get(cases[0].planned.ranks)
        if refused is not None:
            for case in cases:
                case.parts[side.name].append(_skipped(case.planned, refused))
            continue
        env = combined(c.planned.benchmark.environment(c.planned.params, device)
                       for c in cases)
        group = RankGroup(cases[0].planned.ranks, side.executor.backend or "gloo",
                          valid.registry, side.workers.rank_env(env.for_user(os.environ)),
                          python=side.workers.stack.python)
        group.run([c.planned for c in cases], device, valid.policy,
                  timeouts(valid.request.case_timeout), on_start=_nothing,
                  on_result=_adder([case.parts[side.name] for case in cases]))


def _nothing(index: int) -> None:
    pass


def _adder(parts: list[list[Measurement]]) -> Callable[[int, Measurement], None]:
    """Adds a job's result for its i-th case to that case's processes."""
    return lambda i, m: parts[i].append(m)


def _skipped(planned: PlannedCase, reason: str) -> Measurement:
    from accelbench.core.measurement import STATUS_SKIPPED, not_measured

    return not_measured(planned.case, STATUS_SKIPPED, reason, time.time(), 0.0)


def _sampling_time(case: _Case, base: float) -> float:
    """How long each process of the case's next pair samples: the sampling time asked
    for, or, from the second pair on, as long as a process of its first pair took to set
    the case up where that is longer (at most SAMPLING_CAP times as long). A case whose
    set-up dominates its pair (a model built, its FLOPs counted) gets more samples for
    little more time, and its pairs less noise. Fixed after the first pair, so that the
    pairs that follow are alike."""
    if case.sampling is not None:
        return case.sampling
    if case.pairs < 1 or case.pairing != IN_TURNS:
        return base
    took = [case.parts[side][0].duration_s for side in SIDES]
    if not all(t > 0 and math.isfinite(t) for t in took):
        return base
    # A pair's processes take the case at once: each one's time is both set-ups, in
    # turn, then the sampling they share.
    setup = max(0.0, (min(took) - base) / 2)
    case.sampling = min(SAMPLING_CAP * base, max(base, setup))
    return case.sampling


def _reachable(cases: Sequence[_Case], ab: AbRequest, rounds: int, elapsed: float) -> int:
    """The most pairs a case may still reach: `max_rounds`, or fewer where what is left
    of the budget covers fewer rounds of the cases still undecided, each at what its
    last pair took."""
    if ab.budget is None:
        return ab.max_rounds
    cost = sum(c.cost for c in cases if not c.done)
    if cost <= 0:
        return ab.max_rounds
    more = max(0.0, ab.budget - elapsed) // cost
    return int(min(ab.max_rounds, rounds + more))


def _judge(cases: list[_Case], sides: list[_Side], valid: ValidRequest,
           ab: AbRequest) -> None:
    """After a round: the cases that failed, have nothing to judge, or are decided stop
    and are stored; a change called with α shared by the cases not called yet
    (`core.sequential.step_down`), each case keeping the shares it was judged with."""
    active = []
    for index, case in enumerate(cases):
        if case.done:
            continue
        if case.failed() or (case.pairs >= 2 and case.parts["a"][0].primary is None):
            _record(index, case, sides, valid)
        else:
            active.append(index)
    called = sum(c.called for c in cases)
    judged = step_down(active, len(cases), called,
                       lambda index, shares: _verdict_of(cases[index], ab, shares))
    for index, (verdict, shares) in judged.items():
        case = cases[index]
        case.shares = shares
        if verdict is not None and verdict.decided:
            case.called = verdict.verdict in (FASTER, SLOWER)
            _record(index, case, sides, valid)


def _verdict_of(case: _Case, ab: AbRequest, shares: int) -> PairedVerdict | None:
    """The case's verdict on its pairs so far, α shared by `shares` cases; None below two
    pairs or without a headline figure."""
    figure = case.parts["a"][0].primary if case.pairs >= 2 else None
    if figure is None:
        return None
    values = {name: [_headline(p) for p in case.parts[name][:case.pairs]] for name in SIDES}
    return judge(values["a"], values["b"], figure.higher_is_better, ab.min_effect,
                 ab.alpha, cases=shares, horizon=ab.max_rounds)


def _futile(case: _Case, ab: AbRequest, reach: int | None = None) -> bool:
    """Whether an undecided case stops as futile: from FUTILE_AFTER pairs on, its noise
    would need more than FUTILE_FACTOR times the pairs it can reach, or more than can be
    sought; from HOPELESS_AFTER, more than it can reach even at a quarter of that noise
    (two pairs) or half of it (three or four): it would end inconclusive anyway, and its
    rounds go to the other cases. With a --fail-on-regression gate that the case can
    neither pass nor fail yet, it goes on while the pairs it can reach could still pass
    the gate: a slowdown of the gate's size is ruled out with fewer pairs than a change
    within the minimum effect. `reach`: the pairs the budget leaves it (`_reachable`;
    default `max_rounds`). Judged with the shares of its last judgement."""
    reach = ab.max_rounds if reach is None else reach
    cases = case.shares or 1
    verdict = _verdict_of(case, ab, cases)
    if verdict is None or verdict.decided or verdict.sd is None:
        return False
    call = case_alpha(ab.alpha, cases)
    measured_sd, log_ratio = verdict.sd, math.log(verdict.ratio)

    def beyond(needed: Callable[[float, float], int | None]) -> bool:
        """Whether `needed(mean, sd)` pairs lie beyond reach, by the rules above."""
        if case.pairs >= FUTILE_AFTER:
            wanted = needed(log_ratio, measured_sd)
            return wanted is None or wanted > FUTILE_FACTOR * reach
        if case.pairs >= HOPELESS_AFTER:
            # Few pairs tell the noise roughly, but rarely far too high: two pairs (one
            # degree of freedom) overstate it fourfold with a chance of 1 in 16,000,
            # three (two degrees) twofold with a chance of 1 in 55. Their mean is rougher
            # still. A case that would need more pairs than it can reach even at that
            # fraction of the noise measured, with its mean as measured or with no
            # difference at all (the easiest to decide), is stopped now.
            sd = measured_sd / (4.0 if case.pairs == 2 else 2.0)
            return all(n is None or n > reach for n in (needed(log_ratio, sd), needed(0.0, sd)))
        return False

    if case.pairs >= FUTILE_AFTER:
        hopeless = (verdict.pairs_needed is None
                    or verdict.pairs_needed > FUTILE_FACTOR * reach)
    else:
        hopeless = beyond(lambda mean, sd: pairs_needed(mean, sd, ab.min_effect, ab.alpha,
                                                        call, ab.max_rounds))
    gate = ab.fail_on_regression
    if not hopeless or gate is None or not verdict.may_have_regressed_by(gate):
        return hopeless
    # the speed-up is B / A for a rate and A / B for a time: ln(speed) is ±ln(B / A)
    sign = -1.0 if (verdict.speed - 1.0) * (verdict.ratio - 1.0) < 0 else 1.0
    return beyond(lambda mean, sd: pairs_to_pass(sign * mean, sd, gate, call,
                                                 ab.max_rounds))


def _headline(m: Measurement) -> float:
    figure = m.primary
    return figure.value if figure is not None else float("nan")


def _record(index: int, case: _Case, sides: list[_Side], valid: ValidRequest) -> None:
    """Store the case on both sides: its processes in whole pairs (a failure or skip as
    it is), each side's headline figure per process beside it."""
    case.done = case.recorded = True
    pairs = case.pairs
    for side in sides:
        assert side.recorder is not None
        parts = case.parts[side.name]
        failed = next((p for p in parts if p.status != STATUS_OK), None)
        kept = parts if failed is not None else parts[:pairs]
        if not kept:
            continue
        for part in kept:
            if case.planned.ranks == 1:
                side.speeds.add(part)
        cpu = kept[0].case.device == "cpu" and len(kept) >= 2
        merged = merge_processes(kept, valid.policy, len(kept),
                                 side.speeds.spread() if cpu else None)
        if merged.status == STATUS_OK:
            details = {**merged.details, PAIR_VALUES: [_headline(p) for p in kept],
                       "ab_rounds": len(kept), PAIRING: case.pairing,
                       "ab_seconds": round(case.seconds, 3)}
            if case.sampling is not None:
                details["ab_sampling_s"] = round(case.sampling, 3)
            if case.shares is not None:
                details[SHARES] = case.shares
            merged = dataclasses.replace(merged, details=details)
        side.recorder.record(index, merged)
