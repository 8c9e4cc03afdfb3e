"""`accelbench run --resume RUN`: the run's own request, only the cases left, the same run
id; refused with one line where it cannot go on. The worker is a scripted fake (which
cases ran is known exactly); the slow test at the end interrupts a real run."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_DEVICE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from accelbench.runner import messages
from accelbench.store import Store
from postgres import sql
from scripted_worker import ScriptedWorker, run_cli, scripted_sessions

RUN = ["run", "--bench", "memory", "launch", "--device", "cpu", "--no-report"]
CORPUS = Path(__file__).parent.parent / "fixtures" / "store"
CASES = ["memory op=copy size_mib=64", "memory op=triad size_mib=64",
         "launch mode=eager"]


@pytest.fixture(autouse=True)
def scripted(monkeypatch, store_path):
    """Every run's worker is the scripted one."""
    yield scripted_sessions(monkeypatch)
    ScriptedWorker.reset()


accelbench = run_cli


def _interrupted_run(monkeypatch, capsys, at: int = 5) -> str:
    """A run stopped by Ctrl-C when its worker is asked for case number `at` (three
    processes per case, interleaved: the first round is asks 1-3); its id."""
    ScriptedWorker.interrupt_at = at
    assert accelbench(monkeypatch, *RUN) == EXIT_INTERRUPTED
    capsys.readouterr()
    ScriptedWorker.interrupt_at = None
    ScriptedWorker.asked = []
    with Store.open(create=False) as store:
        return store.resolve_run("latest")


def test_resume_measures_what_is_left_into_the_same_run(monkeypatch, capsys) -> None:
    ScriptedWorker.fail = {CASES[2]}
    assert accelbench(monkeypatch, *RUN) == 1
    capsys.readouterr()
    run_id = json.loads(_json(monkeypatch, capsys, "runs", "--json"))[0]["id"]
    ScriptedWorker.fail = set()
    ScriptedWorker.asked = []

    assert accelbench(monkeypatch, "run", "--resume", run_id[:10], "--json") == EXIT_OK
    captured = capsys.readouterr()
    assert ScriptedWorker.asked == [CASES[2]] * 3  # three processes, the failed case only
    assert f"resuming run {run_id} (failed): 2 stored case(s) kept" in captured.err
    printed = json.loads(captured.out)
    assert printed["run_id"] == run_id and printed["status"] == "complete"
    assert printed["resumed"] is True and printed["kept"] == 2
    assert len(printed["measurements"]) == 3
    (record,) = json.loads(_json(monkeypatch, capsys, "runs", "--json"))
    assert (record["id"], record["status"], record["n_ok"], record["n_failed"]) == (
        run_id, "complete", 3, 0)
    assert [e["status_before"] for e in record["resumes"]] == ["failed"]


def test_show_compare_and_history_see_the_resumed_results(monkeypatch, capsys) -> None:
    """Every case of the run was cut short (measured in fewer processes than planned) and
    is measured again: what the run shows and compares is the new measurement alone."""
    run_id = _interrupted_run(monkeypatch, capsys)
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_OK
    assert ScriptedWorker.asked == CASES * 3
    assert accelbench(monkeypatch, *RUN) == EXIT_OK
    capsys.readouterr()

    shown = json.loads(_json(monkeypatch, capsys, "show", run_id, "--json"))
    (entry,) = shown["runs"]
    assert [len(m["timings"]) for m in entry["measurements"]] == [3, 3, 3]
    assert sorted(len(m["timings"]) for m in entry["superseded"]) == [1, 1, 2]
    assert len(entry["run"]["resumes"]) == 1

    compared = json.loads(_json(monkeypatch, capsys, "compare", run_id, "latest", "--json"))
    assert len(compared["cases"]) == 3 and compared["not_measured"] == []
    assert all(c["a"]["processes"] == 3 and c["a"]["runs"] == [run_id]
               for c in compared["cases"])

    history = json.loads(_json(monkeypatch, capsys, "history", "launch", "--json"))
    (series,) = history["series"]
    assert series["points"][0]["run"] == run_id
    assert [p["processes"] for p in series["points"]] == [3, 3]


def test_a_resume_interrupted_again_resumes_again(monkeypatch, capsys) -> None:
    run_id = _interrupted_run(monkeypatch, capsys, at=2)  # nothing stored: one part only
    ScriptedWorker.interrupt_at = 4
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_INTERRUPTED
    ScriptedWorker.interrupt_at = None
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_OK
    with Store.open(create=False) as store:
        stored = store.load_run(run_id)
        assert len(store.list_runs()) == 1
    assert stored.record.status == "complete" and len(stored.measurements) == 3
    assert [e.status_before for e in stored.record.resumes] == ["interrupted"] * 2


def test_a_complete_run_has_nothing_to_resume(monkeypatch, capsys) -> None:
    assert accelbench(monkeypatch, *RUN) == EXIT_OK
    capsys.readouterr()
    ScriptedWorker.asked = []
    assert accelbench(monkeypatch, "run", "--resume", "latest") == EXIT_OK
    assert "is complete: nothing to resume" in capsys.readouterr().err
    assert ScriptedWorker.asked == []
    with Store.open(create=False) as store:
        assert store.load_run("latest").record.resumes == ()


def test_another_stack_is_refused_and_nothing_is_stored(monkeypatch, capsys, store_path
                                                        ) -> None:
    run_id = _interrupted_run(monkeypatch, capsys)
    with Store.open(create=False) as store:
        before = store.load_run(run_id)
    ScriptedWorker.environ = {"OMP_NUM_THREADS": "3"}
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_DEVICE
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "resuming run" in err  # the note, then the one line
    assert "a run resumes only on the stack it was measured on" in err
    assert ScriptedWorker.asked == []
    with Store.open(create=False) as store:
        assert store.load_run(run_id) == before
    assert sql(str(store_path), "SELECT count(*) FROM run_resumes") == [(0,)]


@pytest.mark.parametrize(("extra", "message"), [
    (["--bench", "gemm"], "leave out --bench"),
    (["--suite", "quick"], "leave out --suite"),
    (["--device", "auto"], "leave out --device"),
    (["-p", "size_mib=1", "--max-time", "1"], "leave out --param, --max-time"),
    (["--repeat", "2"], "leave out --repeat"),
])
def test_options_that_change_the_request_are_refused(monkeypatch, capsys, extra, message
                                                     ) -> None:
    run_id = _interrupted_run(monkeypatch, capsys)
    assert accelbench(monkeypatch, "run", "--resume", run_id, *extra) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert ScriptedWorker.asked == []


def test_unknown_runs_and_runs_of_other_commands_are_refused(monkeypatch, capsys) -> None:
    run_id = _interrupted_run(monkeypatch, capsys)
    assert accelbench(monkeypatch, "run", "--resume", "nope") == EXIT_USAGE
    assert "no run matches 'nope'" in capsys.readouterr().err
    with Store.open() as store:
        fingerprint = store.load_run(run_id).fingerprint
        record = store.load_run(run_id).record
        made = {}
        for argv in (["validate"], ["run", "--bogus"], []):
            made[len(argv)] = store.begin_run(
                fingerprint=fingerprint, fingerprint_id=record.fingerprint_id,
                generation_key=record.generation_key, device="cpu", suite=None, argv=argv,
                host="h", accelbench_version="0")
    for runs, message in ((made[1], "was made by `accelbench validate`"),
                          (made[2], "its stored command line does not read as"),
                          (made[0], "was made by no command that was stored")):
        assert accelbench(monkeypatch, "run", "--resume", runs) == EXIT_USAGE
        assert message in capsys.readouterr().err
    assert ScriptedWorker.asked == []


def test_resume_is_refused_under_torchrun(monkeypatch, capsys) -> None:
    run_id = _interrupted_run(monkeypatch, capsys)
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_USAGE
    assert "not supported under torchrun" in capsys.readouterr().err


def test_a_run_stored_before_runs_kept_their_requests_resumes(monkeypatch, capsys,
                                                            store_path) -> None:
    """A store recorded by accelbench before runs kept their requests (migrations 001 to
    005): `accelbench run --bench launch memory --device cpu --max-time 0.05
    --no-telemetry -p op=copy --store resume-v5.sqlite --no-report`, killed by SIGKILL once
    its first case was stored. Opened now, the run gets its request from its stored
    command line, once; `show --request` prints it, and `run --resume` goes on with it."""
    store_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CORPUS / "results-schema5.db", store_path)  # never the corpus itself
    _on_this_stack(store_path)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)

    with Store.open(create=False) as store:
        (record,) = store.list_runs()
    assert record.status == "running" and record.request is not None
    assert _json(monkeypatch, capsys, "show", record.id, "--request") == RunRequest(
        benches=("launch", "memory"), overrides={"op": ("copy",)}, device="cpu",
        timing={"max_time": 0.05, "telemetry_interval": 0.0}, no_report=True).to_json()

    assert accelbench(monkeypatch, "run", "--resume", record.id, "--json") == EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert printed["run_id"] == record.id and printed["status"] == "complete"
    assert printed["kept"] == 1  # the launch case, as it was recorded
    assert set(ScriptedWorker.asked) == {"memory op=copy size_mib=64"}


def _on_this_stack(path: Path) -> None:
    """The recorded run's stack made this machine's (what the scripted worker reads), so
    that it may be resumed here: its command line and measurements stay as recorded."""
    from accelbench.env.fingerprint import Fingerprint, collect
    from fakes import no_vendor_tools

    with sqlite3.connect(path) as db:
        old, data = db.execute("SELECT id, data FROM fingerprints").fetchone()
        # How the threads were chosen is the plan's part of the stack, recorded with it.
        here = Fingerprint.from_dict({
            **collect("cpu", run=no_vendor_tools, environ={}).to_dict(),
            "threads_source": json.loads(data)["threads_source"]})
        db.execute("UPDATE fingerprints SET id = ?, generation_key = ?, data = ?",
                   (here.fingerprint_id, here.generation_key, json.dumps(here.to_dict())))
        db.execute("UPDATE runs SET fingerprint_id = ?, generation_key = ? WHERE "
                   "fingerprint_id = ?", (here.fingerprint_id, here.generation_key, old))


def _json(monkeypatch, capsys, *args: str) -> str:
    assert accelbench(monkeypatch, *args) == 0
    return str(capsys.readouterr().out)


@pytest.mark.slow
def test_a_real_run_interrupted_by_ctrl_c_resumes(tmp_path: Path, monkeypatch) -> None:
    """A real `accelbench run` of three cases stopped by SIGINT once its first case is
    stored, then resumed: the first case is kept as it was, the others are measured.
    (What is left of the run takes far longer than the signal takes to land.) Each case
    in two processes rather than the suite's three: still rounds of fresh processes, for
    fewer of them."""
    monkeypatch.undo()  # the real worker and command line
    store = str(tmp_path / "results.sqlite")
    request = tmp_path / "request.json"
    request.write_text(RunRequest(
        benches=("launch", "memory"), device="cpu", threads=1, no_report=True,
        timing={"processes": 2, "max_time": 0.2}).to_json(), encoding="utf-8")
    args = [sys.executable, "-m", "accelbench", "run", "--request", str(request),
            "--store", store]
    env = {**os.environ, "ACCELBENCH_STORE": store}
    with subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          text=True, env=env) as process:
        assert process.stderr is not None
        for line in process.stderr:
            if "[1/3] ✓" in line:  # written once the case is stored
                process.send_signal(signal.SIGINT)
                break
        process.stderr.read()
        assert process.wait(timeout=120) == EXIT_INTERRUPTED
    with Store.open(store, create=False) as opened:
        before = opened.load_run("latest")
    assert before.record.status == "interrupted" and before.measurements[0].ok

    resumed = subprocess.run([sys.executable, "-m", "accelbench", "run", "--resume",
                              before.record.id, "--no-report", "--store", store],
                             capture_output=True, text=True, timeout=120, env=env)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    with Store.open(store, create=False) as opened:
        after = opened.load_run(before.record.id)
        assert len(opened.list_runs()) == 1
    assert after.record.status == "complete" and len(after.measurements) == 3
    assert after.measurements[0] == before.measurements[0]  # kept, not measured again
    assert all(m.ok and len(m.timings) == 2 for m in after.measurements)
    assert len(after.record.resumes) == 1


def test_a_run_being_resumed_elsewhere_is_refused(monkeypatch, capsys) -> None:
    """Another process holds the run (its resume is under way): a second resume is
    refused with one line before it measures anything; once let go, it goes on."""
    run_id = _interrupted_run(monkeypatch, capsys)
    with Store.open(create=False) as other, other.hold_run(run_id):
        assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith("accelbench: error: ") and err.count("\n") == 1, err
        assert f"run {run_id} is being resumed by another accelbench process" in err
        assert ScriptedWorker.asked == []
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_OK
    assert ScriptedWorker.asked


def test_a_resume_holds_its_run_until_it_is_closed(monkeypatch, capsys) -> None:
    """While a resume measures, the run cannot be taken by another (as a second
    `run --resume` would); after it, it can."""
    from accelbench.errors import UserError

    run_id = _interrupted_run(monkeypatch, capsys)
    seen: list[str] = []

    class Probing(ScriptedWorker):
        def ask(self, message, timeout):
            if not isinstance(message, messages.ReadFingerprint):
                try:
                    with Store.open(create=False) as other, other.hold_run(run_id):
                        seen.append("free")
                except UserError as refused:
                    seen.append(str(refused))
            return super().ask(message, timeout)

    from accelbench.runner import session

    monkeypatch.setattr(session, "run_session",
                        functools.partial(session.run_session, worker_factory=Probing))
    assert accelbench(monkeypatch, "run", "--resume", run_id) == EXIT_OK
    assert seen and all("is being resumed" in s for s in seen), seen
    with Store.open(create=False) as other, other.hold_run(run_id):
        pass
