"""Pure parsers of what Slurm's commands print (recorded outputs in tests/fixtures/slurm).

`scontrol -o show ...` prints one record per line as `Key=Value` pairs separated by
spaces; a value may itself hold spaces (`OS=Linux 6.1 #1 SMP`), so a word without `=`
belongs to the value before it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from accelbench.core.untrusted import short

# Job states after which a job never runs again (Slurm's squeue(1), JOB STATE CODES).
FINAL_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "TIMEOUT",
})
# A job no longer known to the controller (past MinJobAge) and with no accounting.
UNKNOWN_STATE = "UNKNOWN"


@dataclass(frozen=True)
class JobState:
    """One job (or one task of a job array) as Slurm reports it."""

    job_id: str  # "12", or "12_3" for task 3 of array job 12
    state: str  # COMPLETED, FAILED, RUNNING, ... (the first word: "CANCELLED by 0")
    exit_code: int | None = None  # the batch script's exit status, once it ended
    signal: int | None = None  # the signal that ended it, 0 if none
    nodes: str = ""  # the nodes it ran on (a hostlist), "" before it starts
    output: str = ""  # its standard output file
    name: str = ""
    reason: str = ""  # why it is pending or failed, "" if Slurm gives none

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES or self.state == UNKNOWN_STATE

    @property
    def succeeded(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0


def key_values(line: str) -> dict[str, str]:
    """One `scontrol -o` record as a mapping."""
    out: dict[str, str] = {}
    key: str | None = None
    for word in line.split():
        name, sep, value = word.partition("=")
        if sep and name and " " not in name:
            key = name
            out[key] = value
        elif key is not None:
            out[key] += " " + word
    return out


def records(text: str) -> list[dict[str, str]]:
    """Every `scontrol -o` record of an output, one per non-empty line."""
    return [key_values(line) for line in text.splitlines() if line.strip()]


# A Slurm hostlist as a person writes one: names of letters, digits, '_', '.' and '-'
# (not first), with numeric ranges in brackets (`gpu[01-16,20]`, `r[1-2]n[1-4]`),
# separated by commas. Anything else (an option such as `-x`, white space, a non-ASCII
# digit) is refused before any Slurm command sees it.
_RANGES = r"\[[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\]"
_HOST = rf"(?:[A-Za-z0-9_]|{_RANGES})(?:[A-Za-z0-9_.\-]|{_RANGES})*"
HOSTLIST = re.compile(rf"{_HOST}(?:,{_HOST})*")
NODE_COUNT = re.compile(r"[0-9]+")


def check_hostlist(text: str) -> str:
    """`text` if it is a hostlist of the form above, else ValueError (the message quotes
    the first character that cannot stand where it is)."""
    if HOSTLIST.fullmatch(text):
        return text
    bad = next((c for c in text if not (c.isascii() and (c.isalnum() or c in "_.-[],"))),
               None)
    if bad is not None:
        raise ValueError(f"{short(text)} is not a Slurm hostlist: {bad!r} cannot stand in a "
                         "node name")
    raise ValueError(f"{short(text)} is not a Slurm hostlist (names of letters, digits, '_', "
                     "'.' and '-', not first; ranges as gpu[01-16,20]; commas between)")


def hostnames(text: str) -> tuple[str, ...]:
    """`scontrol show hostnames` output: one name per line."""
    return tuple(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))


_JOB_ID = re.compile(r"^(\d+)(?:;\S+)?$")


def submitted_job_id(text: str) -> str:
    """`sbatch --parsable` output: `ID` or `ID;CLUSTER`."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    match = _JOB_ID.match(lines[-1]) if lines else None
    if match is None:
        raise ValueError(f"sbatch printed no job id: {text.strip()[:200]!r}")
    return match.group(1)


def _exit_code(text: str) -> tuple[int | None, int | None]:
    """`ExitCode=1:0` (status:signal)."""
    status, _, signal = text.partition(":")
    try:
        return int(status), int(signal or 0)
    except ValueError:
        return None, None


def _present(value: str) -> str:
    return "" if value in ("(null)", "None", "N/A") else value


def job_from_record(record: dict[str, str]) -> JobState:
    """One record of `scontrol -o show job`."""
    job_id = record.get("JobId", "")
    if record.get("ArrayJobId") and record.get("ArrayTaskId"):
        job_id = f"{record['ArrayJobId']}_{record['ArrayTaskId']}"
    status, signal = _exit_code(record.get("ExitCode", ""))
    state = record.get("JobState", UNKNOWN_STATE).split()[0]
    nodes = _present(record.get("NodeList", ""))
    output = _present(record.get("StdOut", ""))
    if "%N" in output and nodes and not any(c in nodes for c in "[],"):
        output = output.replace("%N", nodes)  # scontrol leaves %N as it is; one node
    return JobState(
        job_id=job_id, state=state,
        exit_code=status if state in FINAL_STATES else None,
        signal=signal if state in FINAL_STATES else None,
        nodes=nodes, output=output, name=record.get("JobName", ""),
        reason=_present(record.get("Reason", "")))


def queue_states(text: str) -> dict[str, str]:
    """`squeue -h -t all -o '%i|%T'` output: job id -> state."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        job_id, sep, state = line.strip().partition("|")
        if sep and job_id:
            out[job_id] = state.strip()
    return out


def accounting_jobs(text: str) -> list[JobState]:
    """`sacct -n -P -X -o JobID,JobName,State,ExitCode,NodeList` output."""
    jobs = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5 or not fields[0]:
            continue
        job_id, name, state, exit_code, nodes = fields
        status, signal = _exit_code(exit_code)
        first = state.split()[0] if state.strip() else UNKNOWN_STATE
        jobs.append(JobState(job_id=job_id, state=first, exit_code=status, signal=signal,
                             nodes=_present(nodes), name=name))
    return jobs
