"""The batch scripts `accelbench slurm` submits, as text a person can read and submit by
hand (`--print`).

A job is handed the request it runs (core.request) as JSON, written into its script, and
runs `accelbench COMMAND --request FILE`: the options were read and checked when the job
was submitted, and the script says what the job will do. The JSON is written in a quoted
here-document, which the shell copies as it is. A job across nodes hands it on to every
node in the environment of its tasks (its batch script runs on the first node only, and
the nodes may share no file system), and each node's task writes it to a file there.

Every value that reaches a shell line is quoted with shlex.quote. `#SBATCH` lines are
read by sbatch, not by a shell, so their values are checked instead: a value with
white space, a quote, a backslash, a `%` (Slurm's file-name patterns) or a control
character is refused (exit 2) rather than written."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.core.request import RunRequest

QUALIFY_JOB = "accelbench-qualify"
SCALING_JOB = "accelbench-scaling"
DEFAULT_RDZV_PORT = 29500
# Ends the here-document a request is written in: no line of a request's JSON is this
# (json.dumps indents every line within its braces, and escapes line breaks in strings).
END_OF_REQUEST = "ACCELBENCH_REQUEST"
# How a job across nodes hands its request from the batch script (first node) to every
# node's task: srun copies the environment to each.
REQUEST_VARIABLE = "ACCELBENCH_JOB_REQUEST"

_UNSAFE = re.compile(r"[\s\"'\\%]|[\x00-\x1f\x7f]")
_UNSAFE_BESIDE_PATTERNS = re.compile(r"[\s\"'\\]|[\x00-\x1f\x7f]")
_SHOWN_BY = "(`accelbench show RUN --request` prints it back)"


def directive_value(option: str, value: str, patterns: bool = False) -> str:
    """A value for an `#SBATCH` line, refused if sbatch could misread it; `patterns`:
    the value is ours and its `%` are Slurm's file-name patterns."""
    unsafe = _UNSAFE_BESIDE_PATTERNS if patterns else _UNSAFE
    if not value or unsafe.search(value):
        raise UserError(f"{option} {value!r}: white space, quotes, backslashes, '%' and "
                        "control characters cannot be handed to sbatch")
    return value


@dataclass(frozen=True)
class Launch:
    """How a job starts this accelbench on a node: the interpreter, its PYTHONPATH and
    the folder the job works in (where a relative --store is found)."""

    python: str
    pythonpath: str | None
    workdir: str


@dataclass(frozen=True)
class Directives:
    """What every job asks of Slurm."""

    job_name: str
    partition: str
    output: str  # the job's output file, with Slurm's %x (name), %j (id), %N (node)
    time: str | None = None
    account: str | None = None

    def lines(self, shape: Sequence[tuple[str, str]]) -> list[str]:
        options = [("--job-name", self.job_name), ("--partition", self.partition), *shape]
        if self.time:
            options.append(("--time", self.time))
        if self.account:
            options.append(("--account", self.account))
        options.append(("--output", self.output))
        return [f"#SBATCH {name}={directive_value(name, value, patterns=name == '--output')}"
                for name, value in options]


def _quote(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def _environment(launch: Launch) -> list[str]:
    lines = [f"cd -- {shlex.quote(launch.workdir)}"]
    if launch.pythonpath:
        lines += ["# The accelbench this job was generated with.",
                  f"export PYTHONPATH={shlex.quote(launch.pythonpath)}"]
    return lines


def _store_args(store: str | None) -> list[str]:
    return ["--store", store] if store else []


# Linux takes one environment variable of at most 128 KiB (MAX_ARG_STRLEN); a request is
# a few KiB.
_MAX_VARIABLE_BYTES = 128 * 1024 - 1024


def _request_document(request: RunRequest, max_bytes: int | None = None) -> list[str]:
    """The lines of a here-document holding the request's JSON, up to its end line."""
    text = request.to_json()
    if max_bytes is not None and len(text.encode()) > max_bytes:
        raise UserError(f"the request is {len(text.encode())} bytes, more than a job's "
                        f"environment hands on ({max_bytes})")
    if END_OF_REQUEST in text.splitlines():
        raise ValueError("a request's JSON holds the line that ends its here-document")
    return [*text.splitlines(), END_OF_REQUEST]


def qualify_script(directives: Directives, launch: Launch, *, hostlist: str,
                   run: RunRequest, check: RunRequest | None, store: str | None) -> str:
    """One node's qualification: `accelbench run` with the request `run` (and
    `accelbench validate` with `check`), submitted once per node with `sbatch
    --nodelist=NODE`."""
    # It is written in a comment, which a line break would end.
    hostlist = directive_value("--nodes", hostlist)
    steps = [("run", run), *([("validate", check)] if check is not None else [])]
    lines = [
        "#!/bin/bash",
        "# accelbench qualification of one node. Submit it once per node:",
        f"#   for node in $(scontrol show hostnames {shlex.quote(hostlist)}); do",
        '#       sbatch --nodelist="$node" accelbench-qualify.sbatch',
        "#   done",
        *directives.lines([("--nodes", "1"), ("--ntasks", "1")]),
        "#SBATCH --exclusive",
        "",
        *_environment(launch),
        "# The node this run is on, for the run and for its output.",
        'export SLURMD_NODENAME="${SLURMD_NODENAME:-$(hostname -s)}"',
        'echo "accelbench qualification on $SLURMD_NODENAME (job $SLURM_JOB_ID)"',
        "",
        f"# What this job runs {_SHOWN_BY}.",
        "requests=$(mktemp -d) || exit",
        """trap 'rm -rf -- "$requests"' EXIT""",
    ]
    for command, request in steps:
        lines += [f"""cat >"$requests/{command}.json" <<'{END_OF_REQUEST}'""",
                  *_request_document(request)]
    lines += ["", "status=0"]
    for command, _ in steps:
        run_it = [launch.python, "-m", "accelbench", command, *_store_args(store)]
        lines.append(f'{_quote(run_it)} --request "$requests/{command}.json" || status=$?')
    lines += ['exit "$status"', ""]
    return "\n".join(lines)


# What each node's task runs (srun has set that node's SLURM_NODEID), as a person reads it
# in the script.
_PER_NODE = (
    "# Each node's task writes the request to a file of its own node (the nodes may",
    "# share no file system) and starts torchrun, whose ranks read it. It stays (no exec)",
    "# to remove the file when torchrun ends.",
    "per_node=$(cat <<'PER_NODE'",
    "export SLURMD_NODENAME",
    "request=$(mktemp) || exit",
    """trap 'rm -f -- "$request"' EXIT""",
    f"""printf '%s\\n' "${REQUEST_VARIABLE}" >"$request" || exit""",
    f"unset {REQUEST_VARIABLE}",
    '"$0" -m torch.distributed.run --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" \\',
    '    "$@" --request "$request"',
    "PER_NODE",
    ")",
)


def across_nodes_script(directives: Directives, launch: Launch, *, what: str, command: str,
                        request: RunRequest, node_count: int | None, hostlist: str | None,
                        nproc_per_node: int, port: int, store: str | None) -> str:
    """One job across nodes (`accelbench slurm WHAT`): srun starts one torchrun per node,
    and the torchruns meet through the c10d rendezvous on the first node of the
    allocation; every rank runs `accelbench COMMAND` with `request`."""
    shape = [("--nodes", str(node_count))] if node_count else [
        ("--nodelist", hostlist or "")]
    shape.append(("--ntasks-per-node", "1"))
    torchrun = [launch.python, "--nproc-per-node", str(nproc_per_node),
                "--rdzv-backend", "c10d"]
    program = ["-m", "accelbench", command, *_store_args(store)]
    lines = [
        "#!/bin/bash",
        f"# accelbench {what} across the nodes of one allocation: srun starts one",
        "# torchrun per node; they meet through c10d on the allocation's first node.",
        *directives.lines(shape),
        "#SBATCH --exclusive",
        "",
        *_environment(launch),
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f'echo "accelbench {what} on $SLURM_JOB_NODELIST, rendezvous at $head:{port}"',
        "",
        f"# What every rank runs {_SHOWN_BY}. This script",
        "# runs on the first node only: srun hands the request on to each node's task in",
        "# its environment.",
        f"{REQUEST_VARIABLE}=$(cat <<'{END_OF_REQUEST}'",
        *_request_document(request, _MAX_VARIABLE_BYTES),
        ")",
        f"export {REQUEST_VARIABLE}",
        "",
        *_PER_NODE,
        "",
        "# --whole: each node's torchrun gets every CPU and device the job holds there.",
        "srun --whole --ntasks-per-node=1 --kill-on-bad-exit=1 \\",
        '    bash -c "$per_node" \\',
        f"    {_quote(torchrun)} \\",
        f'    --rdzv-endpoint "$head:{port}" --rdzv-id "$SLURM_JOB_ID" \\',
        f"    {_quote(program)}",
        "",
    ]
    return "\n".join(lines)


# sbatch(1), --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds; or no limit.
_TIME = re.compile(r"^(?:\d+(?::\d{1,2}){0,2}|\d+-\d+(?::\d{1,2}){0,2}|UNLIMITED|INFINITE)$")


def time_limit(text: str) -> str:
    """An sbatch --time value, checked before anything is submitted (a usage error)."""
    if not _TIME.match(text.strip()):
        import argparse

        raise argparse.ArgumentTypeError(
            f"expected a Slurm time limit (MINUTES, HH:MM:SS, DAYS-HH[:MM[:SS]]), got {text!r}")
    return text.strip()
