"""Drain lists: the nodes a qualification found bad, one per line, for the operator (or
a script) to drain. A line is the host name, a space, and the Slurm reason of its
drain, which names the reason codes (docs/reasons.md) that failed it:

    gpu-node-07 Reason=accelbench:ACCEL_ECC_DBE,ACCEL_PCIE_WIDTH

so that each line drains its node with its own reason:

    while read -r node reason; do
        scontrol update NodeName="$node" State=DRAIN "$reason"; done < FILE

(`cut -d' ' -f1 FILE` gives the host names alone). accelbench writes the list and never
drains a node itself: taking nodes out of a cluster is the operator's decision. Host
names come from stored records and job states, which are not trusted: a name that is
not a plain host name is left out and said, and only codes of the table are named, so
every line can be handed to scontrol safely.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from accelbench.core.reasons import BY_CODE
from accelbench.errors import UserError

_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
REASON = "Reason=accelbench"


def plain_host(name: str) -> bool:
    """Whether `name` is a plain host name, safe on a command line."""
    return bool(_HOST.fullmatch(name))


def drain_command(path: str | Path) -> str:
    """The command that drains the nodes of a drain list, each with its reason."""
    return ('while read -r node reason; do scontrol update NodeName="$node" State=DRAIN '
            f'"$reason"; done < {shlex.quote(str(path))}')


def drain_reason(codes: Sequence[str]) -> str:
    """The Slurm reason of a drain: `Reason=accelbench:ACCEL_ECC_DBE,ACCEL_PCIE_WIDTH`, or
    `Reason=accelbench` without codes; only codes of the table are named."""
    known = [c for c in dict.fromkeys(codes) if c in BY_CODE]
    return f"{REASON}:{','.join(known)}" if known else REASON


def write_drain_list(path: str | Path, hosts: Iterable[str],
                     codes: Mapping[str, Sequence[str]] | None = None
                     ) -> tuple[list[str], list[str]]:
    """Write the plain host names among `hosts` (each once, in order) to `path`, each
    with the reason naming its `codes`; return (written, left out). An empty list is
    written too: no node to drain."""
    written: list[str] = []
    refused: list[str] = []
    for host in dict.fromkeys(hosts):
        (written if _HOST.fullmatch(host) else refused).append(host)
    target = Path(path).expanduser()
    lines = "".join(f"{h} {drain_reason((codes or {}).get(h, ()))}\n" for h in written)
    try:
        target.write_text(lines, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--drain-list {target}: cannot be written: "
                        f"{exc.strerror or exc}") from None
    return written, refused


def read_drain_list(path: str | Path) -> list[str]:
    """The host names of a drain list (the first word of each line)."""
    text = Path(path).expanduser().read_text(encoding="utf-8")
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def write_drain(path: str, hosts: list[str],
                codes: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Write the drain list; say on stderr what was written and what was left out."""
    import sys

    from accelbench.report.text import printable

    written, refused = write_drain_list(path, hosts, codes)
    for host in refused:
        print(f"accelbench: warning: {printable(host)!r} is not a plain host name: left out "
              "of the drain list", file=sys.stderr)
    print(f"accelbench: {len(written)} node(s) to drain written to {path}"
          + (f"; drain them with: {drain_command(path)}" if written else ""), file=sys.stderr)
    return written
