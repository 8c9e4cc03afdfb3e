"""The supervising side of the worker process: start, ask, wait with a timeout, replace."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from accelbench.core.device import DeviceInfo
from accelbench.core.worker_env import NONE, WorkerEnv
from accelbench.runner.messages import Reply, Request, Stop
from accelbench.runner.plan import PlannedCase
from accelbench.runner.worker import worker_main
from accelbench.runner.worker_env import worker_environment


class WorkerLost(Exception):
    """The worker died or stopped answering; the message says how."""


class WorkerProcess(Protocol):
    """What the supervisor asks of a worker process (`Worker`; tests hand in fakes)."""

    def ask(self, message: Request, timeout: float) -> Reply:
        """The answer to one request, within `timeout` seconds; WorkerLost otherwise."""
        ...

    def stop(self) -> None:
        """End the process, asking it first."""
        ...

    def kill(self) -> None:
        """End the process now."""
        ...


# Starts a worker process with an environment (`Worker`, or a test's fake).
WorkerFactory = Callable[[WorkerEnv], WorkerProcess]


class Worker:
    """One worker process, started with `env` set before anything in it imports torch;
    the fresh folders `env` asks for live as long as the process. With `python`, the
    process runs that interpreter (a side of `accelbench ab`, `runner.stack`), with the
    folders of `path` first on its import path."""

    def __init__(self, env: WorkerEnv = NONE, python: str | None = None,
                 path: tuple[str, ...] = ()) -> None:
        self._folder, environ = worker_environment(env)
        self._process: _Process
        if python is not None:
            from accelbench.runner.foreign import start_foreign

            self._conn, self._process = start_foreign(python, environ, path)
            return
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        # The worker ends with this process, even in the middle of a case: it watches
        # this pid, and, started from the main thread (which lives as long as the
        # process), it also gets a parent-death signal.
        on_main_thread = threading.current_thread() is threading.main_thread()
        self._process = ctx.Process(target=worker_main,
                                    args=(child, os.getpid(), on_main_thread, environ),
                                    daemon=True, name="accelbench-worker")
        self._process.start()
        child.close()

    def ask(self, message: Request, timeout: float) -> Reply:
        """Send one request and wait for its answer, at most `timeout` seconds."""
        self.send(message)
        return self.receive(timeout)

    def send(self, message: Request) -> None:
        """Send one request without waiting (`receive` waits for its answer)."""
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            raise WorkerLost(self._death()) from None

    def ready(self) -> bool:
        """Whether `receive` would return (or raise) at once: an answer is waiting, or the
        process has ended."""
        try:
            return bool(self._conn.poll(0)) or not self._process.is_alive()
        except (EOFError, OSError):
            return True

    def receive(self, timeout: float) -> Reply:
        """The answer to the request sent, within `timeout` seconds; WorkerLost otherwise
        (the worker is stopped when it timed out)."""
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
        said = getattr(self._process, "said", lambda: "")()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"worker process crashed ({name}){said}"
        return f"worker process exited with code {code}{said}"

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout=5)
        self._conn.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def stop(self) -> None:
        """Ask the worker to finish, then make sure it has."""
        if self._process.is_alive():
            try:
                self._conn.send(Stop())
                self._process.join(timeout=10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


class _Process(Protocol):
    """What `Worker` needs of its process: a multiprocessing.Process, or a started
    interpreter (`runner.foreign.Foreign`)."""

    @property
    def exitcode(self) -> int | None: ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class WorkerSlot:
    """The worker process the next case runs in, started when a case needs it: replaced
    when it is lost, when a case's worker key differs from those of the cases it already
    ran, and when a case needs another environment."""

    def __init__(self, factory: WorkerFactory,
                 environ: Mapping[str, str] | None = None) -> None:
        self._factory = factory
        self._environ = os.environ if environ is None else environ
        self._worker: WorkerProcess | None = None
        self._env = NONE
        self._keys: set[str] = set()
        self.starts = 0  # worker processes started, for the record and the tests

    @property
    def worker(self) -> WorkerProcess:
        if self._worker is None:
            self._worker = self._factory(self._env)
            self.starts += 1
        return self._worker

    def for_case(self, planned: PlannedCase, device: DeviceInfo) -> WorkerProcess:
        key, _ = planned.benchmark.worker_identity(planned.params, device)
        env = planned.benchmark.environment(planned.params, device).for_user(self._environ)
        if env != self._env or (key and self._keys - {key}):
            self.release()
            self._env = env
        if key:
            self._keys.add(key)
        return self.worker

    def replace(self) -> None:
        """A fresh process, with the same environment, for the cases that follow."""
        self.release()

    def release(self) -> None:
        """Stop the worker, if one runs (a distributed job is about to use the devices);
        the next case starts a fresh one."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        self._keys = set()

    def kill(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
