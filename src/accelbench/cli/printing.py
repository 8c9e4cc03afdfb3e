"""How the commands that measure print a finished run: the run's sections and a summary
line, or with --json the run and every measurement; shared so that `run`, `validate`,
`health`, `isolate` and a family's own command print alike."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.cli.options import print_json

if TYPE_CHECKING:
    from accelbench.app import Finished
    from accelbench.runner.recorder import Outcome


def outcome_json(outcome: Outcome, store_location: str, report: Path | None,
                 **extra: Any) -> dict[str, Any]:
    """A finished run as `--json` prints it: the run, where it is stored and reported,
    what a command adds (`extra`), and every measurement."""
    return {
        "run_id": outcome.run_id,
        "status": outcome.status,
        "generation_key": outcome.fingerprint.generation_key,
        "store": str(store_location),
        "report": str(report) if report else None,
        # A resumed run: how many of its measurements were stored before and kept.
        **({"resumed": True, "kept": outcome.kept} if outcome.resumed else {}),
        **extra,
        "measurements": [m.export_dict() for m in outcome.measurements],
    }


def finished_json(finished: Finished, **extra: Any) -> dict[str, Any]:
    return outcome_json(finished.outcome, finished.store, finished.report, **extra)


def print_run(finished: Finished, title: str, summary: str) -> None:
    """A finished run on the terminal: `title` and the stack, the run's sections, the
    `summary` line, where it is stored and reported."""
    from accelbench.report.run_view import run_sections
    from accelbench.report.terminal import console, print_sections
    from accelbench.report.text import text

    outcome = finished.outcome
    out = console()
    out.print(text(f"{title} {outcome.run_id}: {outcome.fingerprint.generation_key}"))
    print_sections(run_sections(outcome.measurements), out)
    if summary:
        out.print(text(summary))
    out.print(text(f"Stored in {finished.store} as run {outcome.run_id}"))
    if finished.report:
        out.print(text(f"Report: {finished.report}"))


def print_checks(finished: Finished, as_json: bool, title: str, **extra: Any) -> int:
    """A run of checks as `validate` and `health` print it: with --json the run, a tally,
    every check and `extra`; else the run's sections and a summary line. Returns the
    run's exit code."""
    from accelbench.analysis.checks import check_results, summary_line, tally

    outcome = finished.outcome
    if as_json:
        results = check_results(outcome.measurements)
        print_json(finished_json(finished, summary=tally(results),
                                 checks=[r.to_dict() for r in results], **extra))
    else:
        print_run(finished, title, summary_line(outcome.measurements)
                  + (" (interrupted)" if outcome.interrupted else ""))
    return outcome.exit_code
