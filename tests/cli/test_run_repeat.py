"""`accelbench run --repeat N`: N runs in a row of one request, each its own run with the
same command line; Ctrl-C stops them all; the exit code is the worst run's. The worker
is a scripted fake."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest

from accelbench.cli.run_cmd import worst_exit_code
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORE,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from accelbench.runner import plan, session
from accelbench.runner.plan import parse_suite
from accelbench.store import Store
from scripted_worker import ScriptedWorker, run_cli, scripted_sessions

RUN = ["run", "--bench", "launch", "--device", "cpu", "--no-report"]
LAUNCH = "launch mode=eager"  # one case, three processes per run (the quick suite's)


@pytest.fixture(autouse=True)
def scripted(monkeypatch, store_path):
    """Every run's worker is the scripted one."""
    yield scripted_sessions(monkeypatch)
    ScriptedWorker.reset()


accelbench = run_cli


def _runs():
    with Store.open(create=False) as store:
        return list(reversed(store.list_runs()))


def test_repeat_makes_that_many_runs_of_the_same_request(monkeypatch, capsys) -> None:
    assert accelbench(monkeypatch, *RUN, "--repeat", "3") == EXIT_OK
    err = capsys.readouterr().err
    runs = _runs()
    assert len(runs) == 3 and len({r.id for r in runs}) == 3
    assert {r.argv for r in runs} == {(*RUN, "--repeat", "3")}  # comparable
    assert all(r.status == "complete" and r.n_ok == 1 for r in runs)
    assert ScriptedWorker.asked == [LAUNCH] * 9
    for number in (1, 2, 3):
        assert f"accelbench: run {number}/3 of the repeated request" in err
    assert f"3 of 3 runs made: {runs[0].id} complete" in err


def test_ctrl_c_stops_the_sequence_and_keeps_what_is_stored(monkeypatch, capsys) -> None:
    ScriptedWorker.interrupt_at = 5  # in the second run's second process
    assert accelbench(monkeypatch, *RUN, "--repeat", "4") == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert [r.status for r in _runs()] == ["complete", "interrupted"]
    assert "run 2/4" in err and "run 3/4" not in err
    assert "2 of 4 runs made" in err


def test_ctrl_c_outside_the_cases_stops_the_sequence_too(monkeypatch, capsys) -> None:
    """Ctrl-C while a run's worker reads the device: no run begun, the sequence ends."""
    reads = []

    class StopsAtSecondRead(ScriptedWorker):
        def ask(self, message, timeout):
            if type(message).__name__ == "ReadFingerprint":
                reads.append(1)
                if len(reads) == 2:
                    raise KeyboardInterrupt
            return super().ask(message, timeout)

    monkeypatch.setattr(session, "run_session", functools.partial(
        session.run_session.func, worker_factory=StopsAtSecondRead))  # type: ignore[attr-defined]
    assert accelbench(monkeypatch, *RUN, "--repeat", "3") == EXIT_INTERRUPTED
    assert [r.status for r in _runs()] == ["complete"]
    assert "1 of 3 runs made" in capsys.readouterr().err


def test_the_exit_code_is_the_worst_runs(monkeypatch, capsys) -> None:
    ScriptedWorker.fail = {LAUNCH}
    assert accelbench(monkeypatch, *RUN, "--repeat", "2") == EXIT_CASE_FAILED
    ScriptedWorker.interrupt_at = len(ScriptedWorker.asked) + 2
    assert accelbench(monkeypatch, *RUN, "--repeat", "2") == EXIT_INTERRUPTED
    assert [r.status for r in _runs()] == ["failed", "failed", "failed", "interrupted"]


def test_worst_exit_code_orders_interrupted_over_failed_over_ok() -> None:
    assert worst_exit_code([EXIT_OK, EXIT_CASE_FAILED, EXIT_OK]) == EXIT_CASE_FAILED
    assert worst_exit_code([EXIT_CASE_FAILED, EXIT_INTERRUPTED]) == EXIT_INTERRUPTED
    assert worst_exit_code([EXIT_TERMINATED, EXIT_INTERRUPTED]) == EXIT_TERMINATED
    assert worst_exit_code([EXIT_TERMINATED, EXIT_STORE]) == EXIT_STORE
    assert worst_exit_code([]) == EXIT_OK


def test_json_prints_every_run_in_one_document(monkeypatch, capsys) -> None:
    assert accelbench(monkeypatch, *RUN, "--repeat", "2", "--json") == EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in printed["runs"]] == [r.id for r in _runs()]
    assert all(r["status"] == "complete" for r in printed["runs"])


@pytest.mark.parametrize(("extra", "message"), [
    (["--report", "r.html"], "--report names one file"),
    (["--repeat", "0"], "--repeat"),
])
def test_refused_before_anything_runs(monkeypatch, capsys, extra, message) -> None:
    assert accelbench(monkeypatch, "run", "--bench", "launch", "--repeat", "2", *extra
                      ) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert ScriptedWorker.asked == []


def test_repeat_is_refused_under_torchrun(monkeypatch, capsys) -> None:
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    assert accelbench(monkeypatch, *RUN, "--repeat", "2") == EXIT_USAGE
    assert "under torchrun" in capsys.readouterr().err


def test_a_suite_may_set_how_many_runs_its_run_makes(monkeypatch, capsys) -> None:
    load = plan.load_suite
    monkeypatch.setattr(plan, "load_suite", lambda name, registry=None: dataclasses.replace(
        load(name, registry), repeat=2))
    assert accelbench(monkeypatch, *RUN) == EXIT_OK
    assert len(_runs()) == 2
    assert accelbench(monkeypatch, *RUN, "--repeat", "1") == EXIT_OK  # the option wins
    assert len(_runs()) == 3


def test_a_suite_reads_its_repeat_setting() -> None:
    assert parse_suite("mine", {}).repeat == 1
    assert parse_suite("mine", {"repeat": 3}).repeat == 3
    base = parse_suite("quick", {"extends": "quick"})
    assert base.repeat == 1 and base.entries
    for bad in (0, -1, "3", True, 1.5):
        with pytest.raises(ValueError, match="repeat must be a positive number"):
            parse_suite("mine", {"repeat": bad})
