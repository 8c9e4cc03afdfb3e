"""What a run was asked for (its stored request, core.request), as the reports show it:
each field that is not its default, one row each; `accelbench show RUN --request` prints
the whole request as JSON, which `accelbench run --request FILE` runs again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from accelbench.core.request import RunRequest
from accelbench.report.text import printable


def request_rows(request: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(field, value) of a stored request: the command always, then each field given a
    value other than its default; none for a run stored without a request. The store
    keeps requests with their secrets redacted; they are shown as stored."""
    if request is None:
        return []
    defaults = RunRequest().to_dict()
    rows = [("command", printable(str(request.get("command", "?"))))]
    for name, value in request.items():
        if name in ("format", "command") or value == defaults.get(name):
            continue
        rows.append((name, _shown(value)))
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, sort_keys=True, default=str))
