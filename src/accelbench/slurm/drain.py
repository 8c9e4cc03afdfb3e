"""Drain lists: the nodes a qualification found bad, one host name per line, for the
operator (or a script) to drain:

    scontrol update NodeName=$(paste -sd, FILE) State=DRAIN Reason="accelbench"

accelbench writes the list and never drains a node itself: taking nodes out of a
cluster is the operator's decision. Host names come from stored records and job
states, which are not trusted: a name that is not a plain host name is left out and
said, so the file can be pasted into a command line safely.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from accelbench.errors import UserError

_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def drain_command(path: str | Path) -> str:
    """The command that drains the nodes of a drain list."""
    return (f"scontrol update NodeName=$(paste -sd, {shlex.quote(str(path))}) State=DRAIN "
            'Reason="accelbench"')


def write_drain_list(path: str | Path, hosts: Iterable[str]) -> tuple[list[str], list[str]]:
    """Write the plain host names among `hosts` (each once, in order) to `path`; return
    (written, left out). An empty list is written too: no node to drain."""
    written: list[str] = []
    refused: list[str] = []
    for host in dict.fromkeys(hosts):
        (written if _HOST.fullmatch(host) else refused).append(host)
    target = Path(path).expanduser()
    try:
        target.write_text("".join(f"{h}\n" for h in written), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--drain-list {target}: cannot be written: "
                        f"{exc.strerror or exc}") from None
    return written, refused


def write_drain(path: str, hosts: list[str]) -> list[str]:
    """Write the drain list; say on stderr what was written and what was left out."""
    import sys

    from accelbench.report.text import printable

    written, refused = write_drain_list(path, hosts)
    for host in refused:
        print(f"accelbench: warning: {printable(host)!r} is not a plain host name: left out "
              "of the drain list", file=sys.stderr)
    print(f"accelbench: {len(written)} node(s) to drain written to {path}"
          + (f"; drain them with: {drain_command(path)}" if written else ""), file=sys.stderr)
    return written
