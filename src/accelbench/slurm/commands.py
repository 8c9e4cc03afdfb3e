"""The Slurm commands accelbench runs, behind one seam: `Slurm(run)`, where `run` takes
an argument list and returns what the command printed. Tests hand it recorded outputs;
the real one runs the command as an argument list (never a shell string), with a
timeout, so a controller that does not answer becomes one line, not a hang."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from accelbench.errors import NodesError, SchedulerError
from accelbench.slurm import parse
from accelbench.slurm.parse import JobState

# Slurm's clients retry an unreachable controller for a while before they give up.
COMMAND_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


class Runner(Protocol):
    """Runs one command: its argument list, its standard input, and variables added to
    its environment (a job's credentials: never on a command line or in a script)."""

    def __call__(self, argv: Sequence[str], stdin: str | None = None,
                 env: Mapping[str, str] | None = None) -> Completed: ...


def run_command(argv: Sequence[str], stdin: str | None = None,
                env: Mapping[str, str] | None = None) -> Completed:
    """Run one Slurm command (with `env` added to this process's environment); its
    absence or its silence is a SchedulerError."""
    check_configuration()
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, check=False,
                              env={**os.environ, **env} if env else None)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]} is not installed here: accelbench slurm needs "
                             "Slurm's client commands (sbatch, scontrol, squeue)") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:g} s: "
                             "is slurmctld running?") from None
    except OSError as exc:
        raise SchedulerError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    return Completed(done.returncode, done.stdout, done.stderr)


def check_configuration(environ: Mapping[str, str] | None = None) -> None:
    """A SLURM_CONF that names no readable file is refused at once: Slurm's clients
    retry such a file for a minute before they give up."""
    env = os.environ if environ is None else environ
    path = env.get("SLURM_CONF")
    if path is None:
        return
    if not path:
        raise SchedulerError("SLURM_CONF is set but empty: the Slurm configuration cannot "
                             "be read")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise SchedulerError(f"the Slurm configuration cannot be read: SLURM_CONF={path}: "
                             f"{exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SchedulerError(f"the Slurm configuration cannot be read: SLURM_CONF={path} is "
                             "not a file")
    if not os.access(path, os.R_OK):
        raise SchedulerError(f"the Slurm configuration cannot be read: SLURM_CONF={path}: "
                             "permission denied")


# What Slurm's clients say when there is no controller to ask, and what that means.
_NO_CONTROLLER = (
    ("Unable to contact slurm controller", "slurmctld is not answering"),
    ("Could not establish a configuration source",
     "no Slurm configuration here (no slurm.conf, SLURM_CONF or configless controller)"),
    ("Parse error in file", "the Slurm configuration cannot be read"),
    ("Unable to process configuration file", "the Slurm configuration cannot be read"),
    ("s_p_parse_file", "the Slurm configuration cannot be read"),
)


def _message(done: Completed) -> str:
    """What a failed Slurm command said, in one line."""
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines()
             if line.strip()]
    for line in lines:
        if any(words in line for words, _ in _NO_CONTROLLER):
            return line
    text = lines[-1] if lines else f"exit status {done.returncode}"
    return text if len(text) <= 300 else text[:300] + "..."


def _no_controller(message: str) -> str | None:
    """Why no controller can be asked, or None."""
    return next((why for words, why in _NO_CONTROLLER if words in message), None)


class Slurm:
    """sbatch, scontrol, squeue, scancel and sacct, parsed."""

    def __init__(self, run: Runner | None = None) -> None:
        self._run: Runner = run or run_command

    def _call(self, argv: Sequence[str], stdin: str | None = None,
              env: Mapping[str, str] | None = None) -> Completed:
        done = self._run(argv, stdin, env) if env else self._run(argv, stdin)
        why = _no_controller(_message(done)) if done.returncode != 0 else None
        if why is not None:
            raise SchedulerError(f"{why}: {_message(done)}")
        return done

    def _checked(self, argv: Sequence[str], stdin: str | None = None) -> str:
        done = self._call(argv, stdin)
        if done.returncode != 0:
            raise SchedulerError(f"{' '.join(argv[:3])} failed: {_message(done)}")
        return done.stdout

    def hostnames(self, hostlist: str) -> tuple[str, ...]:
        """The names of a Slurm hostlist (`gpu[01-16]`), expanded by Slurm itself."""
        return parse.hostnames(self._checked(["scontrol", "show", "hostnames", "--",
                                              hostlist]))

    def partition(self, name: str) -> dict[str, str]:
        done = self._call(["scontrol", "-o", "show", "partition", "--", name])
        found = parse.records(done.stdout) if done.returncode == 0 else []
        if not found:
            raise SchedulerError(f"partition {name!r} does not exist in this cluster "
                                 f"(scontrol: {_message(done)}); `sinfo -s` lists them")
        return found[0]

    def node(self, name: str) -> dict[str, str] | None:
        """A node's record, or None when the cluster has no such node."""
        done = self._call(["scontrol", "-o", "show", "node", "--", name])
        if done.returncode != 0:
            if "not found" in _message(done):
                return None
            raise NodesError(f"cannot read node {name!r}: {_message(done)}")
        found = parse.records(done.stdout)
        return found[0] if found else None

    def submit(self, script: str, options: Sequence[str],
               env: Mapping[str, str] | None = None) -> str:
        """Submit a batch script (given on sbatch's standard input); its job id. `env`
        goes into sbatch's environment, which sbatch hands on to the job (its default
        --export=ALL): how a job gets a credential that no script may hold."""
        done = self._call(["sbatch", "--parsable", *options], script, env)
        if done.returncode != 0:
            raise SchedulerError(f"sbatch refused the job: {_message(done)}")
        try:
            return parse.submitted_job_id(done.stdout)
        except ValueError as exc:
            raise SchedulerError(str(exc)) from None

    def cancel(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            self._call(["scancel", *job_ids])

    def queue(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The state of each job the controller still knows (finished ones too, until
        MinJobAge passes): job id -> state."""
        done = self._call(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids),
                           "-o", "%i|%T"])
        if done.returncode != 0:
            if "Invalid job id" in _message(done):
                return {}
            raise SchedulerError(f"squeue failed: {_message(done)}")
        return parse.queue_states(done.stdout)

    def jobs(self, job_id: str) -> tuple[JobState, ...]:
        """A job (every task, for an array): from the controller while it knows the
        job, else from accounting, else one UNKNOWN state."""
        done = self._call(["scontrol", "-o", "show", "job", "--", job_id])
        if done.returncode == 0:
            found = [parse.job_from_record(r) for r in parse.records(done.stdout)]
            if found:
                return tuple(sorted(found, key=lambda j: _order(j.job_id)))
        elif "Invalid job id" not in _message(done):
            raise SchedulerError(f"scontrol show job {job_id} failed: {_message(done)}")
        accounted = self._call(["sacct", "-n", "-P", "-X", "-j", job_id, "-o",
                                "JobID,JobName,State,ExitCode,NodeList"])
        if accounted.returncode == 0:
            found = parse.accounting_jobs(accounted.stdout)
            if found:
                return tuple(found)
        return (JobState(job_id=job_id, state=parse.UNKNOWN_STATE,
                         reason="no longer known to slurmctld, and no job accounting"),)


def _order(job_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in job_id.split("_") if part.isdigit())
