"""A worker process running another Python interpreter (a side of `accelbench ab`,
`runner.stack`): started with `python -m accelbench.runner.foreign_main`, it speaks to
this process over an inherited socket as a spawned worker does over its pipe, and what it
wrote to stderr last says why it died (a module its environment lacks, say)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING

from accelbench.errors import UserError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

_STDERR_TAIL = 400  # characters of the last line kept


class Foreign:
    """A worker running another interpreter, as `supervisor.Worker` sees its process."""

    def __init__(self, process: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
        self._popen = process
        self._stderr = stderr

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout)

    def terminate(self) -> None:
        if self._popen.poll() is None:
            self._popen.terminate()

    def kill(self) -> None:
        if self._popen.poll() is None:
            self._popen.kill()
        self._popen.wait()
        self._stderr.close()

    def said(self) -> str:
        """The last line the process wrote to stderr, as ': LINE'; '' if none."""
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 4 * _STDERR_TAIL))
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return f": {lines[-1][:_STDERR_TAIL]}" if lines else ""


def start_foreign(python: str, environ: Mapping[str, str], path: tuple[str, ...]
                  ) -> tuple[Connection, Foreign]:
    """Start `python` as a worker (`runner.foreign_main`) with `environ` set over this
    process's environment and `path` first on its import path; returns the connection
    to it and its process."""
    from multiprocessing.connection import Connection

    ours, theirs = socket.socketpair()
    env = {**os.environ, **environ}
    env["PYTHONPATH"] = os.pathsep.join([*path, *filter(None, [env.get("PYTHONPATH")])])
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 (kept by the process's Foreign)
    try:
        process = subprocess.Popen(
            [python, "-m", "accelbench.runner.foreign_main", str(theirs.fileno()),
             str(os.getpid())],
            env=env, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
            pass_fds=(theirs.fileno(),), start_new_session=False)
    except OSError as exc:
        ours.close()
        stderr.close()
        raise UserError(f"could not start {python}: {exc.strerror or exc}") from None
    finally:
        theirs.close()
    return Connection(ours.detach()), Foreign(process, stderr)
