"""Progress of a long run on stderr: on a terminal, a live display of the case and the
process in flight (process i/n), the cases done and the time left, which goes away when
the run ends, Ctrl-C and a failed store included; off a terminal, with --json or with
--quiet, no live display (and with --quiet no line per case either). The lines printed
for each finished case are what they were."""

from __future__ import annotations

import argparse
import io
import re
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from accelbench.cli.progress import Pace, TerminalListener, clock_text, progress_listener
from accelbench.core.case import Case
from accelbench.core.measurement import not_measured
from accelbench.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_STORE_UNREACHABLE
from fakes import stored_measurement
from scripted_worker import ScriptedWorker, run_cli, scripted_sessions

SHOW_CURSOR, HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GEMM = Case.make("gemm", "v", "micro", {"n": 1}, "cpu")
LAUNCH_RUN = ["run", "--bench", "launch", "--device", "cpu", "--no-report"]  # 1 case, 3 processes


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def terminal(file: io.StringIO) -> Console:
    return Console(file=file, force_terminal=True, width=150, markup=False, emoji=False,
                   highlight=False)


def shown(out: io.StringIO) -> str:
    """What the terminal was sent, without the escapes that draw it."""
    return _ANSI.sub("", out.getvalue())


def planned(case: Case = GEMM) -> Any:
    """A planned case, as far as the display reads it."""
    return SimpleNamespace(case=case)


FINGERPRINT: Any = SimpleNamespace(generation_key="Test CPU | PyTorch 2.6.0")


@pytest.fixture(autouse=True)
def _a_real_terminal_type(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")  # not "dumb", whatever runs the tests


def test_the_live_display_shows_the_case_its_process_the_cases_done_and_an_eta() -> None:
    out, clock = io.StringIO(), Clock()
    listener = TerminalListener(terminal(out), clock=clock)
    listener.planned([planned()] * 3, FINGERPRINT, "RUN1")
    listener.process_started(0, planned(), 1, 2, 2.0)
    text = shown(out)
    assert "gemm n=1" in text and "process 1/2" in text and "0/3 cases" in text
    assert "ETA 0:12" in text  # 3 cases x 2 processes x 2 s planned
    clock.now = 5.0  # the first process took 5 s, not 2
    listener.process_done(0, 1, 2, stored_measurement(GEMM, samples=(1.0,)))
    listener.process_started(0, planned(), 2, 2, 2.0)
    assert "process 2/2" in shown(out) and "ETA 0:25" in shown(out)  # every process at 5 s
    clock.now = 10.0
    listener.process_done(0, 2, 2, stored_measurement(GEMM, samples=(1.0,)))
    listener.finished(0, stored_measurement(GEMM, samples=(1.0,)))
    assert "1/3 cases" in shown(out) and "ETA 0:20" in shown(out)
    listener.close()
    assert out.getvalue().rindex(SHOW_CURSOR) > out.getvalue().rindex(HIDE_CURSOR)


def test_the_time_left_follows_the_pace_of_the_processes_so_far() -> None:
    clock = Clock()
    pace = Pace(3, clock)
    assert pace.left() is None  # nothing planned yet
    pace.process_started(0, 2, 2.0)
    assert pace.left() == 12.0
    clock.now = 1.5
    assert pace.left() == 10.5  # counts down within a process
    clock.now = 3.0
    assert pace.left() == 10.0  # a process past its budget is taken to end any moment
    pace.process_done(0)
    # Case 0's second process as long as its first; the others at 1.5 times the budget.
    assert pace.left() == 3.0 + 4 * 3.0
    pace.process_started(1, 2, 2.0)
    clock.now = 4.0
    pace.process_done(1)
    assert pace.left() == 3.0 + 1.0 + 2 * 2.0  # the ratio is now 4 s / 4 s
    pace.case_done(1)  # failed at once: its second process never runs
    assert pace.left() == 3.0 + 2 * 2.0
    assert (pace.cases_done, pace.processes_done, pace.total_processes) == (1, 3, 6)


def test_clock_text() -> None:
    assert [clock_text(s) for s in (0, 59.6, 83, 3725)] == ["0:00", "1:00", "1:23", "1:02:05"]


def _finish_two(listener: TerminalListener) -> None:
    listener.planned([planned()] * 2, FINGERPRINT, "RUN1")
    listener.started(0, planned())
    listener.process_started(0, planned(), 1, 1, 2.0)
    listener.process_done(0, 1, 1, stored_measurement(GEMM, samples=(1.0,)))
    listener.finished(0, stored_measurement(GEMM, samples=(1.0,)))
    listener.started(1, planned())
    listener.process_started(1, planned(), 1, 1, 2.0)
    failed = not_measured(GEMM, "failed", "wrong result", 0.0, 0.0)
    listener.process_done(1, 1, 1, failed)
    listener.finished(1, failed)
    listener.close()


TODAYS_LINES = ("accelbench: run RUN1 on Test CPU | PyTorch 2.6.0: 2 cases\n"
                "  [1/2] ✓ gemm n=1: - ±0.0%\n"
                "  [2/2] ✗ gemm n=1: failed: wrong result\n")


def test_off_a_terminal_only_todays_lines_are_written() -> None:
    out = io.StringIO()
    listener = TerminalListener(Console(file=out, width=150, markup=False, emoji=False,
                                        highlight=False))
    _finish_two(listener)
    assert out.getvalue() == TODAYS_LINES


@pytest.fixture
def stderr_terminal(monkeypatch):
    """stderr is a terminal (written to a buffer); stdout is what it is."""
    from accelbench.report import terminal as terminal_module

    out = io.StringIO()
    real = terminal_module.console
    monkeypatch.setattr(terminal_module, "console",
                        lambda stderr=False: terminal(out) if stderr else real(stderr))
    return out


@pytest.mark.parametrize(("given", "expected"), [
    ({}, "live"), ({"json": True}, TODAYS_LINES), ({"quiet": True}, ""),
    ({"quiet": True, "json": True}, "")])
def test_quiet_writes_nothing_and_json_no_live_display(stderr_terminal, given, expected
                                                       ) -> None:
    _finish_two(progress_listener(argparse.Namespace(**given)))
    if expected == "live":
        assert HIDE_CURSOR in stderr_terminal.getvalue()
        assert "process 1/1" in shown(stderr_terminal)
    else:
        assert stderr_terminal.getvalue() == expected


@pytest.fixture
def scripted(monkeypatch, store_path):
    yield scripted_sessions(monkeypatch)
    ScriptedWorker.reset()


def test_run_shows_each_process_live_and_takes_the_display_away(
        scripted, stderr_terminal, monkeypatch, capsys) -> None:
    assert run_cli(monkeypatch, *LAUNCH_RUN) == EXIT_OK
    err = stderr_terminal.getvalue()
    text = shown(stderr_terminal)
    for n in (1, 2, 3):
        assert "launch mode=eager threads=" in text and f"process {n}/3" in text
    assert "ETA " in text and "0/1 cases" in text
    assert "[1/1] ✓ launch mode=eager" in text
    assert err.rindex(SHOW_CURSOR) > err.rindex(HIDE_CURSOR)
    assert "Stored in" in capsys.readouterr().out  # stdout untouched by the display


def test_run_quiet_prints_no_progress(scripted, stderr_terminal, monkeypatch, capsys) -> None:
    assert run_cli(monkeypatch, *LAUNCH_RUN, "--quiet") == EXIT_OK
    assert stderr_terminal.getvalue() == ""
    assert "Stored in" in capsys.readouterr().out


def _ctrl_c_while_closing_the_run(monkeypatch) -> None:
    from accelbench.store import Store

    def interrupted(self, run_id, status, finished_at=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "finish_run", interrupted)


def _the_store_goes_away(monkeypatch) -> None:
    from accelbench.errors import StoreUnreachable
    from accelbench.store import Store

    def unreachable(self, run_id, m):
        raise StoreUnreachable("the store stopped answering")

    monkeypatch.setattr(Store, "add_measurement", unreachable)


@pytest.mark.parametrize(("stop", "code"), [(_ctrl_c_while_closing_the_run, EXIT_INTERRUPTED),
                                            (_the_store_goes_away, EXIT_STORE_UNREACHABLE)])
def test_the_display_is_taken_away_when_a_run_is_stopped(scripted, stderr_terminal,
                                                         monkeypatch, capsys, stop, code
                                                         ) -> None:
    stop(monkeypatch)
    assert run_cli(monkeypatch, *LAUNCH_RUN) == code
    err = stderr_terminal.getvalue()
    assert HIDE_CURSOR in err and err.rindex(SHOW_CURSOR) > err.rindex(HIDE_CURSOR)


def test_quiet_may_be_given_beside_a_request_file_or_resume(scripted, monkeypatch, tmp_path,
                                                            capsys) -> None:
    assert run_cli(monkeypatch, *LAUNCH_RUN, "--quiet") == EXIT_OK
    capsys.readouterr()
    assert run_cli(monkeypatch, "show", "latest", "--request") == EXIT_OK
    request = tmp_path / "request.json"
    request.write_text(capsys.readouterr().out)
    assert run_cli(monkeypatch, "run", "--request", str(request), "--quiet") == EXIT_OK
    assert run_cli(monkeypatch, "run", "--resume", "latest", "--quiet") == EXIT_OK
    assert "error" not in capsys.readouterr().err
