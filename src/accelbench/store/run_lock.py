"""One process at a time goes on with a stored run (`accelbench run --resume RUN`).

Two resumes of one run at once would both measure the cases it lacks. The resume holds
a lock on the run from before it reads what is left until the run is closed; a second
one is refused (a UserError, exit 2) and names the holder where it can. The lock goes
with its holder, however it ends (a crash or SIGKILL included), so a run is never left
locked:

- SQLite: flock(2) on a file beside the store, `<store>.run-<RUN>.lock`, which says the
  holder's pid and host, and is removed when the lock is let go. (flock is advisory
  and, on most network file systems, local to each node.)
- PostgreSQL: a session-level advisory lock, held by the resume's connection to the
  database.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.errors import StoreError, UserError
from accelbench.store.location import POSTGRESQL

if TYPE_CHECKING:
    from accelbench.store.backend import Backend

# The first key of the two-key advisory locks (int4, int4) of runs: "accb".
_PG_NAMESPACE = 0x61636362


def busy(run_id: str, holder: str) -> UserError:
    return UserError(f"run {run_id} is being resumed by another accelbench process{holder}: "
                     "wait for it to end (one resume at a time)")


@contextlib.contextmanager
def hold(backend: Backend, run_id: str) -> Iterator[None]:
    """The run `run_id` of the store of `backend`, locked for this process (see the
    module docstring); refused when another holds it."""
    location = backend.location
    if location.kind == POSTGRESQL:
        with _advisory_lock(backend, run_id):
            yield
        return
    assert location.path is not None
    with _file_lock(location.path, run_id):
        yield


def lock_path(store: Path, run_id: str) -> Path:
    return store.with_name(f"{store.name}.run-{run_id}.lock")


@contextlib.contextmanager
def _file_lock(store: Path, run_id: str) -> Iterator[None]:
    path = lock_path(store, run_id)
    fd = _take(path, run_id)
    try:
        yield
    finally:
        # Removed while still held, so that no one locks a file that is going away.
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def _take(path: Path, run_id: str) -> int:
    import fcntl

    from accelbench.env.fingerprint import host_name

    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot lock run {run_id} ({path}): {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise busy(run_id, f" ({holder})" if holder else "") from None
        try:
            current = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            current = False
        if current:  # else its holder removed it as we opened it: take the new one
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {host_name()}\n".encode())
            return fd
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return text if text.isprintable() else ""


@contextlib.contextmanager
def _advisory_lock(backend: Backend, run_id: str) -> Iterator[None]:
    key = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big", signed=True)
    params = (_PG_NAMESPACE, key)
    rows = backend.query("SELECT pg_try_advisory_lock(CAST(? AS integer), CAST(? AS integer))",
                         params)
    if not rows[0][0]:
        raise busy(run_id, "")
    try:
        yield
    finally:
        with contextlib.suppress(StoreError):  # a lost connection has let it go
            backend.query("SELECT pg_advisory_unlock(CAST(? AS integer), CAST(? AS integer))",
                          params)
