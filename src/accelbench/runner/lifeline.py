"""Processes that end with the run that started them, and the folders they leave behind.

`accelbench run` measures in worker processes and in torchrun jobs. A torchrun job lives
in a process session of its own, so that ending it ends every rank; the price is that
the death of accelbench itself (SIGKILL, the OOM killer, a closed container) no longer
reaches the ranks: they would measure cases that nobody stores, in a temporary folder
that nobody removes. So:

- torchrun gets a parent-death signal (Linux `PR_SET_PDEATHSIG`), and stops its ranks;
- each rank (and each worker) watches the accelbench process that owns it (its pid and
  start time, so that a reused pid is not taken for it), which torchrun, sitting in
  between, hides from the parent-death signal; when the owner is gone, the rank ends
  itself, with its process group where that group is its own or the job's (never a
  group it shares with processes outside the job, such as a cron script's);
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
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import NoReturn

from accelbench.errors import Terminated

OWNER_ENV = "ACCELBENCH_OWNER_PID"  # the accelbench process a rank belongs to
OWNER_START_ENV = "ACCELBENCH_OWNER_START"  # and its start time (see start_time)
WATCH_INTERVAL_S = 0.5  # how soon a process notices that its owner is gone
FOLDER_PREFIX = "accelbench-ranks-"
OWNER_FILE = "accelbench-owner"  # inside each folder: "PID START_TIME" of its owner
END_GRACE_S = 10.0  # how long a job is given to stop on SIGTERM, then on SIGKILL
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


def parent_of(pid: int) -> int | None:
    """The pid of a process's parent (None without /proc or once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def is_process(pid: int, started: str) -> bool:
    """Whether `pid` still names the process that started at `started` (by pid alone
    where the start time is not known)."""
    return running(pid) and (not started or start_time(pid) in ("", started))


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
                interval_s: float = WATCH_INTERVAL_S,
                started: str | None = None) -> threading.Thread:
    """A daemon thread that calls `on_gone` once the process `owner` is no longer running.

    `started` is the owner's start time, as it gave it itself; by default the one read
    now. A process with the owner's pid that started at another time is another process
    (the owner is gone and its pid reused)."""
    if started is None:
        started = start_time(owner)

    def watch() -> None:
        while is_process(owner, started):
            time.sleep(interval_s)
        on_gone()

    thread = threading.Thread(target=watch, name="accelbench-owner-watch", daemon=True)
    thread.start()
    return thread


def owner_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a torchrun job this process supervises: its ranks end with it.
    It names this process by pid and start time, read here, so that a rank recognises
    a reused pid even when this process died before the rank began watching."""
    pid = os.getpid()
    return {**(os.environ if environ is None else environ),
            OWNER_ENV: str(pid), OWNER_START_ENV: start_time(pid)}


def end_with_owner(environ: Mapping[str, str] | None = None) -> threading.Thread | None:
    """In a rank: end this process once the accelbench process named in the environment
    is gone, with its process group where that group is the job's (see `job_group`).
    Without the variable (a torchrun the user started) nothing is watched."""
    env = os.environ if environ is None else environ
    try:
        owner = int(env[OWNER_ENV])
    except (KeyError, ValueError):
        return None
    started = env.get(OWNER_START_ENV) or None  # None: the start time read now
    group = job_group(owner, started or "")
    return watch_owner(owner, lambda: end_rank(group), started=started)


def job_group(owner: int, started: str = "") -> int | None:
    """The process group this rank may kill with itself when its owner is gone, decided
    while the owner lives; None for none.

    - The rank's own group, where the rank leads a session of its own (as torchrun
      starts its ranks): only the rank and what it started are in it.
    - torchrun's group, where torchrun leads a session of its own, the rank is its
      child, and torchrun is the child of the owner (as accelbench starts torchrun).

    A group that the rank shares with anything else (torchrun started in the caller's
    group, under a shell, cron or systemd) is never killed: the rank then ends alone,
    and torchrun with its parent-death signal.
    """
    try:
        group, session, parent = os.getpgrp(), os.getsid(0), os.getppid()
    except OSError:
        return None
    if group != session:
        return None
    if group == os.getpid():
        return group
    if group == parent and parent_of(parent) == owner and is_process(owner, started):
        return group
    return None


def end_rank(group: int | None) -> None:
    """Kill `group` (see `job_group`) if this process is still in it, then this process."""
    with contextlib.suppress(OSError):
        if group is not None and os.getpgrp() == group:
            os.killpg(group, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def end_job(process: subprocess.Popen[bytes], grace_s: float = END_GRACE_S) -> None:
    """Stop a job started in a session of its own (torchrun and every rank in its group):
    SIGTERM to its group, then SIGKILL if it has not ended after `grace_s`."""
    if process.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def exit_with_owner(owner: int) -> None:
    """In a worker started by `owner`: exit at once once the owner is gone, even in the
    middle of a case (nobody would read its result)."""
    watch_owner(owner, lambda: os.kill(os.getpid(), signal.SIGKILL))


# --- temporary folders -----------------------------------------------------------------

@contextlib.contextmanager
def owned_folder() -> Iterator[Path]:
    """A temporary folder named and marked with this process, removed on the way out;
    if this process is killed, `remove_orphaned_folders` removes it later."""
    path = new_owned_folder()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def new_owned_folder() -> Path:
    """A temporary folder like `owned_folder`'s, for its owner to remove."""
    pid = os.getpid()
    path = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{pid}-"))
    (path / OWNER_FILE).write_text(f"{pid} {start_time(pid)}\n")
    return path


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


def exit_rank(code: int) -> NoReturn:
    """End a rank of a torchrun job with `code`, its work done and its process group
    destroyed, without the interpreter's teardown: what is registered to run at exit runs
    and the standard streams are flushed, then the process ends (os._exit).

    In the teardown, PyTorch's Gloo backend can abort the process ("terminate called
    without an active exception", SIGABRT) when one of its threads is still alive while
    the interpreter finalizes, even after destroy_process_group(); torchrun would then
    report a rank that did all it had to as failed, and the job with it."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
