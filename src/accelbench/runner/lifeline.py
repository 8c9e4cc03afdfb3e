"""Processes that end with the run that started them, and the folders they leave behind.

`accelbench run` measures in worker processes and in torchrun jobs. A torchrun job lives
in a process session of its own, so that ending it ends every rank; the price is that
the death of accelbench itself (SIGKILL, the OOM killer, a closed container) no longer
reaches the ranks: they would measure cases that nobody stores, in a temporary folder
that nobody removes. So:

- torchrun gets a parent-death signal (Linux `PR_SET_PDEATHSIG`), and stops its ranks;
- each rank (and each worker) watches the pid of the accelbench process that owns it,
  which torchrun, sitting in between, hides from the parent-death signal; when the
  owner is gone, the rank ends its whole process group, torchrun included;
- temporary folders are named and marked with their owner's pid, and the next
  `accelbench run` removes those whose owner is gone.

SIGTERM (a scheduler, `kill`, `docker stop`) is made to stop a run as Ctrl-C does.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType

from accelbench.errors import Terminated

OWNER_ENV = "ACCELBENCH_OWNER_PID"  # the accelbench process a rank belongs to
WATCH_INTERVAL_S = 0.5  # how soon a process notices that its owner is gone
FOLDER_PREFIX = "accelbench-ranks-"
OWNER_FILE = "accelbench-owner"  # inside each folder: "PID START_TIME" of its owner
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PF_EXITING = 0x4  # Linux: the process has begun to exit; its sockets close after this


def running(pid: int) -> bool:
    """Whether a process is alive and not on its way out (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: only whether the process is there at all
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) "
    state, flags = fields[0], int(fields[6])
    return state not in ("Z", "X", "x") and not flags & PF_EXITING


def start_time(pid: int) -> str:
    """When a process started (clock ticks since boot; "" without /proc): with the pid,
    it names one process, even after the pid has been reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2:].split()[19]


# --- the parent-death signal ---------------------------------------------------------

def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return fn


def parent_death_preexec(sig: signal.Signals) -> Callable[[], None] | None:
    """A `preexec_fn` that has the child receive `sig` when the thread that started it
    ends (the supervising thread, which lives as long as the job); None off Linux.

    The C function is looked up here, in the parent: between fork and exec the child
    only calls it, and takes nothing that another thread might hold.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was set
            os.kill(os.getpid(), sig)

    return preexec


def die_with_parent(sig: signal.Signals = signal.SIGKILL) -> bool:
    """Have this process receive `sig` when the thread that started it ends."""
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


# --- watching the owner ----------------------------------------------------------------

def watch_owner(owner: int, on_gone: Callable[[], None],
                interval_s: float = WATCH_INTERVAL_S) -> threading.Thread:
    """A daemon thread that calls `on_gone` once the process `owner` is no longer running."""
    def watch() -> None:
        while running(owner):
            time.sleep(interval_s)
        on_gone()

    thread = threading.Thread(target=watch, name="accelbench-owner-watch", daemon=True)
    thread.start()
    return thread


def owner_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a torchrun job this process supervises: its ranks end with it."""
    return {**(os.environ if environ is None else environ), OWNER_ENV: str(os.getpid())}


def end_with_owner(environ: Mapping[str, str] | None = None) -> threading.Thread | None:
    """In a rank: end this process group once the accelbench process named in the
    environment is gone. Without the variable (a torchrun the user started) nothing
    is watched."""
    env = os.environ if environ is None else environ
    try:
        owner = int(env[OWNER_ENV])
    except (KeyError, ValueError):
        return None
    return watch_owner(owner, end_own_group)


def end_own_group() -> None:
    """Kill this process's group when it leads a session of its own (as the launcher
    starts torchrun: torchrun and its ranks, nothing else), else this process only, so
    that a shell's pipeline is never touched."""
    with contextlib.suppress(OSError):
        if os.getpgrp() == os.getsid(0):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def exit_with_owner(owner: int) -> None:
    """In a worker started by `owner`: exit at once once the owner is gone, even in the
    middle of a case (nobody would read its result)."""
    watch_owner(owner, lambda: os.kill(os.getpid(), signal.SIGKILL))


# --- temporary folders -----------------------------------------------------------------

@contextlib.contextmanager
def owned_folder() -> Iterator[Path]:
    """A temporary folder named and marked with this process, removed on the way out;
    if this process is killed, `remove_orphaned_folders` removes it later."""
    pid = os.getpid()
    with tempfile.TemporaryDirectory(prefix=f"{FOLDER_PREFIX}{pid}-") as tmp:
        path = Path(tmp)
        (path / OWNER_FILE).write_text(f"{pid} {start_time(pid)}\n")
        yield path


def remove_orphaned_folders(parent: Path | None = None) -> list[Path]:
    """Remove the folders of `owned_folder` whose owner is no longer running.

    Only folders of this user, in the temporary directory, with the prefix and a
    readable owner marker are considered; everything else is left alone.
    """
    where = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        candidates = list(where.glob(f"{FOLDER_PREFIX}*"))
    except OSError:
        return []
    for folder in candidates:
        if _orphaned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _orphaned(folder: Path) -> bool:
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return False
        pid_text, _, started = (folder / OWNER_FILE).read_text().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    if pid == os.getpid():
        return False
    return not running(pid) or (bool(started) and start_time(pid) != started)


# --- SIGTERM ---------------------------------------------------------------------------

@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM raises Terminated (a KeyboardInterrupt), so that it stops a run
    the way Ctrl-C does: what was measured is kept, the run is marked interrupted, the
    workers and ranks are ended. Later SIGTERMs are ignored while that happens."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
