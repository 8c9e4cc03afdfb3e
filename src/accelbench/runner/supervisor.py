"""The supervising side of the worker process: start, ask, wait with a timeout, replace."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable

from accelbench.runner.messages import Reply, Request, Stop
from accelbench.runner.plan import PlannedCase
from accelbench.runner.worker import worker_main


class WorkerLost(Exception):
    """The worker died or stopped answering; the message says how."""


class Worker:
    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        # The worker ends with this process, even in the middle of a case: it watches
        # this pid, and, started from the main thread (which lives as long as the
        # process), it also gets a parent-death signal.
        on_main_thread = threading.current_thread() is threading.main_thread()
        self._process = ctx.Process(target=worker_main, args=(child, os.getpid(), on_main_thread),
                                    daemon=True, name="accelbench-worker")
        self._process.start()
        child.close()

    def ask(self, message: Request, timeout: float) -> Reply:
        """Send one request and wait for its answer, at most `timeout` seconds."""
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            raise WorkerLost(self._death()) from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._conn.poll(0.05):
                    return self._receive()
            except (EOFError, OSError):
                raise WorkerLost(self._death()) from None
            if not self._process.is_alive():
                # Drain an answer sent just before exiting.
                if self._conn.poll(0):
                    try:
                        return self._receive()
                    except (EOFError, OSError):
                        pass
                raise WorkerLost(self._death())
            if time.monotonic() >= deadline:
                self.kill()
                raise WorkerLost(f"timed out after {timeout:g} s (worker stopped)")

    def _receive(self) -> Reply:
        reply: Reply = self._conn.recv()
        return reply

    def _death(self) -> str:
        self._process.join(timeout=5)
        code = self._process.exitcode
        if code is None:
            self.kill()
            return "worker stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"worker process crashed ({name})"
        return f"worker process exited with code {code}"

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout=5)
        self._conn.close()

    def stop(self) -> None:
        """Ask the worker to finish, then make sure it has."""
        if self._process.is_alive():
            try:
                self._conn.send(Stop())
                self._process.join(timeout=10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


class WorkerSlot:
    """The worker process the next case runs in: replaced when it is lost, and when a
    case's worker key differs from those of the cases it already ran."""

    def __init__(self, factory: Callable[[], Worker]) -> None:
        self._factory = factory
        self.worker = factory()
        self._keys: set[str] = set()

    def for_case(self, planned: PlannedCase) -> Worker:
        worker_key = planned.benchmark.worker_key
        key = worker_key(planned.params) if worker_key else ""
        if key and self._keys - {key}:
            self.replace()
        if key:
            self._keys.add(key)
        return self.worker

    def replace(self) -> None:
        self.worker.stop()
        self.worker = self._factory()
        self._keys = set()
