"""The one loader of the optional vendor libraries (pynvml, amdsmi).

Both are imported lazily, only when a reading is asked for: a machine without them, or
with one whose shared library does not load (a container without the driver), still
runs everything else. `load_binding` says which of the two happened, with the line that
installs them, so that every reader (telemetry, the host's GPU use) reports the same
reason.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Importer = Callable[[str], Any]

INSTALL_HINT = "pip install 'accelbench[telemetry]'"


class BindingUnavailable(Exception):
    """A vendor library (or a device through it) cannot be used; the message says why."""


def load_binding(name: str, importer: Importer = importlib.import_module) -> Any:
    """The binding module; BindingUnavailable with the reason when it is absent or does
    not load. `importer` is the seam tests hand a fake through."""
    try:
        return importer(name)
    except ImportError as exc:
        raise BindingUnavailable(f"{name} is not installed ({INSTALL_HINT})") from exc
    except Exception as exc:  # a binding that fails while loading its shared library
        raise BindingUnavailable(f"{name} did not load: {_line(exc)}") from exc


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
