"""The one check of a versioned format: refuse what this accelbench cannot read, upgrade
what is older, step by step.

Every stored or exchanged format (measurement records, stack fingerprints, result
exports, baselines, profile analyses) carries a `format_version`; each module that owns
a format keeps its history in its docstring and its upgrades in a table, and reads
through `upgrade`. Problems are StoreErrors: one line, the store's exit code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from accelbench.errors import StoreError

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


def read_version(
    data: object, what: str, newest: int, *, default: int | None = 1,
    error: Callable[[str], Exception] = StoreError,
) -> int:
    """The format_version of `data`, checked; `what` names the format in messages.

    A record without one is of version `default` (None: it must have one). `error` is
    the error raised: the store's, plain usage for files a user writes by hand, or a
    ValueError for a part of a record that its record reads on its own."""
    if not isinstance(data, dict):
        raise error(f"{what} is not a JSON object")
    version = data.get("format_version", default)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise error(f"{what} has an invalid format_version: {version!r}")
    if version > newest:
        raise error(
            f"{what} is format version {version}, newer than this accelbench reads "
            f"({newest}); upgrade accelbench to read it"
        )
    return version


def upgrade(
    data: object, what: str, newest: int, upgrades: Mapping[int, Upgrade], *,
    default: int | None = 1, error: Callable[[str], Exception] = StoreError,
) -> dict[str, Any]:
    """`data` in format `newest`: checked, then upgraded one version at a time
    (`upgrades[v]` turns version v into v + 1). The input is not modified."""
    version = read_version(data, what, newest, default=default, error=error)
    assert isinstance(data, dict)
    out: dict[str, Any] = data
    while version < newest:
        try:
            out = upgrades[version](out)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise error(f"cannot upgrade {what} from format version {version}: "
                             f"{type(e).__name__}: {e}") from None
        version += 1
    return out
