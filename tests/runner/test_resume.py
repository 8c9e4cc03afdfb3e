"""Resuming a stored run (runner.resume through session.conduct): only the cases that are
not done are measured, into the same run, on the run's own stack only, and nothing
stored is lost. The workers are scripted fakes, so which cases ran is known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED, RUN_RUNNING
from accelbench.core.registry import Benchmark, Registry
from accelbench.core.request import RunRequest
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_DEVICE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    StoreUnreachable,
    UserError,
)
from accelbench.runner.plan import validate
from accelbench.runner.recorder import Outcome
from accelbench.runner.resume import Resume, is_done
from accelbench.runner.session import run_session
from accelbench.store import Store, export_json, load_json
from postgres import sql
from scripted_worker import ScriptedWorker

REGISTRY = Registry([Benchmark(name, "micro", "test", "test_resume:_noop", ())
                     for name in ("a", "b", "c", "d")])
ARGV = ["run", "--bench", "a", "b", "c", "d"]


def _noop(ctx, params):  # pragma: no cover - the scripted worker measures instead
    raise AssertionError("not run")


@pytest.fixture(autouse=True)
def _script():
    ScriptedWorker.reset()
    yield
    ScriptedWorker.reset()


def _run(store: Store, resume: Resume | None = None, processes: int = 1) -> Outcome:
    """The run of a..d (or the resume of one), the worker script starting afresh."""
    ScriptedWorker.asked = []
    request = RunRequest(benches=("a", "b", "c", "d"), timing={"processes": processes})
    return run_session(validate(request, REGISTRY), store, argv=ARGV,
                       worker_factory=ScriptedWorker, resume=resume)


def _resume(store: Store, run_id: str, processes: int = 1) -> Outcome:
    return _run(store, Resume(store.load_run(run_id)), processes)


def test_an_interrupted_run_resumes_with_the_cases_it_did_not_reach(store_path) -> None:
    ScriptedWorker.interrupt_at = 3
    with Store.open(store_path) as store:
        first = _run(store)
        before = store.load_run(first.run_id)
        ScriptedWorker.interrupt_at = None
        outcome = _resume(store, first.run_id)
        stored = store.load_run(first.run_id)
        runs = store.list_runs()
    assert first.exit_code == EXIT_INTERRUPTED and before.record.status == RUN_INTERRUPTED
    assert ScriptedWorker.asked == ["c", "d"]  # a and b are kept
    assert outcome.run_id == first.run_id and outcome.kept == 2 and outcome.resumed
    assert outcome.exit_code == EXIT_OK
    assert [m.case.benchmark for m in outcome.measurements] == ["a", "b", "c", "d"]
    assert [r.id for r in runs] == [first.run_id]  # the same run, no new one
    record = stored.record
    assert record.status == RUN_COMPLETE and record.n_ok == 4
    assert [m.case.benchmark for m in stored.measurements] == ["a", "b", "c", "d"]
    assert stored.measurements[:2] == before.measurements  # kept as stored
    assert stored.superseded == ()
    (event,) = record.resumes
    assert event.status_before == RUN_INTERRUPTED
    assert event.fingerprint_id == record.fingerprint_id
    assert record.finished_at is not None and record.finished_at >= event.resumed_at
    assert record.started_at == before.record.started_at and record.argv == tuple(ARGV)


def test_a_failed_case_is_measured_again_and_its_failure_kept_beside(store_path) -> None:
    ScriptedWorker.fail = {"b"}
    with Store.open(store_path) as store:
        first = _run(store)
        failed = store.load_run(first.run_id).measurements[1]
        ScriptedWorker.fail = set()
        outcome = _resume(store, first.run_id)
        stored = store.load_run(first.run_id)
        history = store.measurements_for_case(failed.case.key)
    assert first.exit_code == EXIT_CASE_FAILED and failed.status == "failed"
    assert ScriptedWorker.asked == ["b"]
    assert outcome.exit_code == EXIT_OK and outcome.status == RUN_COMPLETE
    assert stored.superseded == (failed,)  # never overwritten
    assert [(m.case.benchmark, m.status) for m in stored.measurements] == [
        ("a", "ok"), ("c", "ok"), ("d", "ok"), ("b", "ok")]
    assert (stored.record.n_ok, stored.record.n_failed) == (4, 0)
    assert stored.record.resumes[0].status_before == RUN_FAILED
    assert [m.status for _, m in history] == ["ok"]  # what history and compare read
    # The resume travels with the run through an export.
    (loaded,) = load_json(json.loads(json.dumps(export_json([stored]))))
    assert loaded == stored


def test_a_case_still_failing_leaves_the_run_failed(store_path) -> None:
    ScriptedWorker.fail = {"b"}
    with Store.open(store_path) as store:
        first = _run(store)
        outcome = _resume(store, first.run_id)
        stored = store.load_run(first.run_id)
    assert ScriptedWorker.asked == ["b"]
    assert outcome.exit_code == EXIT_CASE_FAILED
    assert stored.record.status == RUN_FAILED and stored.record.n_failed == 1
    assert len(stored.superseded) == 1 and stored.superseded[0].status == "failed"


def test_cases_cut_short_by_an_interrupt_are_measured_again(store_path) -> None:
    """With three processes per case, a Ctrl-C in the second round leaves every case
    measured in fewer processes than planned: ok, but not done."""
    ScriptedWorker.interrupt_at = 6  # a b c d, then a, then stopped
    with Store.open(store_path) as store:
        first = _run(store, processes=3)
        cut = store.load_run(first.run_id).measurements
        ScriptedWorker.interrupt_at = None
        _resume(store, first.run_id, processes=3)
        stored = store.load_run(first.run_id)
    assert {m.case.benchmark: len(m.timings) for m in cut} == {"a": 2, "b": 1, "c": 1, "d": 1}
    assert all(m.ok and not is_done(m) for m in cut)
    assert ScriptedWorker.asked == ["a", "b", "c", "d"] * 3
    assert all(len(m.timings) == 3 and is_done(m) for m in stored.measurements)
    assert sorted(stored.superseded, key=lambda m: m.case.benchmark) == list(cut)
    assert stored.record.status == RUN_COMPLETE


def test_a_skipped_case_is_kept(store_path) -> None:
    ScriptedWorker.skip = {"b"}
    ScriptedWorker.interrupt_at = 4
    with Store.open(store_path) as store:
        first = _run(store)
        ScriptedWorker.interrupt_at = None
        outcome = _resume(store, first.run_id)
    assert ScriptedWorker.asked == ["d"]
    assert outcome.kept == 3 and outcome.status == RUN_COMPLETE


def test_a_resume_interrupted_again_is_still_resumable(store_path) -> None:
    ScriptedWorker.interrupt_at = 2
    with Store.open(store_path) as store:
        first = _run(store)
        second = _resume(store, first.run_id)
        again = store.load_run(first.run_id)
        ScriptedWorker.interrupt_at = None
        _resume(store, first.run_id)
        stored = store.load_run(first.run_id)
    assert second.interrupted and again.record.status == RUN_INTERRUPTED
    assert [m.case.benchmark for m in again.measurements] == ["a", "b"]
    assert ScriptedWorker.asked == ["c", "d"]
    assert [m.case.benchmark for m in stored.measurements] == ["a", "b", "c", "d"]
    assert [e.status_before for e in stored.record.resumes] == [RUN_INTERRUPTED] * 2
    assert stored.record.status == RUN_COMPLETE


def test_a_run_killed_after_its_last_case_is_finished_by_its_resume(store_path) -> None:
    with Store.open(store_path) as store:
        first = _run(store)
    # Killed outright between its last case and its end: left "running".
    sql(str(store_path), "UPDATE runs SET status = 'running', finished_at = NULL")
    with Store.open(store_path) as store:
        resume = Resume(store.load_run(first.run_id))
        assert not resume.complete
        outcome = _run(store, resume)
        record = store.load_run(first.run_id).record
    assert ScriptedWorker.asked == []
    assert outcome.kept == 4 and record.status == RUN_COMPLETE
    assert record.resumes[0].status_before == RUN_RUNNING


def test_a_complete_run_has_nothing_to_resume(store_path) -> None:
    with Store.open(store_path) as store:
        first = _run(store)
        assert Resume(store.load_run(first.run_id)).complete


def test_a_resume_on_another_stack_is_refused_and_stores_nothing(store_path) -> None:
    ScriptedWorker.interrupt_at = 3
    with Store.open(store_path) as store:
        first = _run(store)
        before = store.load_run(first.run_id)
        ScriptedWorker.interrupt_at = None
        ScriptedWorker.environ = {"OMP_NUM_THREADS": "3"}  # a switch the stack records
        with pytest.raises(UserError) as info:
            _resume(store, first.run_id)
        assert store.load_run(first.run_id) == before
    assert info.value.exit_code == EXIT_DEVICE
    message = str(info.value)
    assert f"run {first.run_id} was measured on another stack (environment differ)" in message
    assert before.record.fingerprint_id in message
    assert ScriptedWorker.asked == []
    assert sql(str(store_path), "SELECT count(*) FROM run_resumes") == [(0,)]


def test_a_resume_whose_store_stops_answering_is_spooled_whole(store_path, monkeypatch
                                                               ) -> None:
    """The spool of a resume holds the whole run (what was stored before it, and what
    it measured), so that merging it completes the run left "running"."""
    ScriptedWorker.fail = {"b"}
    ScriptedWorker.interrupt_at = 4
    with Store.open(store_path) as store:
        first = _run(store)  # a ok, b failed, c ok; stopped before d
        ScriptedWorker.fail = set()
        ScriptedWorker.interrupt_at = None
        add = store.add_measurement

        def stops_answering(run_id: str, m) -> None:
            if m.case.benchmark == "d":
                raise StoreUnreachable("the server did not answer")
            add(run_id, m)

        with monkeypatch.context() as patched:
            patched.setattr(store, "add_measurement", stops_answering)
            with pytest.raises(StoreUnreachable) as lost:
                _resume(store, first.run_id)
        assert store.load_run(first.run_id).record.status == RUN_RUNNING
        spool = Path(str(lost.value).split(" are kept in ")[1].split(":")[0])
        with Store.open(spool, create=False) as kept:
            spooled = kept.load_run(first.run_id)
        assert [m.case.benchmark for m in spooled.measurements] == ["a", "c", "b", "d"]
        assert [(m.case.benchmark, m.status) for m in spooled.superseded] == [("b", "failed")]
        assert len(spooled.record.resumes) == 1
        assert store.import_runs([spooled]) == [True]
        merged = store.load_run(first.run_id)
        # Spooled runs end failed (the store failed them); a resume then has nothing to
        # measure and finishes the run.
        assert merged.measurements == spooled.measurements and merged.record.status == RUN_FAILED
        outcome = _resume(store, first.run_id)
        assert ScriptedWorker.asked == [] and outcome.status == RUN_COMPLETE
        assert store.load_run(first.run_id).superseded == spooled.superseded
