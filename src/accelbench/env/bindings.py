"""The one loader of the optional vendor libraries (pynvml, amdsmi).

Both are imported lazily, only when a reading is asked for: a machine without them, or
with one whose shared library does not load (a container without the driver), still
runs everything else. `load_binding` says which of the two happened, with the line that
installs them, so that every reader (telemetry, the host's GPU use) reports the same
reason.

Their own output. amdsmi prints to stdout when it cannot find libamd_smi.so (from Python
at import, and its C library may write to file descriptor 1 directly), which would break
`--json` and clutter every table. So the import, and each library's start-up call
(`quietly`), run with file descriptor 1 and sys.stdout redirected: what the import said
becomes part of the reason the binding is unavailable, and what a start-up call said goes
to stderr, once per process. A binding that failed to load is not tried again in the same
process (a failed import is not cached by Python, and would print each time).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

Importer = Callable[[str], Any]
T = TypeVar("T")

INSTALL_HINT = "pip install 'accelbench[telemetry]'"


class BindingUnavailable(Exception):
    """A vendor library (or a device through it) cannot be used; the message says why."""


# Why each binding that failed to load with the real importer did, for this process.
_FAILED: dict[str, str] = {}
# What a library said at start-up that was already sent to stderr.
_REPORTED: set[str] = set()
_STDOUT_LOCK = threading.RLock()


def load_binding(name: str, importer: Importer = importlib.import_module) -> Any:
    """The binding module; BindingUnavailable with the reason when it is absent or does
    not load. `importer` is the seam tests hand a fake through; with the real importer a
    binding that failed is not imported again in this process."""
    cached = importer is importlib.import_module
    if cached:
        loaded = sys.modules.get(name)
        if loaded is not None:
            return loaded
        if name in _FAILED:
            raise BindingUnavailable(_FAILED[name])
    said = Said()
    try:
        with said.capture():
            module = importer(name)
    except ImportError as exc:
        raise _unavailable(name, f"{name} is not installed ({INSTALL_HINT})", said,
                           cached) from exc
    except Exception as exc:  # a binding that fails while loading its shared library
        raise _unavailable(name, f"{name} did not load: {_line(exc)}", said, cached) from exc
    said.report()
    return module


def _unavailable(name: str, reason: str, said: Said, cached: bool) -> BindingUnavailable:
    if said.first_line:
        reason = f"{reason} (it printed: {said.first_line})"
    if cached:
        _FAILED[name] = reason
    return BindingUnavailable(reason)


def quietly(fn: Callable[..., T], *args: object) -> T:
    """fn(*args), a vendor library's call, with what it prints to stdout sent to stderr
    instead (each distinct message once per process)."""
    said = Said()
    try:
        with said.capture():
            return fn(*args)
    finally:
        said.report()


class Said:
    """What a vendor library wrote to stdout while captured."""

    def __init__(self) -> None:
        self.text = ""

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    @contextlib.contextmanager
    def capture(self) -> Iterator[None]:
        """File descriptor 1 and sys.stdout redirected for the block; what was written to
        either is kept in `text`. Where fd 1 cannot be duplicated, only sys.stdout is."""
        with _STDOUT_LOCK, contextlib.ExitStack() as stack:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            saved = _dup_stdout()
            sink = stack.enter_context(tempfile.TemporaryFile()) if saved is not None else None
            text = io.StringIO()
            try:
                if saved is not None and sink is not None:
                    os.dup2(sink.fileno(), 1)
                with contextlib.redirect_stdout(text):
                    yield
            finally:
                if saved is not None and sink is not None:
                    _flush_c_stdio()
                    os.dup2(saved, 1)
                    os.close(saved)
                    sink.seek(0)
                    self.text += sink.read().decode("utf-8", "replace")
                self.text += text.getvalue()

    def report(self) -> None:
        """Send what was said to stderr, unless the same was sent before."""
        message = self.text.strip()
        if not message or message in _REPORTED:
            return
        _REPORTED.add(message)
        with contextlib.suppress(Exception):
            print(message, file=sys.stderr)


def _dup_stdout() -> int | None:
    try:
        return os.dup(1)
    except OSError:
        return None


def _flush_c_stdio() -> None:
    """Flush C's stdout buffer, so a library's printf lands in the capture, not later."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
