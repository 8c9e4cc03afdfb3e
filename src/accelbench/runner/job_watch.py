"""Watching a job the user started with torchrun, where no accelbench supervises the ranks.

A node that dies or stops must cost one case, not the job: its peers would otherwise wait
inside a collective until the process group's timeout, or for ever. Every rank therefore
keeps a side channel to the job's TCP store (the one torchrun's agent serves at
MASTER_ADDR:MASTER_PORT for the process group) and a watchdog thread that, while the
main thread may be blocked in a collective:

- answers rank 0's liveness probes, so that rank 0 can name the ranks (and nodes) that
  stopped answering: dead (their connection closed) or stopped (SIGSTOP, a hung node);
- on the case's deadline, says the group is broken; on rank 0 it then settles the run
  (`on_broken`, see rank_session), on the other ranks it waits for rank 0's word that
  the run is settled, and ends the process;
- ends the process once rank 0 has settled the run, whatever the main thread is doing.

Keys live under "accelbench/watch/" in the store. torch is imported only when a channel
is opened.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

from accelbench.core.untrusted import is_decimal

PREFIX = "accelbench/watch/"
POLL_S = 0.2  # how often the watchdog looks at the store
PROBE_WAIT_S = 10.0  # how long rank 0 waits for every live rank to answer a probe
# After a broken group, how long a rank other than 0 waits for rank 0 to settle the run
# before it ends anyway: the probe, and storing what is left.
SETTLE_WAIT_S = PROBE_WAIT_S + 30.0
PEER_LOST = "a rank lost its peers"  # how rank 0's watchdog heard of a broken group


class Channel:
    """The keys of the side channel, on a store client of this process's own."""

    def __init__(self, store: Any, rank: int, world_size: int) -> None:
        self._store = store
        self.rank = rank
        self.world_size = world_size
        self._answered = 0
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, rank: int, world_size: int, timeout_s: float,
                environ: Mapping[str, str] | None = None) -> Channel | None:
        """A client of the job's store; None without one (the job was not started with
        MASTER_ADDR/MASTER_PORT), so that nothing can be watched."""
        import datetime as dt

        from torch.distributed import PrefixStore, TCPStore  # type: ignore[attr-defined]

        env = os.environ if environ is None else environ
        host, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT", "")
        if not host or not is_decimal(port):
            return None
        try:
            client = TCPStore(host, int(port), is_master=False,
                              timeout=dt.timedelta(seconds=timeout_s))
        except Exception:  # no side channel: the job runs unwatched
            return None
        return cls(PrefixStore(PREFIX, client), rank, world_size)

    def _add(self, key: str, amount: int) -> int:
        with self._lock:
            return int(self._store.add(key, amount))

    def _has(self, key: str) -> bool:
        with self._lock:
            return bool(self._store.check([key]))

    def _set(self, key: str, value: str) -> None:
        with self._lock:
            self._store.set(key, value)

    def answer(self) -> None:
        """Answer rank 0's latest probe, if not yet answered."""
        probe = self._add("probe", 0)
        if probe > self._answered:
            self._set(f"alive/{probe}/{self.rank}", "1")
            self._answered = probe

    def probe(self, wait_s: float = PROBE_WAIT_S) -> list[int]:
        """The ranks that do not answer within `wait_s` (rank 0 asks; it is alive)."""
        probe = self._add("probe", 1)
        self._set(f"alive/{probe}/{self.rank}", "1")
        self._answered = probe
        silent = set(range(self.world_size)) - {self.rank}
        end = time.monotonic() + wait_s
        while silent and time.monotonic() < end:
            silent = {r for r in silent if not self._has(f"alive/{probe}/{r}")}
            if silent:
                time.sleep(POLL_S / 2)
        return sorted(silent)

    def say_broken(self) -> None:
        self._add("broken", 1)

    def broken(self) -> bool:
        return self._add("broken", 0) > 0

    def fail_case(self, index: int, reason: str) -> None:
        """This rank's own failure of case `index`, for rank 0's reason."""
        self._set(f"failed/{index}/{self.rank}", reason)

    def failures(self, index: int) -> dict[int, str]:
        with self._lock:
            out = {}
            for r in range(self.world_size):
                key = f"failed/{index}/{r}"
                if self._store.check([key]):
                    out[r] = self._store.get(key).decode(errors="replace")
            return out

    def settle(self) -> None:
        """Rank 0 has stored what it can: every rank may end."""
        self._set("settled", "1")

    def settled(self) -> bool:
        return self._has("settled")

    def leave(self) -> None:
        """Rank 0 is leaving (its output written): the others need not wait longer."""
        self._set("left", "1")

    def left(self) -> bool:
        return self._has("left")


class Watchdog:
    """The watchdog thread of one rank (see the module docstring).

    `on_broken(index, how)` runs on rank 0 when the group breaks during case `index`
    (its deadline passed, or another rank said so) and must end the process; the main
    thread, when it finds the group broken itself, calls `broken_here`.
    """

    def __init__(self, channel: Channel,
                 on_broken: Callable[[int, str], None] | None = None) -> None:
        self.channel = channel
        self._on_broken = on_broken
        self._case: tuple[int, float, float] | None = None  # index, deadline, timeout
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="accelbench-watchdog",
                                        daemon=True)
        self._gone_at: float | None = None  # when this rank saw the group broken
        self._stopped = threading.Event()
        self._thread.start()

    def stop(self) -> None:
        """The cases are over: stop watching, before the job's store goes away (its
        client must not be in use while the process exits)."""
        self._stopped.set()
        self._thread.join(timeout=10 * POLL_S)

    @contextmanager
    def case(self, index: int, timeout_s: float) -> Iterator[None]:
        with self._lock:
            self._case = (index, time.monotonic() + timeout_s, timeout_s)
        try:
            yield
        finally:
            with self._lock:
                self._case = None

    def broken_here(self) -> None:
        """The main thread found the group broken: tell the others; on a rank other than
        0, wait for rank 0 to settle the run (answering its probe), then end."""
        self.channel.say_broken()
        if self.channel.rank != 0:
            self._wait_and_end("its group lost a peer")

    def _loop(self) -> None:
        while not self._stopped.wait(POLL_S):
            try:
                self._look()
            except Exception as exc:  # the store's server went with rank 0's node
                if self._stopped.is_set():
                    return
                if self.channel.rank != 0:
                    self._end(f"the job's store stopped answering ({exc})")
                print(f"accelbench: warning: the job's watchdog stopped: {exc}",
                      file=sys.stderr, flush=True)
                return

    def _look(self) -> None:
        channel = self.channel
        channel.answer()
        if channel.rank != 0:
            if channel.settled():
                self._wait_and_end("rank 0 has stored the run after a lost peer")
            if self._gone_at is not None and time.monotonic() > self._gone_at + SETTLE_WAIT_S:
                self._end("rank 0 did not settle the run")
        with self._lock:
            current = self._case
        if current is None:
            return
        index, deadline, timeout_s = current
        overdue = time.monotonic() > deadline
        if not overdue and not (channel.rank == 0 and channel.broken()):
            return
        how = f"timed out after {timeout_s:g} s" if overdue else PEER_LOST
        if channel.rank == 0:
            if self._on_broken is not None:
                self._on_broken(index, how)
            return
        if self._gone_at is None:
            channel.say_broken()
            self._gone_at = time.monotonic()
            print(f"accelbench: rank {channel.rank}: case {index} {how}; waiting for "
                  "rank 0 to store the run", file=sys.stderr, flush=True)

    def _wait_and_end(self, why: str) -> None:
        """Until rank 0 has left (after storing the run and writing its output: were
        this rank to end first, torchrun's agent would stop rank 0 with SIGTERM), then
        end."""
        end = time.monotonic() + SETTLE_WAIT_S
        while time.monotonic() < end:
            try:
                if self.channel.left():
                    break
            except Exception:  # rank 0 is gone
                break
            time.sleep(POLL_S)
        self._end(why)

    def _end(self, why: str) -> None:
        from accelbench.errors import EXIT_CASE_FAILED

        print(f"accelbench: rank {self.channel.rank}: ending: {why}", file=sys.stderr,
              flush=True)
        end_process(EXIT_CASE_FAILED)


def end_process(code: int) -> None:
    """Leave now: a broken process group cannot be shut down (its threads may wait on a
    peer for ever), so nothing of it is torn down."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
