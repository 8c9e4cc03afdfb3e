"""`accelbench slurm`: submit qualification runs (one job per node), the families' jobs
across nodes (collectives, isolate: `Family.slurm`) and scaling series to Slurm, each
writing into the store named by --store; wait for them or read their state. Slurm
schedules; accelbench writes the jobs and reads their state with sbatch, squeue, scontrol
and sacct.

The options after `--` make the request each job runs, read and checked here, before
anything is submitted (also with --print): a bad one exits 2, and the job is handed the
request as JSON (slurm.script), not the options."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.cli.options import (
    add_json,
    name_arg,
    path_arg,
    positive_int,
    positive_seconds,
    print_json,
)
from accelbench.cli.validate_request import LEVELS
from accelbench.core.untrusted import is_decimal
from accelbench.errors import EXIT_CASE_FAILED, EXIT_OK, NodesError, UserError

if TYPE_CHECKING:
    from accelbench.core.family import SlurmJob
    from accelbench.core.request import RunRequest
    from accelbench.slurm.commands import Slurm
    from accelbench.slurm.parse import JobState
    from accelbench.slurm.script import Directives, Launch

NAME = "slurm"
HELP = ("submit qualification runs (one job per node) and multi-node collectives or "
        "isolate jobs to Slurm, wait for them, or show their state")

DEFAULT_POLL_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelbench.benchmarks import REGISTRY

    actions = parser.add_subparsers(dest="slurm_action", metavar="ACTION")
    qualify = actions.add_parser(
        "qualify", help="one accelbench run (and validate) on each node, one job per node",
        description="Submit one job per node of --nodes, each running `accelbench run` "
        "(and `accelbench validate` with --validate) on that node alone. Arguments after "
        "`--` are options of `accelbench run`: they make the request each job runs, "
        "checked before anything is submitted.")
    qualify.add_argument("--nodes", required=True, metavar="HOSTLIST", type=_hostlist,
                         help="the nodes, as a Slurm hostlist (gpu[01-16],gpu20)")
    qualify.add_argument("--suite", type=name_arg, default="quick",
                         help="the suite each node runs (default quick)")
    qualify.add_argument("--validate", action="store_true",
                         help="also run `accelbench validate` on each node")
    qualify.add_argument("--level", type=int, choices=LEVELS, metavar="N",
                         help="run `accelbench validate --level N` on each node (1: the "
                         "node's health and configuration gates; 2: with every check, the "
                         "copy matrix, the GPU model's gates and a short burn-in; 3: a long "
                         "stress and the power gate; 4: a soak and the training gate)")
    qualify.add_argument("--drain-list", type=path_arg, metavar="FILE",
                         help="with --wait, write the nodes whose job failed to FILE, one "
                         "per line with its drain reason (`host Reason=accelbench:"
                         "ACCEL_JOB_FAILED`), for `scontrol update ... State=DRAIN`")
    _add_common(qualify)

    taken = {"qualify", "scaling", "status"}
    for job in REGISTRY.slurm_jobs():
        if job.name in taken:  # argparse before 3.11 would let one replace the other
            raise ValueError(f"the Slurm job {job.name!r} of a family takes the name of "
                             "another action")
        taken.add(job.name)
        across = _add_across_nodes(actions, job.name, job.help, " ".join(
            ["accelbench", job.command, *job.options]))
        across.set_defaults(slurm_job=job)
    _add_across_nodes(actions, "scaling", "one job per node count: the scaling suite across "
                      "1, 2, 4 ... nodes, for `accelbench scaling`",
                      "accelbench run --suite scaling", series=True)

    status = actions.add_parser("status", help="the state of jobs: exit codes and output",
                                description="The state of each job (each task of a job "
                                "array), its exit code, nodes and output file; exit 1 if "
                                "one ended unsuccessfully.")
    status.add_argument("job_ids", nargs="+", type=_job_id, metavar="JOBID")
    add_json(status)


def _add_across_nodes(actions: argparse._SubParsersAction[argparse.ArgumentParser],
                      name: str, help_text: str, runs: str,
                      series: bool = False) -> argparse.ArgumentParser:
    """The action `name`: one job across nodes whose ranks run `runs`; a `series` (the
    scaling suite) is one such job per number of nodes."""
    from accelbench.slurm.script import DEFAULT_RDZV_PORT

    description = ("Submit one job across --nodes: srun starts torchrun on every node, "
                   "which meet through the c10d rendezvous on the first node, and run "
                   f"`{runs}`. Arguments after `--` are options of `{runs}`: they make the "
                   "request every rank runs, checked before anything is submitted.")
    if series:
        description += (" With several node counts, one such job for each, one after "
                        "another in the queue: together a scaling series across nodes.")
    across = actions.add_parser(name, help=help_text, description=description)
    if series:
        across.add_argument("--nodes", required=True, metavar="N[,N...]", type=_node_counts,
                            help="numbers of nodes, one job each (1,2,4)")
    else:
        across.add_argument("--nodes", required=True, metavar="N|HOSTLIST", type=_hostlist,
                            help="a number of nodes, or the nodes as a Slurm hostlist")
    across.add_argument("--nproc-per-node", type=positive_int, default=1, metavar="K",
                        help="ranks per node (default 1; one per GPU on GPU nodes)")
    across.add_argument("--rdzv-port", type=_port, default=DEFAULT_RDZV_PORT, metavar="PORT",
                        help="the rendezvous port on the first node (default "
                        f"{DEFAULT_RDZV_PORT})")
    _add_common(across)
    return across


def _add_common(parser: argparse.ArgumentParser) -> None:
    from accelbench.slurm.script import time_limit

    parser.add_argument("--partition", required=True, type=name_arg, metavar="P",
                        help="the Slurm partition to submit to")
    parser.add_argument("--time", type=time_limit, metavar="LIMIT",
                        help="each job's time limit (sbatch --time: MINUTES, HH:MM:SS, "
                        "DAYS-HH:MM:SS; default: the partition's)")
    parser.add_argument("--account", type=name_arg, metavar="A",
                        help="the account to charge (sbatch --account)")
    parser.add_argument("--store", type=path_arg, metavar="PATH|URL",
                        help="the store every job writes into: a path on a shared file "
                        "system or a database URL, whose password is never written into "
                        "the script (the job gets it as PGPASSWORD) (default: the job's "
                        "$ACCELBENCH_STORE, else the default store of the node)")
    parser.add_argument("--python", type=path_arg, metavar="PYTHON",
                        help="the interpreter the jobs run accelbench with (default: the "
                        "one running this command; its PYTHONPATH goes with it)")
    parser.add_argument("--output-dir", type=path_arg, metavar="DIR", default="slurm-logs",
                        help="where the jobs' output files go (default ./slurm-logs)")
    parser.add_argument("--print", action="store_true",
                        help="print the batch script instead of submitting it (no Slurm "
                        "needed)")
    parser.add_argument("--wait", action="store_true",
                        help="wait for the jobs to end, show how each ended, and exit 1 if "
                        "one did not succeed")
    parser.add_argument("--wait-timeout", type=positive_seconds, metavar="S",
                        help="with --wait, stop waiting after S seconds (the jobs go on)")
    parser.add_argument("--poll-interval", type=positive_seconds, default=DEFAULT_POLL_S,
                        metavar="S", help="with --wait, seconds between two looks at the "
                        f"queue (default {DEFAULT_POLL_S:g})")
    add_json(parser)
    parser.add_argument("run_args", nargs="*", metavar="-- RUN-ARGS",
                        help="options of the command the jobs run, which make its request")


def _hostlist(text: str) -> str:
    """A Slurm hostlist (or a count of nodes), checked before any Slurm command sees it;
    one that names nothing ("", ",") is left for the nodes check (exit 8)."""
    from accelbench.slurm.parse import NODE_COUNT, check_hostlist

    if not text.strip(" ,") or NODE_COUNT.fullmatch(text):
        return text
    try:
        return check_hostlist(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _node_counts(text: str) -> tuple[int, ...]:
    """Numbers of nodes, each positive, each once, fewest first."""
    items = [item.strip() for item in text.split(",")]
    if not all(is_decimal(item) and int(item) > 0 for item in items):
        raise argparse.ArgumentTypeError(f"expected numbers of nodes (1,2,4), got {text!r}")
    return tuple(sorted({int(item) for item in items}))


def _port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number (1-65535), got {text!r}")
    return value


def _job_id(text: str) -> str:
    head, _, task = text.partition("_")
    if not is_decimal(head) or (task and not is_decimal(task)):
        raise argparse.ArgumentTypeError(f"expected a Slurm job id (12 or 12_3), got {text!r}")
    return text


def run(args: argparse.Namespace) -> int:
    from accelbench.slurm.commands import Slurm

    action = getattr(args, "slurm_action", None)
    if action is None:
        from accelbench.benchmarks import REGISTRY

        names = ["qualify", *(job.name for job in REGISTRY.slurm_jobs()), "scaling"]
        raise UserError(f"slurm: choose an action: {', '.join(names)} or status")
    slurm = Slurm()
    if action == "status":
        return _report(args, _states(slurm, args.job_ids), finished=True)
    if args.wait_timeout is not None and not args.wait:
        raise UserError("--wait-timeout is for --wait")
    if action == "qualify":
        return _qualify(args, slurm)
    if action == "scaling":
        return _scaling(args, slurm)
    return _across_nodes(args, slurm, args.slurm_job)


def _states(slurm: Slurm, job_ids: list[str]) -> list[JobState]:
    from accelbench.slurm.wait import job_states

    return job_states(slurm, job_ids)


def _launch(args: argparse.Namespace) -> Launch:
    from accelbench.slurm.script import Launch

    # Absolute, so that the job finds the same packages from any folder.
    pythonpath = os.pathsep.join(str(Path(entry).absolute()) for entry in
                                 os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry)
    return Launch(python=args.python or sys.executable, pythonpath=pythonpath or None,
                  workdir=str(Path.cwd()))


def _directives(args: argparse.Namespace, job_name: str, pattern: str) -> Directives:
    from accelbench.slurm.script import Directives, directive_value

    folder = Path(args.output_dir).expanduser().absolute()
    output = Path(directive_value("--output-dir", str(folder))) / pattern
    return Directives(job_name=job_name, partition=args.partition, output=str(output),
                      time=args.time, account=args.account)


def _job_store(args: argparse.Namespace) -> tuple[str | None, dict[str, str]]:
    """The --store a job's script names, and what goes into its environment instead:
    a URL's password leaves the script and becomes PGPASSWORD, which libpq reads."""
    from accelbench.store import parse_location
    from accelbench.store.location import redact_word

    if any(redact_word(word) != word for word in args.run_args):
        raise UserError("the arguments after -- hold a password, which would be written "
                        "into the batch script: name the store with --store, whose "
                        "password the job gets as PGPASSWORD")
    if not args.store:
        return None, {}
    location = parse_location(args.store)
    if location.postgres is None:
        return args.store, {}
    others = [name for name, _ in location.postgres.secrets if name != "password"]
    if others:
        raise UserError(f"--store {location}: {others[0]} cannot be handed to a batch job "
                        "(libpq reads it from no variable): use a service file "
                        "(PGSERVICEFILE) on the nodes, or a key without a passphrase")
    password = location.postgres.password
    return (location.url_without_secrets,
            {"PGPASSWORD": password.reveal()} if password is not None else {})


def _printed(script: str, env: dict[str, str]) -> int:
    """--print: the script, and where a credential it does not hold must come from."""
    sys.stdout.write(script)
    if env:
        from accelbench.report.terminal import console
        from accelbench.report.text import text

        console(stderr=True).print(text(
            "accelbench: the store's password is not in the script: submit it with "
            "PGPASSWORD in the environment (sbatch hands it on to the job), or give the "
            "nodes a ~/.pgpass"))
    return EXIT_OK


def _qualify(args: argparse.Namespace, slurm: Slurm) -> int:
    from accelbench.slurm.cluster import check_nodes, check_partition
    from accelbench.slurm.script import QUALIFY_JOB, qualify_script

    _some_nodes(args.nodes)
    store, env = _job_store(args)
    run_request = _checked(_run_request(["--suite", args.suite, *args.run_args]))
    check = (_checked(_validate_request(args.level))
             if args.validate or args.level is not None else None)
    script = qualify_script(_directives(args, QUALIFY_JOB, "%x-%N-%j.out"), _launch(args),
                            hostlist=args.nodes, run=run_request, check=check, store=store)
    if args.drain_list and not args.wait:
        raise UserError("--drain-list needs --wait: the failing nodes are known when the "
                        "jobs end")
    if args.print:
        return _printed(script, env)
    check_partition(slurm, args.partition)
    nodes = check_nodes(slurm, args.nodes, args.partition)
    _make_output_dir(args)
    submitted: list[tuple[str, str]] = []
    try:
        for node in nodes:
            submitted.append((slurm.submit(script, [f"--nodelist={node}"], env), node))
    except UserError:
        slurm.cancel([job_id for job_id, _ in submitted])  # all of them, or none
        raise
    return _after_submit(args, slurm, submitted)


def _across_nodes(args: argparse.Namespace, slurm: Slurm, job: SlurmJob) -> int:
    """A family's job (`collectives`, `isolate`): one job across the nodes."""
    from accelbench.slurm.cluster import check_node_count, check_nodes, check_partition
    from accelbench.slurm.parse import NODE_COUNT
    from accelbench.slurm.script import across_nodes_script

    _some_nodes(args.nodes)
    count = int(args.nodes) if NODE_COUNT.fullmatch(args.nodes) else None
    if count == 0:
        raise NodesError("--nodes 0 names no node")
    store, env = _job_store(args)
    request = _checked(_job_request(job, args.run_args))
    script = across_nodes_script(
        _directives(args, job.job_name, "%x-%j.out"), _launch(args), what=job.name,
        command=job.command, request=request, node_count=count,
        hostlist=None if count else args.nodes, nproc_per_node=args.nproc_per_node,
        port=args.rdzv_port, store=store)
    if args.print:
        return _printed(script, env)
    partition = check_partition(slurm, args.partition)
    if count:
        check_node_count(partition, count)
        where = f"{count} node(s)"
    else:
        where = ",".join(check_nodes(slurm, args.nodes, args.partition))
    _make_output_dir(args)
    return _after_submit(args, slurm, [(slurm.submit(script, [], env), where)])


def _scaling(args: argparse.Namespace, slurm: Slurm) -> int:
    """`scaling`: the scaling suite across each number of nodes, one job each (each job's
    world is its nodes x --nproc-per-node ranks), all writing into one store."""
    from accelbench.slurm.cluster import check_node_count, check_partition
    from accelbench.slurm.script import SCALING_JOB, across_nodes_script

    store, env = _job_store(args)
    request = _checked(_run_request(["--suite", "scaling", *args.run_args]))
    scripts = [(count, across_nodes_script(
        _directives(args, SCALING_JOB, "%x-%j.out"), _launch(args), what="scaling",
        command="run", request=request, node_count=count, hostlist=None,
        nproc_per_node=args.nproc_per_node, port=args.rdzv_port, store=store))
        for count in args.nodes]
    if args.print:
        return _printed("\n".join(script for _, script in scripts), env)
    partition = check_partition(slurm, args.partition)
    for count in args.nodes:
        check_node_count(partition, count)
    _make_output_dir(args)
    submitted: list[tuple[str, str]] = []
    try:
        for count, script in scripts:
            submitted.append((slurm.submit(script, [], env), f"{count} node(s)"))
    except UserError:
        slurm.cancel([job_id for job_id, _ in submitted])  # all of them, or none
        raise
    return _after_submit(args, slurm, submitted)


# -- the request each job runs ------------------------------------------------------------


def _run_request(words: Sequence[str]) -> RunRequest:
    """The request `accelbench run WORDS` would run."""
    from accelbench.cli.request_options import add_request_options, request_of

    return request_of(_parsed("run", add_request_options, words))


def _validate_request(level: int | None) -> RunRequest:
    """The request `accelbench validate [--level N]` would run."""
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.validate_request import add_validate_options, validate_request

    words = ["--level", str(level)] if level is not None else []
    return validate_request(_parsed("validate", add_validate_options, words), REGISTRY)


def _job_request(job: SlurmJob, words: Sequence[str]) -> RunRequest:
    """The request of a family's job: what its command (`run`, or one the family brings)
    makes of the job's own options and WORDS."""
    words = [*job.options, *words]
    if job.command == "run":
        return _run_request(words)
    return _command_request(job, words)


def _command_request(job: SlurmJob, words: Sequence[str]) -> RunRequest:
    """The request a family's command (`isolate`) makes of WORDS (its build_request)."""
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.request_options import BESIDE_REQUEST, options_given

    command = next((c for c in REGISTRY.commands() if job.command == c.NAME), None)
    build: Callable[[argparse.Namespace], RunRequest] | None = getattr(
        command, "build_request", None)
    if command is None or build is None:
        raise ValueError(f"the Slurm job {job.name} runs `accelbench {job.command}`, which "
                         "is no family's command that makes a request (build_request)")
    parser = _parser(job.command)
    command.add_arguments(parser)
    args = parser.parse_args(words)
    # The command's options that are no part of its request: the job's store is named
    # by --store (before --), and its output goes to the job's output file.
    outside = options_given(args, parser._actions,
                            frozenset(a.dest for a in parser._actions) - BESIDE_REQUEST)
    if outside:
        raise UserError(f"{outside[0]} after --: the arguments after -- make the request "
                        "the job runs (give the job's store with --store, before --)")
    return build(args)


def _parsed(command: str, add: Callable[[argparse.ArgumentParser], None],
            words: Sequence[str]) -> argparse.Namespace:
    parser = _parser(command)
    add(parser)
    return parser.parse_args(words)


def _parser(command: str) -> argparse.ArgumentParser:
    """A parser of a job's options: a mistake is one line (exit 2), and -h is no option
    (it would print the command's help and exit)."""
    from accelbench.cli.request_options import StrictParser

    return StrictParser(prog=f"after -- (accelbench {command})", add_help=False)


def _checked(request: RunRequest) -> RunRequest:
    """The request checked as the job will check it, so that a bad name or value fails
    now (exit 2) rather than in the queue; and with no secret, as it is written into the
    batch script."""
    from accelbench.app import prepare
    from accelbench.store.location import redact_request

    form = request.to_dict()
    if redact_request(form) != form:
        raise UserError("the job's request holds a password, which would be written into "
                        "the batch script: name the store with --store, whose password the "
                        "job gets as PGPASSWORD")
    prepare(request)
    return request


def _some_nodes(text: str) -> None:
    if not text.strip(" ,"):
        raise NodesError(f"--nodes {text!r} names no node")


def _make_output_dir(args: argparse.Namespace) -> None:
    """Slurm opens a job's output file but makes no folder for it."""
    folder = Path(args.output_dir).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--output-dir {folder}: cannot be made: {exc.strerror or exc}") from None


def _after_submit(args: argparse.Namespace, slurm: Slurm,
                  submitted: list[tuple[str, str]]) -> int:
    from accelbench.report.terminal import console
    from accelbench.report.text import text
    from accelbench.slurm.wait import wait_for_jobs

    job_ids = [job_id for job_id, _ in submitted]
    if not args.json:
        err = console(stderr=True)
        for job_id, where in submitted:
            err.print(text(f"accelbench: submitted job {job_id} ({where})"))
    if not args.wait:
        if args.json:
            print_json({"submitted": [{"job_id": j, "nodes": w} for j, w in submitted]})
        else:
            console().print(text(f"Submitted {len(job_ids)} job(s): {' '.join(job_ids)}; "
                                 f"`accelbench slurm status {' '.join(job_ids)}` shows "
                                 "their state"))
        return EXIT_OK
    states, ended = wait_for_jobs(slurm, job_ids, interval=args.poll_interval,
                                  timeout=args.wait_timeout)
    if getattr(args, "drain_list", None):
        _drain_failed(args.drain_list, submitted, states)
    return _report(args, states, finished=ended)


def _drain_failed(path: str, submitted: list[tuple[str, str]], states: list[JobState]) -> None:
    """The nodes whose qualification job ended and failed, to the drain list."""
    from accelbench.slurm.drain import write_drain

    by_id = {job.job_id: job for job in states}
    failed = [node for job_id, node in submitted
              if job_id in by_id and by_id[job_id].finished and not by_id[job_id].succeeded]
    write_drain(path, failed, {node: ("ACCEL_JOB_FAILED",) for node in failed})


def _report(args: argparse.Namespace, states: list[JobState], finished: bool) -> int:
    from dataclasses import asdict

    ok = finished and all(job.succeeded for job in states)
    if args.json:
        print_json({"all_ended": finished, "succeeded": ok,
                    "jobs": [{**asdict(job), "succeeded": job.succeeded} for job in states]})
    else:
        _print_table(states)
        if not finished:
            from accelbench.report.terminal import console
            from accelbench.report.text import text

            console(stderr=True).print(text("accelbench: stopped waiting: some jobs are "
                                            "still queued or running"))
    if args.slurm_action == "status":
        return EXIT_CASE_FAILED if any(j.finished and not j.succeeded for j in states) \
            else EXIT_OK
    return EXIT_OK if ok else EXIT_CASE_FAILED


def _print_table(states: list[JobState]) -> None:
    from accelbench.core.view import Table
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console

    rows = []
    for job in states:
        exit_text = "-" if job.exit_code is None else str(job.exit_code)
        if job.signal:
            exit_text += f" (signal {job.signal})"
        state = job.state + (f" ({job.reason})" if job.reason and not job.succeeded else "")
        rows.append(tuple(str(cell) for cell in (job.job_id, job.name or "-", state,
                                                 exit_text, job.nodes or "-",
                                                 job.output or "-")))
    render_rich([Table("Slurm jobs", ("Job", "Name", "State", "Exit", "Nodes", "Output"),
                       rows)], console())
