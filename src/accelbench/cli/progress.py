"""Progress of a run on stderr, for every command that measures: a line for each finished
case, everywhere, and on a terminal a live display of the case and the process in flight,
the cases done and the time left (`Pace`), which goes away once the run ends."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Task
    from rich.text import Text

    from accelbench.core.measurement import Measurement
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.plan import PlannedCase

QUIET_HELP = "show no progress on stderr: no live display, no line for each finished case"


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """--quiet, for the commands that measure."""
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def progress_listener(args: argparse.Namespace) -> TerminalListener:
    """The listener of a command that measures: the live display only where stderr is a
    terminal and neither --quiet nor --json is given; with --quiet no line per case
    either."""
    from accelbench.report.terminal import console

    quiet = bool(getattr(args, "quiet", False))
    return TerminalListener(console(stderr=True),
                            live=not (quiet or getattr(args, "json", False)), lines=not quiet)


class Pace:
    """How long a run has left. Each process of a case is planned to take its budget
    (warm-up and sampling time), and what the processes took so far corrects that: a
    case's processes still to run are taken to last as long as its own did, and those of
    a case not begun its budget times the ratio of the time taken to the budget so far
    (setting up a case, a compile, a model's loading are in no budget)."""

    def __init__(self, cases: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.cases = cases
        self.processes = 1
        self.budget_s: float | None = None  # none until the first process begins
        self._clock = clock
        self._took: dict[int, list[float]] = {}
        self._done: set[int] = set()
        self._current: tuple[int, float] | None = None  # the case in flight, since when

    def process_started(self, index: int, processes: int, budget_s: float) -> None:
        self.processes = processes
        self.budget_s = budget_s
        self._current = (index, self._clock())

    def process_done(self, index: int) -> None:
        if self._current is not None and self._current[0] == index:
            self._took.setdefault(index, []).append(self._clock() - self._current[1])
            self._current = None

    def case_done(self, index: int) -> None:
        """Case `index` is recorded: whatever processes it did not run are not waited for."""
        self._done.add(index)
        if self._current is not None and self._current[0] == index:
            self._current = None

    @property
    def cases_done(self) -> int:
        return len(self._done)

    @property
    def total_processes(self) -> int:
        return self.cases * self.processes

    @property
    def processes_done(self) -> int:
        running = sum(len(took) for i, took in self._took.items() if i not in self._done)
        return len(self._done) * self.processes + running

    def left(self) -> float | None:
        """Seconds the run still takes, at the pace so far; None before any process."""
        if self.budget_s is None:
            return None
        took = [s for seconds in self._took.values() for s in seconds]
        ratio = sum(took) / (len(took) * self.budget_s) if took and self.budget_s > 0 else 1.0
        now = self._clock()
        left = 0.0
        for index in range(self.cases):
            if index in self._done:
                continue
            own = self._took.get(index, [])
            each = sum(own) / len(own) if own else self.budget_s * ratio
            remaining = max(self.processes - len(own), 0)
            if self._current is not None and self._current[0] == index and remaining:
                left += max(each - (now - self._current[1]), 0.0)
                remaining -= 1
            left += remaining * each
        return left


def clock_text(seconds: float) -> str:
    """1:05, or 1:02:05 past an hour."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _left_column(pace: Callable[[], Pace | None]) -> Any:
    from rich.progress import ProgressColumn

    class Left(ProgressColumn):
        """The time left, worked out again at every refresh (it counts down between
        the events of a long process)."""

        def __init__(self) -> None:
            from rich.table import Column

            super().__init__(table_column=Column(no_wrap=True))

        def render(self, task: Task) -> Text:
            from rich.text import Text

            current = pace()
            left = current.left() if current is not None else None
            return Text("ETA " + ("-:--" if left is None else clock_text(left)))

    return Left()


class TerminalListener:
    """Progress on stderr (`err`): with `lines`, the run's first line and one line per
    finished case; with `live` and where `err` is a terminal, the live display."""

    def __init__(self, err: Console, *, live: bool = True, lines: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._err = err
        self._live = live and err.is_terminal
        self._lines = lines
        self._clock = clock
        self._progress: Any = None
        self._task: Any = None
        self._total = 0
        self.pace: Pace | None = None

    def planned(self, cases: Sequence[PlannedCase], fingerprint: Fingerprint,
                run_id: str) -> None:
        self.close()  # a display left from an earlier run of the listener (--repeat)
        self._total = len(cases)
        self.pace = Pace(self._total, self._clock)
        from accelbench.report.text import text

        if self._lines:
            self._err.print(text(f"accelbench: run {run_id} on {fingerprint.generation_key}: "
                                 f"{self._total} cases"))
        if self._live:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn
            from rich.table import Column

            # One line: a case label too long for the terminal is cut short, nothing else
            # (the other columns take up to 52 characters).
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False,
                           table_column=Column(no_wrap=True, overflow="ellipsis",
                                               max_width=max(self._err.width - 52, 10))),
                TextColumn("{task.fields[process]}", markup=False,
                           table_column=Column(no_wrap=True)),
                BarColumn(bar_width=16),
                TextColumn("{task.fields[cases]}", markup=False,
                           table_column=Column(no_wrap=True)),
                _left_column(lambda: self.pace), console=self._err, transient=True,
                redirect_stdout=False, refresh_per_second=4)
            self._task = self._progress.add_task("starting", total=self._total, process="",
                                                 cases=self._cases_text())
            self._progress.start()

    def started(self, index: int, planned: PlannedCase) -> None:
        if self._progress is not None:
            from accelbench.report.text import printable

            self._progress.update(self._task, description=printable(planned.case.label))

    def process_started(self, index: int, planned: PlannedCase, process: int,
                        processes: int, budget_s: float) -> None:
        if self.pace is not None:
            self.pace.process_started(index, processes, budget_s)
        if self._progress is not None:
            from accelbench.report.text import printable

            self._progress.update(self._task, description=printable(planned.case.label),
                                  process=f"process {process}/{processes}")
            self._show()

    def process_done(self, index: int, process: int, processes: int,
                     measurement: Measurement) -> None:
        if self.pace is not None:
            self.pace.process_done(index)
        self._show()

    def finished(self, index: int, measurement: Measurement) -> None:
        from accelbench.report.results import row
        from accelbench.report.text import text

        if self.pace is not None:
            self.pace.case_done(index)
        if self._lines:
            r = row(measurement)
            detail = r.result if r.ok else f"{r.status}: {r.note}"
            if r.ok and r.ci != "-":
                detail += f" {r.ci}"
            if r.ok and r.status != "ok":
                detail += r.status[2:]  # " (noisy, contended)"
            mark = {"ok": "✓", "failed": "✗", "skipped": "-"}.get(measurement.status, "?")
            label = f"{measurement.case.benchmark} {r.params}".strip()
            self._err.print(text(f"  [{index + 1}/{self._total}] {mark} {label}: {detail}"))
        self._show()

    def close(self) -> None:
        """Take the live display away (the cursor shown again); again is harmless."""
        if self._progress is not None:
            progress, self._progress = self._progress, None
            progress.stop()

    def _cases_text(self) -> str:
        done = self.pace.cases_done if self.pace is not None else 0
        return f"{done}/{self._total} cases"

    def _show(self) -> None:
        """The display as it stands now, drawn at once rather than at the next tick."""
        if self._progress is None or self.pace is None:
            return
        self._progress.update(self._task, total=max(self.pace.total_processes, 1),
                              completed=self.pace.processes_done, cases=self._cases_text())
        self._progress.refresh()
