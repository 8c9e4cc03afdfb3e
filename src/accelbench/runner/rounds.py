"""The rounds of one segment of a run: each case measured in `processes` fresh worker
processes (or torchrun jobs), interleaved across the segment's cases."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import (
    STATUS_FAILED,
    STATUS_OK,
    STATUS_SKIPPED,
    Measurement,
    merge_processes,
    not_measured,
)
from accelbench.core.timing import TimingPolicy
from accelbench.env.host.reference import speed_of, speed_sd
from accelbench.runner.messages import CaseMeasured, MeasureCase, Refused
from accelbench.runner.plan import PlannedCase
from accelbench.runner.recorder import RunRecorder
from accelbench.runner.resume import CUT_SHORT
from accelbench.runner.supervisor import WorkerLost, WorkerProcess, WorkerSlot

if TYPE_CHECKING:
    from accelbench.core.registry import Registry
    from accelbench.runner.launcher import RankGroup


class HostSpeeds:
    """The host's speed on its reference work, timed beside every single-rank CPU process
    of a run so far: how much it moved between them is recorded with each CPU case as the
    floor under the spread of the case's processes (`core.between`)."""

    def __init__(self) -> None:
        self._found: dict[str, list[float]] = {}

    def add(self, m: Measurement) -> None:
        if m.status == STATUS_OK and m.case.device == "cpu":
            for host in m.hosts:
                found = speed_of(host)
                if found is not None:
                    self._found.setdefault(found[0], []).append(found[1])

    def spread(self) -> dict[str, object] | None:
        """{"sd", "readings", "reference"}, or None with too few readings or references of
        two kinds."""
        if len(self._found) != 1:
            return None
        ((name, speeds),) = self._found.items()
        sd = speed_sd(speeds)
        return None if sd is None else {"sd": round(sd, 6), "readings": len(speeds),
                                        "reference": name}


class Rounds:
    """The cases of one segment, measured in `policy.processes` rounds of fresh processes,
    interleaved (A1 B1 C1 A2 B2 C2 ...), so that a slow drift of the machine touches every
    case alike. A case is recorded once its last round is in, or at once when a round
    fails or skips it; an interrupted run records what each case measured so far. A CPU
    case is recorded with how much the host's speed moved between the run's processes so
    far (`speeds`, shared by the run's segments)."""

    def __init__(self, segment: list[PlannedCase], first: int, policy: TimingPolicy,
                 recorder: RunRecorder, wait_quiet_s: float | None = None,
                 speeds: HostSpeeds | None = None) -> None:
        self.segment = segment
        self._speeds = speeds if speeds is not None else HostSpeeds()
        self._wait_quiet_s = wait_quiet_s
        self.first = first
        self.count = policy.processes
        self._policy = policy
        self._recorder = recorder
        self._parts: list[list[Measurement]] = [[] for _ in segment]
        self._done: set[int] = set()

    def pending(self) -> list[int]:
        """Offsets of the cases that still need a round, in plan order."""
        return [i for i in range(len(self.segment)) if i not in self._done]

    def wait_quiet(self) -> Callable[[Measurement], Measurement]:
        """With --wait-quiet, wait for a quiet host; returns what notes the wait on the
        measurement that follows."""
        if self._wait_quiet_s is None:
            return lambda m: m
        from accelbench.env.host import HostProbe, wait_quiet

        quiet, waited, report = wait_quiet(self._wait_quiet_s,
                                           probe=HostProbe(include_children=True))
        note = None if quiet else (f"the host did not become quiet in {self._wait_quiet_s:g} s: "
                                   + "; ".join(report.reasons))

        def noted(m: Measurement) -> Measurement:
            details = {**m.details, "waited_for_quiet_s": round(waited, 3)}
            warnings = (*m.warnings, note) if note else m.warnings
            return dataclasses.replace(m, details=details, warnings=warnings)

        return noted

    def started(self, offset: int) -> None:
        index, planned = self.first + offset, self.segment[offset]
        listener = self._recorder.listener
        listener.started(index, planned)
        listener.process_started(index, planned, len(self._parts[offset]) + 1, self.count,
                                 process_budget(self._policy))

    def add(self, offset: int, part: Measurement) -> None:
        parts = self._parts[offset]
        parts.append(part)
        self._recorder.listener.process_done(self.first + offset, len(parts), self.count, part)
        if self.segment[offset].ranks == 1:  # ranks of a job share the cores by design
            self._speeds.add(part)
        if part.status != STATUS_OK or len(parts) >= self.count:
            self._record(offset)

    def record_partial(self) -> None:
        for offset in self.pending():
            if self._parts[offset]:
                self._record(offset, f"{CUT_SHORT} {len(self._parts[offset])} of "
                                     f"{self.count} processes")

    def _record(self, offset: int, note: str | None = None) -> None:
        self._done.add(offset)
        parts = self._parts[offset]
        cpu = parts[0].case.device == "cpu" and len(parts) >= 2
        merged = merge_processes(parts, self._policy, self.count,
                                 self._speeds.spread() if cpu else None)
        if note:
            merged = dataclasses.replace(merged, warnings=(*merged.warnings, note))
        self._recorder.record(self.first + offset, merged)


def process_budget(policy: TimingPolicy) -> float:
    """The seconds one process of a case is planned to take: its warm-up and its most
    sampling time (for the progress shown; setting up a case is not counted)."""
    return policy.warmup_time + policy.max_time


def run_in_workers(rounds: Rounds, slot: WorkerSlot, device: DeviceInfo,
                    policy: TimingPolicy, timeout_for: Callable[[PlannedCase], float]) -> None:
    try:
        for number in range(rounds.count):
            if number:
                slot.replace()  # every round in fresh processes
            for offset in rounds.pending():
                planned = rounds.segment[offset]
                worker = slot.for_case(planned, device)
                rounds.started(offset)
                waited = rounds.wait_quiet()
                part = _measure(slot, worker, planned, device, policy, timeout_for(planned))
                rounds.add(offset, waited(part))
    except KeyboardInterrupt:
        rounds.record_partial()
        raise


def _measure(slot: WorkerSlot, worker: WorkerProcess, planned: PlannedCase, device: DeviceInfo,
             policy: TimingPolicy, timeout: float) -> Measurement:
    """One case in the worker; a lost worker fails the case and is replaced."""
    started = time.time()
    try:
        reply = worker.ask(MeasureCase(planned, device, policy), timeout)
    except WorkerLost as lost:
        slot.replace()  # a fresh process for the cases that remain
        return not_measured(planned.case, STATUS_FAILED, str(lost), started,
                            time.time() - started)
    if isinstance(reply, CaseMeasured):
        return Measurement.from_dict(reply.record)
    reason = reply.message if isinstance(reply, Refused) else f"unexpected reply {reply!r}"
    return not_measured(planned.case, STATUS_FAILED, reason, started, time.time() - started)


def skip_all(rounds: Rounds, reason: str) -> None:
    """Record every case of the segment as skipped for `reason`, starting nothing."""
    for offset in rounds.pending():
        rounds.started(offset)
        rounds.add(offset, not_measured(rounds.segment[offset].case, STATUS_SKIPPED, reason,
                                        time.time(), 0.0))


def run_distributed(
    rounds: Rounds,
    device: DeviceInfo,
    policy: TimingPolicy,
    backend: str,
    timeout_for: Callable[[PlannedCase], float],
    registry: Registry,
) -> None:
    """Each round is one torchrun job (fresh ranks) over the cases still pending; its
    ranks find the cases' benchmarks in `registry`."""
    from accelbench.runner.launcher import RankGroup

    ranks = rounds.segment[0].ranks
    for offset in rounds.pending():
        planned = rounds.segment[offset]
        if planned.benchmark.min_ranks > ranks:
            # Said without starting any rank: there would be nothing to measure.
            rounds.started(offset)
            reason = (f"needs at least {planned.benchmark.min_ranks} ranks; run with "
                      f"--nproc-per-node {planned.benchmark.min_ranks} or under torchrun")
            rounds.add(offset, not_measured(planned.case, STATUS_SKIPPED, reason,
                                            time.time(), 0.0))
    import os

    from accelbench.core.worker_env import combined

    env = combined(c.benchmark.environment(c.params, device) for c in rounds.segment)
    group = RankGroup(ranks, backend, registry, env.for_user(os.environ))
    try:
        for _ in range(rounds.count):
            runnable = rounds.pending()
            if not runnable:
                return
            _run_job(group, rounds, runnable, device, policy, timeout_for)
    except KeyboardInterrupt:
        rounds.record_partial()
        raise


def _run_job(group: RankGroup, rounds: Rounds, runnable: list[int], device: DeviceInfo,
             policy: TimingPolicy, timeout_for: Callable[[PlannedCase], float]) -> None:
    """One torchrun job over the cases at `runnable` (their offsets in the segment)."""
    group.run([rounds.segment[offset] for offset in runnable], device, policy, timeout_for,
              on_start=lambda i: rounds.started(runnable[i]),
              on_result=lambda i, m: rounds.add(runnable[i], m))


