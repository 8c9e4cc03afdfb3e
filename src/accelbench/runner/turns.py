"""Two processes measuring one case at the same time, taking turns: the pairs of
`accelbench ab`.

Measured one after the other, the two processes of a pair are seconds apart, and a shared
host's speed moves by several percent on that scale (on a 2-core VM, a GEMM's process
values over eight pairs of back-to-back processes differed by 12% (sd of the log ratio),
and by 4.4% when the two took turns every 50 ms). So both processes of a pair are given
the case at once, and a turn passes between them: a process holds it while it sets the
case up and warms up, then hands it over after each sample once it has held it for
`slice_s`; the process without it waits, doing nothing. Set-up and warm-up are done in
turn too, and both processes meet when they are ready to sample (`sampling`), so that
neither's sampling time is spent on the other's set-up. Host drift slower than a slice
touches both alike, and both run on the same CPUs (`cpus`).

The turn travels through two named pipes, one per process, each read by its process and
written by the other (and by the supervisor, which hands a process the turn for good when
its partner is lost). A process that finishes its case says so, and its partner then goes
on alone. A case that times nothing through the timing loop (its own protocol) holds the
turn from start to end: its pair runs one after the other, as it would without turns.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from dataclasses import dataclass
from pathlib import Path

SLICE_S = 0.05  # how long a process keeps the turn before it hands it over
_TURN = b"t"
_DONE = b"d"


@dataclass(frozen=True)
class TurnSpec:
    """One process's side of a pair: the pipe it is handed the turn through, the one it
    hands it over through, and whether it starts with it."""

    mine: str
    theirs: str
    first: bool
    slice_s: float = SLICE_S
    # The CPUs both processes of the pair run on (a CPU case's threads): on a shared host
    # two CPUs need not run alike, and a pair on different ones would not cancel that.
    cpus: tuple[int, ...] | None = None


class Turns:
    """The timing loop's coordinator in a process that takes turns (`core.timing`): after
    a sample, once the turn has been held for a slice, it is handed over and waited for.
    `begin` waits for the first turn; `end` hands it over for good."""

    def __init__(self, spec: TurnSpec) -> None:
        self._spec = spec
        # Read-write, so that opening never waits for the other end.
        self._mine = os.open(spec.mine, os.O_RDWR | os.O_NONBLOCK)
        self._theirs = os.open(spec.theirs, os.O_RDWR | os.O_NONBLOCK)
        self._alone = False
        self._since = time.perf_counter()
        self.handovers = 0

    def begin(self) -> None:
        if self._spec.cpus:
            pin(self._spec.cpus)
        if not self._spec.first:
            self._wait()
        self._since = time.perf_counter()

    def slowest(self, seconds: float) -> float:
        if not self._alone and time.perf_counter() - self._since >= self._spec.slice_s:
            os.write(self._theirs, _TURN)
            self.handovers += 1
            self._wait()
            self._since = time.perf_counter()
        return seconds

    def agree(self, value: int) -> int:
        return value

    def sampling(self) -> None:
        """Set up and warmed up: the partner gets the turn to reach this point too, so
        that both sample over the same stretch of time, neither's sampling time spent on
        the other's set-up."""
        if not self._alone:
            os.write(self._theirs, _TURN)
            self.handovers += 1
            self._wait()
        self._since = time.perf_counter()

    def end(self) -> None:
        """The case is done here: the partner goes on alone."""
        with contextlib.suppress(OSError):
            os.write(self._theirs, _DONE)
        for fd in (self._mine, self._theirs):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _wait(self) -> None:
        while True:
            ready, _, _ = select.select([self._mine], [], [], 1.0)
            if not ready:
                continue  # the supervisor ends this process if its partner hangs
            try:
                token = os.read(self._mine, 1)
            except BlockingIOError:
                continue
            if token == _DONE:
                self._alone = True
            return


def pin(cpus: tuple[int, ...]) -> None:
    """Every thread of this process on `cpus` (the threads a library started for an
    earlier case included); what cannot be pinned is left where it is."""
    try:
        tasks = [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        tasks = [0]
    for tid in tasks:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def pair_cpus(threads: int | None) -> tuple[int, ...] | None:
    """The CPUs a pair of a CPU case with `threads` threads runs on: the last of those
    this process may use (the first are where the supervisor and the system tend to
    run); None where the case names no thread count or there are not enough."""
    if not threads:
        return None
    try:
        usable = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return tuple(usable[-threads:]) if threads <= len(usable) else None


class TurnPair:
    """The pipes of one pair, made in `folder` (the supervisor's)."""

    def __init__(self, folder: Path, name: str) -> None:
        self._paths = {side: folder / f"{name}-{side}.turn" for side in ("a", "b")}
        for path in self._paths.values():
            os.mkfifo(path, 0o600)

    def spec(self, side: str, first: bool, cpus: tuple[int, ...] | None = None) -> TurnSpec:
        other = "b" if side == "a" else "a"
        return TurnSpec(str(self._paths[side]), str(self._paths[other]), first,
                        cpus=cpus)

    def release(self, side: str) -> None:
        """Hand `side` the turn for good: its partner is gone."""
        with contextlib.suppress(OSError):
            fd = os.open(self._paths[side], os.O_RDWR | os.O_NONBLOCK)
            try:
                os.write(fd, _DONE)
            finally:
                os.close(fd)

    def remove(self) -> None:
        for path in self._paths.values():
            with contextlib.suppress(OSError):
                path.unlink()
