"""Progress of a run on the terminal, for every command that measures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class TerminalListener:
    """Progress on stderr: a bar on a terminal, one line per finished case everywhere."""

    def __init__(self, err: Any) -> None:
        self._err = err
        self._progress: Any = None
        self._task: Any = None
        self._total = 0

    def planned(self, cases: Sequence[Any], fingerprint: Any, run_id: str) -> None:
        self._total = len(cases)
        from accelbench.report.text import text

        self._err.print(text(f"accelbench: run {run_id} on {fingerprint.generation_key}: "
                             f"{self._total} cases"))
        if self._err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                                      MofNCompleteColumn(), console=self._err, transient=True)
            self._task = self._progress.add_task("starting", total=self._total)
            self._progress.start()

    def started(self, index: int, planned: Any) -> None:
        if self._progress is not None:
            from accelbench.report.text import printable

            self._progress.update(self._task, description=printable(planned.case.label))

    def finished(self, index: int, measurement: Any) -> None:
        from accelbench.report.results import row
        from accelbench.report.text import text

        r = row(measurement)
        detail = r.result if r.ok else f"{r.status}: {r.note}"
        if r.ok and r.ci != "-":
            detail += f" {r.ci}"
        if r.ok and r.status != "ok":
            detail += r.status[2:]  # " (noisy, contended)"
        mark = {"ok": "✓", "failed": "✗", "skipped": "-"}.get(measurement.status, "?")
        label = f"{measurement.case.benchmark} {r.params}".strip()
        self._err.print(text(f"  [{index + 1}/{self._total}] {mark} {label}: {detail}"))
        if self._progress is not None:
            self._progress.advance(self._task)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
