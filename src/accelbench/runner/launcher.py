"""The supervising side of a distributed job: start the ranks with torchrun, follow them.

Rank 0 writes one JSON line when a case starts and one with its result; a rank whose
case failed writes one line saying so at once. A case that a rank fails, one that runs
past its timeout, or ranks that die, fail that case: the job is ended there and started
again for the cases that remain, so one bad case never costs the others.
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import STATUS_FAILED, Measurement, not_measured
from accelbench.core.registry import Registry
from accelbench.core.timing import TimingPolicy
from accelbench.core.worker_env import NONE, WorkerEnv
from accelbench.runner.lifeline import (
    end_job,
    owned_folder,
    owner_environment,
    parent_death_preexec,
)
from accelbench.runner.plan import PlannedCase
from accelbench.runner.rank_job import job_json
from accelbench.runner.worker_env import worker_environment

STARTUP_TIMEOUT_S = 300.0  # every rank imports torch and joins the group


class RankGroup:
    """`nproc_per_node` ranks of one torchrun job on this node, started with `env` set
    (see core.worker_env: the fresh folders it asks for live as long as each job)."""

    def __init__(self, nproc_per_node: int, backend: str, registry: Registry,
                 env: WorkerEnv = NONE, python: str | None = None) -> None:
        self.python = python  # None: this interpreter (another: a side of `accelbench ab`)
        self.nproc_per_node = nproc_per_node
        self.backend = backend
        self.registry = registry
        self.env = env

    def command(self, job: Path, results: Path) -> list[str]:
        return torchrun_command(self.nproc_per_node, "accelbench.runner.ranks", str(job),
                                str(results), python=self.python)

    def run(
        self,
        cases: Sequence[PlannedCase],
        device: DeviceInfo,
        policy: TimingPolicy,
        timeout_for: Callable[[PlannedCase], float],
        on_start: Callable[[int], None],
        on_result: Callable[[int, Measurement], None],
    ) -> None:
        """Run the cases as one job (or several, after a failure); report each by index."""
        done = 0
        with owned_folder() as tmp:
            attempt = 0
            while done < len(cases):
                attempt += 1
                remaining = cases[done:]
                job = Path(tmp) / f"job-{attempt}.json"
                results = Path(tmp) / f"results-{attempt}.jsonl"
                log = Path(tmp) / f"ranks-{attempt}.log"
                group_timeout = max(timeout_for(c) for c in remaining)
                job.write_text(job_json(self.registry, remaining, device, policy, self.backend,
                                        group_timeout), encoding="utf-8")
                _, environ = worker_environment(self.env, Path(tmp) / f"env-{attempt}")
                finished = self._follow(remaining, results, log, job, environ, timeout_for,
                                        _shifted_start(on_start, done),
                                        _shifted_result(on_result, done))
                done += finished

    def _follow(
        self,
        cases: Sequence[PlannedCase],
        results: Path,
        log: Path,
        job: Path,
        environ: dict[str, str],
        timeout_for: Callable[[PlannedCase], float],
        on_start: Callable[[int], None],
        on_result: Callable[[int, Measurement], None],
    ) -> int:
        """Run one job; returns how many cases it settled (each measured or failed)."""
        results.touch()
        with log.open("wb") as log_file:
            process = start_torchrun(self.command(job, results), environ, log_file)
        lines = _LineReader(results)
        progress = JobProgress(len(cases))
        started_at = time.time()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S + timeout_for(cases[0])

        def apply(events: list[Event]) -> None:
            nonlocal started_at, deadline
            for event in events:
                if isinstance(event, Started):
                    started_at = time.time()
                    deadline = time.monotonic() + timeout_for(cases[event.index])
                    on_start(event.index)
                elif isinstance(event, Finished):
                    on_result(event.index, Measurement.from_dict(event.measurement))
                else:
                    on_result(event.index, self._failed(cases[event.index], event, started_at))

        try:
            while not progress.done:
                records = lines.read()
                apply(progress.feed(records))
                if progress.ended:
                    # A rank failed its case: the others may wait for it forever inside
                    # the case's collectives, so the job ends now and starts again after.
                    end_job(process)
                    return progress.settled
                if records:
                    continue
                code = process.poll()
                if code is not None and not lines.read(peek=True):
                    apply(progress.fail(job_exit_reason(code, log, progress.echoing)))
                    return progress.settled
                if time.monotonic() > deadline:
                    end_job(process)
                    apply(progress.fail(
                        f"timed out after {timeout_for(cases[progress.settled]):g} s "
                        f"(all {self.nproc_per_node} ranks stopped)"))
                    return progress.settled
                time.sleep(0.05)
        except BaseException:
            end_job(process)
            raise
        process.wait(timeout=60)
        return progress.settled

    @staticmethod
    def _failed(planned: PlannedCase, failure: Failed, started_at: float) -> Measurement:
        if failure.measurement is not None:  # the failing rank's own account, details kept
            reported = Measurement.from_dict(failure.measurement)
            return dataclasses.replace(reported, case=planned.case, status=STATUS_FAILED,
                                       reason=failure.reason, timings=(), rates=(),
                                       measured=())
        return not_measured(planned.case, STATUS_FAILED, failure.reason, started_at,
                            time.time() - started_at)


def torchrun_command(nproc_per_node: int, module: str, *args: str,
                     python: str | None = None) -> list[str]:
    """torchrun (this Python's, or `python`'s) starting `python -m module args` on N
    ranks here."""
    return [python or sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={nproc_per_node}", "-m", module, *args]


def start_torchrun(command: Sequence[str], environ: dict[str, str] | None = None,
                   log: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """Start a torchrun job: in a session of its own, so that ending the job ends every
    rank and a rank ending its group never reaches this process's; with a parent-death
    signal and the owner's identity, so that the job also ends when this process dies
    (see runner.lifeline). On SIGTERM torchrun stops its ranks itself. With `log`, the
    job's output goes there (else to this process's)."""
    from accelbench.errors import EXIT_INTERNAL, UserError

    streams: dict[str, Any] = ({"stdout": log, "stderr": subprocess.STDOUT}
                               if log is not None else {})
    # What this process printed goes out before anything a rank prints.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return subprocess.Popen(list(command), stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                env={**owner_environment(), **(environ or {})},
                                preexec_fn=parent_death_preexec(signal.SIGTERM), **streams)
    except OSError as exc:
        raise UserError(f"could not start torchrun: {exc}", EXIT_INTERNAL) from None


def run_torchrun(nproc_per_node: int, argv: Sequence[str],
                 environ: dict[str, str] | None = None) -> int:
    """`accelbench ARGV` on N ranks of a torchrun job here (with `environ`, else this
    process's environment), its output this process's; the job's exit code. Ctrl-C or
    SIGTERM here ends the job's whole group."""
    process = start_torchrun(torchrun_command(nproc_per_node, "accelbench", *argv), environ)
    try:
        return process.wait()
    except BaseException:  # Ctrl-C, SIGTERM (Terminated): the job would not see them
        end_job(process)
        raise


def _shifted_start(on_start: Callable[[int], None], by: int) -> Callable[[int], None]:
    """A job's callbacks number its cases from 0; the caller's, from the first case left."""
    return lambda i: on_start(by + i)


def _shifted_result(on_result: Callable[[int, Measurement], None], by: int
                    ) -> Callable[[int, Measurement], None]:
    return lambda i, m: on_result(by + i, m)


@dataclass(frozen=True)
class Started:
    index: int


@dataclass(frozen=True)
class Finished:
    index: int
    measurement: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    index: int
    reason: str
    measurement: dict[str, Any] | None = None


Event = Started | Finished | Failed


class JobProgress:
    """What the lines of one job say about its cases, in whatever order they arrive.

    Rank 0 writes `start` and `result` lines; any rank whose case failed writes
    `rank_failed` at once, before the ranks exchange outcomes. Lines of different ranks
    interleave freely: a rank's failure of a case may come before rank 0's `start` of it
    (even before its `result` of the case before). Failures are kept by case index, so
    none is lost to the order, and the first case not yet settled that has one is failed
    with the first reason given for it; the job then ends (`ended`) without waiting on
    any clock. Cases are settled in order; `settled` counts them.

    A failure that a rank reports with `lost_peers` (other ranks already dead when it
    failed) only echoes their death, which broke its collectives; it is not taken, and
    the job's exit, sure to follow, says what happened.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.settled = 0
        self.ended = False
        self._announced = -1  # the last case whose start was passed on
        self.echoing: set[int] = set()  # ranks whose failure only echoed a lost peer
        self._failures: dict[int, dict[str, Any]] = {}

    @property
    def done(self) -> bool:
        return self.ended or self.settled >= self.count

    def feed(self, records: Sequence[dict[str, Any]]) -> list[Event]:
        events: list[Event] = []
        for record in records:
            if self.done:
                break  # after a failure the job is over; later lines change nothing
            kind = record["event"]
            index = record["index"]
            if index < self.settled:
                continue
            if kind == "start":
                self._announce(index, events)
            elif kind == "rank_failed":
                if not record.get("lost_peers"):
                    self._failures.setdefault(index, record)
                else:
                    self.echoing.add(record["rank"])
            else:
                self._announce(index, events)
                events.append(Finished(index, record["measurement"]))
                self.settled = index + 1
            failure = self._failures.get(self.settled)
            if failure is not None:
                self._announce(self.settled, events)
                events.append(Failed(self.settled, f"rank {failure['rank']}: {failure['reason']}",
                                     failure.get("measurement")))
                self.settled += 1
                self.ended = True
        return events

    def fail(self, reason: str) -> list[Event]:
        """The job ended (ranks exited or timed out) with the next case unsettled."""
        events: list[Event] = []
        self._announce(self.settled, events)
        events.append(Failed(self.settled, reason))
        self.settled += 1
        self.ended = True
        return events

    def _announce(self, index: int, events: list[Event]) -> None:
        if index > self._announced:
            self._announced = index
            events.append(Started(index))


class _LineReader:
    """The complete JSON lines appended to a file since the last read."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0

    def read(self, peek: bool = False) -> list[dict[str, Any]]:
        with self._path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        if not peek:
            self._offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


@dataclass(frozen=True)
class RankExit:
    """How one rank ended, as torchrun's summary of a failed job says."""

    rank: int
    exitcode: int

    def describe(self) -> str:
        if self.exitcode < 0:
            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = "a signal"
            return f"rank {self.rank} was killed by {name} (signal {-self.exitcode})"
        return f"rank {self.rank} exited with code {self.exitcode}"


_SUMMARY_ENTRY = re.compile(r"^\s*rank\s*:\s*(\d+).*?^\s*exitcode\s*:\s*(-?\d+)",
                            re.M | re.S)


def rank_exits(text: str) -> list[RankExit]:
    """The ranks that torchrun's summary lists as failed: the root cause (the first it
    saw) first, then the others. Empty if there is no summary."""
    root, sep, others = text.rpartition("Root Cause")
    if not sep:
        return []
    failures, _, _ = root.rpartition("Failures:")[2].partition("Root Cause")

    def entries(block: str) -> list[RankExit]:
        return [RankExit(int(rank), int(code))
                for rank, code in _SUMMARY_ENTRY.findall(block)]

    return [*entries(others)[:1], *entries(failures)]


def blamed_rank(exits: Sequence[RankExit], echoing: Collection[int]) -> RankExit | None:
    """The rank whose end failed the job.

    torchrun's root cause is the first failure it saw, to the second: a rank that only
    failed because a peer had died (it said so, `echoing`), or one that torchrun itself
    stopped with SIGTERM after the first failure, may come first. They are passed over
    for a rank that ended on its own, where there is one.
    """
    own = [e for e in exits if e.rank not in echoing and e.exitcode != -signal.SIGTERM]
    candidates = own or list(exits)
    return candidates[0] if candidates else None


def job_exit_reason(code: int, log: Path, echoing: Collection[int] = ()) -> str:
    """Why a job ended before its cases did: which rank died and how, from torchrun's
    summary in the log; else torchrun's exit code and its most telling line."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        text = ""
    blamed = blamed_rank(rank_exits(text), echoing)
    if blamed is not None:
        return blamed.describe()
    return f"ranks exited with code {code}{_last_line(log)}"


def _last_line(log: Path) -> str:
    """The most telling line of the ranks' output, for the failure reason."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return f": {ln[:300]}"
    return f": {lines[-1][:300]}" if lines else ""
