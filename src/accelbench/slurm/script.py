"""The batch scripts `accelbench slurm` submits, as text a person can read and submit by
hand (`--print`).

Every value that reaches a shell line is quoted with shlex.quote. `#SBATCH` lines are
read by sbatch, not by a shell, so their values are checked instead: a value with
white space, a quote, a backslash, a `%` (Slurm's file-name patterns) or a control
character is refused (exit 2) rather than written."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.errors import UserError

QUALIFY_JOB = "accelbench-qualify"
COLLECTIVES_JOB = "accelbench-collectives"
ISOLATE_JOB = "accelbench-isolate"
SCALING_JOB = "accelbench-scaling"
# What a job across nodes runs on every rank, by the action that submits it.
COLLECTIVES_PROGRAM = ("run", "--bench", "collectives")
ISOLATE_PROGRAM = ("isolate",)
SCALING_PROGRAM = ("run", "--suite", "scaling")
DEFAULT_RDZV_PORT = 29500

_UNSAFE = re.compile(r"[\s\"'\\%]|[\x00-\x1f\x7f]")
_UNSAFE_BESIDE_PATTERNS = re.compile(r"[\s\"'\\]|[\x00-\x1f\x7f]")


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


def qualify_script(directives: Directives, launch: Launch, *, hostlist: str,
                   run_args: Sequence[str], store: str | None, validate: bool,
                   level: int | None = None) -> str:
    """One node's qualification: `accelbench run` (and `accelbench validate`, at `level`
    where given), submitted once per node with `sbatch --nodelist=NODE`."""
    run = [launch.python, "-m", "accelbench", "run", *run_args, *_store_args(store)]
    # It is written in a comment, which a line break would end.
    hostlist = directive_value("--nodes", hostlist)
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
        "status=0",
        f"{_quote(run)} || status=$?",
    ]
    if validate:
        depth = ["--level", str(level)] if level is not None else []
        check = [launch.python, "-m", "accelbench", "validate", *depth, *_store_args(store)]
        lines.append(f"{_quote(check)} || status=$?")
    lines += ['exit "$status"', ""]
    return "\n".join(lines)


def collectives_script(directives: Directives, launch: Launch, *, node_count: int | None,
                       hostlist: str | None, nproc_per_node: int, port: int,
                       run_args: Sequence[str], store: str | None,
                       program: Sequence[str] = COLLECTIVES_PROGRAM) -> str:
    """One job across nodes: srun starts one torchrun per node, and the torchruns meet
    through the c10d rendezvous on the first node of the allocation; every rank runs
    `accelbench PROGRAM` (the collectives, `isolate`, or the scaling suite)."""
    shape = [("--nodes", str(node_count))] if node_count else [
        ("--nodelist", hostlist or "")]
    shape.append(("--ntasks-per-node", "1"))
    # Each node's task runs this, where srun has set that node's SLURM_NODEID.
    per_node = ('export SLURMD_NODENAME; exec "$0" -m torch.distributed.run '
                '--nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" "$@"')
    torchrun = [launch.python, "--nproc-per-node", str(nproc_per_node),
                "--rdzv-backend", "c10d"]
    what = {ISOLATE_PROGRAM: "isolate", SCALING_PROGRAM: "scaling"}.get(tuple(program),
                                                                      "collectives")
    program = ["-m", "accelbench", *program, *run_args, *_store_args(store)]
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
        "# --whole: each node's torchrun gets every CPU and device the job holds there.",
        "srun --whole --ntasks-per-node=1 --kill-on-bad-exit=1 \\",
        f"    bash -c {shlex.quote(per_node)} \\",
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
