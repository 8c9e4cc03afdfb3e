"""How an A/B is printed, by `ab` and by `tune`, which ends with one: its table and gate,
where it is stored and reported, or with --json all of it; and its progress on stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from accelbench.cli.options import print_json

if TYPE_CHECKING:
    from accelbench.app import AbFinished


def print_ab(finished: AbFinished, as_json: bool) -> int:
    """An A/B as `ab` prints it: its table and gate, where it is stored and reported;
    with --json all of it and each side's run id. Returns its exit code."""
    from accelbench.analysis.ab import SLOWER
    from accelbench.report.ab_tables import ab_tables, gate_lines

    result, outcome = finished.result, finished.outcome
    gate = result.ab.fail_on_regression
    code = finished.exit_code(gate)
    if as_json:
        print_json(ab_json(finished))
        return code
    from accelbench.report.tables import render_rich
    from accelbench.report.terminal import console
    from accelbench.report.text import text

    out = console()
    render_rich(ab_tables(result), out)
    if gate is not None:
        for line in gate_lines(gate, result):
            out.print(text(line))
    out.print(text(f"{outcome.rounds} round(s) in {outcome.elapsed:.0f} s; stopped: "
                   f"{outcome.stopped}"))
    out.print(text(f"Stored in {finished.store} as runs {result.a.record.id} (A) and "
                   f"{result.b.record.id} (B)"))
    if finished.report:
        out.print(text(f"Report: {finished.report}"))
    slower = [c for c in result.cases if c.outcome == SLOWER and c.verdict is not None]
    if slower:
        from accelbench.report.explain_tables import explain_hint

        worst = min(slower, key=lambda c: c.verdict.speed if c.verdict else 1.0)
        out.print(text(explain_hint(result.a.record.id, result.b.record.id, worst.label,
                                    side_of_ab=True)), soft_wrap=True)
    return code


def ab_json(finished: AbFinished) -> dict[str, Any]:
    """An A/B as `ab --json` prints it: each case's verdict, where it is stored and
    reported, the rounds run, why it stopped, the gate's calls and the exit code."""
    result, outcome = finished.result, finished.outcome
    gate = result.ab.fail_on_regression
    data = {**result.to_dict(), "store": finished.store,
            "report": str(finished.report) if finished.report else None,
            "rounds_run": outcome.rounds, "elapsed_s": round(outcome.elapsed, 3),
            "stopped": outcome.stopped, "exit_code": finished.exit_code(gate)}
    if gate is not None:
        from accelbench.analysis.ab import gate as judge_gate

        regressed, undecided = judge_gate(result.cases, gate)
        data["fail_on_regression_pct"] = 100 * gate
        data["regressions"] = [c.label for c in regressed]
        data["undecided"] = [c.label for c in undecided]
    return data


class AbProgress:
    """A line on stderr per round: how many cases have stopped, and the most time left."""

    def planned(self, cases: int, run_a: str, run_b: str) -> None:
        print(f"accelbench: A/B of {cases} case(s): runs {run_a} (A) and {run_b} (B)",
              file=sys.stderr, flush=True)

    def round_done(self, number: int, decided: int, cases: int, elapsed: float,
                   left: float) -> None:
        print(f"accelbench: round {number}: {decided} of {cases} case(s) stopped "
              f"({elapsed:.0f} s; at most ~{left:.0f} s left)", file=sys.stderr, flush=True)
