"""The GPU check's stages, each under its own deadline, run one after another.

A stage is a command with a time limit (`cap`) and a log file. The stages share one
budget: each gets at most its cap, less when the budget has less left (keeping `reserve`
seconds for what follows them all, the figures table); a stage that fails or runs out of
time is recorded and the next one still runs; a stage left fewer than MIN_STAGE_S seconds
is not started, and says so. Pure but for `spawn` and `clock`, the seams the tests
replace with fakes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from accelbench.runner.lifeline import end_job

MIN_STAGE_S = 10.0  # a stage with less than this left is not started
KILL_GRACE_S = 10.0  # after SIGTERM at the deadline, SIGKILL this much later

OK, FAILED, TIMED_OUT, NOT_RUN = "ok", "FAILED", "out of time", "not run"


@dataclass(frozen=True)
class Stage:
    """One stage: `argv` run for at most `cap` seconds, its output kept in `log`."""

    name: str
    cap: float
    argv: tuple[str, ...]
    log: str  # file name in the output folder
    summary: str = ""  # a regular expression for the log line that says how it went


@dataclass(frozen=True)
class StageResult:
    name: str
    status: str  # OK, FAILED, TIMED_OUT or NOT_RUN
    seconds: float
    cap: float
    detail: str  # the exit status, or why it did not run, and the log's summary line

    @property
    def ok(self) -> bool:
        return self.status == OK


# (argv, seconds, log path) -> (exit status, or None when it ran out of time)
Spawn = Callable[[Sequence[str], float, Path], "int | None"]


def run_stages(stages: Sequence[Stage], out: Path, budget: float, reserve: float = 0.0, *,
               spawn: Spawn | None = None, clock: Callable[[], float] = time.monotonic,
               say: Callable[[str], None] = print) -> list[StageResult]:
    """Run `stages` in order within `budget` seconds (less `reserve`), each for at most
    its cap; every stage gets a result, run or not."""
    spawn = spawn or spawn_logged
    deadline = clock() + budget - reserve
    results = []
    for stage in stages:
        left = deadline - clock()
        cap = min(stage.cap, left)
        if cap < MIN_STAGE_S:
            results.append(StageResult(stage.name, NOT_RUN, 0.0, stage.cap,
                                       f"the budget of {budget:.0f} s had {max(left, 0):.0f} s "
                                       "left"))
            say(f"\n== {stage.name}: not run, the budget is spent")
            continue
        log = out / stage.log
        say(f"\n== {stage.name} (at most {cap:.0f} s; log: {log.name})")
        began = clock()
        try:
            status = spawn(stage.argv, cap, log)
        except OSError as exc:  # the command could not be started at all
            log.write_text(f"{exc}\n", encoding="utf-8")
            status = 127
        took = clock() - began
        line = summary_line(log, stage.summary)
        if status is None:
            result = StageResult(stage.name, TIMED_OUT, took, cap,
                                 _joined(f"stopped after {cap:.0f} s", line))
        elif status == 0:
            result = StageResult(stage.name, OK, took, cap, line)
        else:
            result = StageResult(stage.name, FAILED, took, cap, _joined(f"exit {status}", line))
        results.append(result)
    return results


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def summary_line(log: Path, pattern: str) -> str:
    """The last line of `log` that matches `pattern` (its last line when none is given),
    trimmed; empty when there is none."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    wanted = re.compile(pattern) if pattern else None
    found = [ln.strip() for ln in lines if ln.strip() and (wanted is None or wanted.search(ln))]
    return found[-1][:160] if found else ""


def spawn_logged(argv: Sequence[str], seconds: float, log: Path) -> int | None:
    """Run `argv` in its own process group, its output shown and written to `log`; at
    `seconds` the group gets SIGTERM, then SIGKILL. Returns the exit status, None when it
    ran out of time."""
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdout is not None
        copier = threading.Thread(target=_copy, args=(proc.stdout, sink), daemon=True)
        copier.start()
        try:
            status: int | None = proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            end_job(proc, KILL_GRACE_S)  # SIGTERM to its group, then SIGKILL
            status = None
        copier.join(timeout=KILL_GRACE_S)
        proc.stdout.close()
    return status


def _copy(source: IO[bytes], sink: IO[str]) -> None:
    for raw in iter(source.readline, b""):
        text = raw.decode("utf-8", errors="replace")
        sink.write(text)
        sink.flush()
        sys.stdout.write(text)
        sys.stdout.flush()


HEADER = ("stage", "result", "time")


def render(results: Sequence[StageResult]) -> list[str]:
    """A line per stage (what it gave under it), as a Markdown table."""
    lines = ["| stage | result | time |", "| --- | --- | --- |"]
    for r in results:
        shown = r.status if not r.detail else f"{r.status}: {r.detail}"
        took = "-" if r.status == NOT_RUN else f"{r.seconds:.0f} s of {r.cap:.0f}"
        lines.append(f"| {r.name} | {shown.replace('|', '/')} | {took} |")
    return lines


def write(results: Sequence[StageResult], path: Path) -> None:
    path.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n",
                    encoding="utf-8")
