"""A resumed run in the store, on both back-ends: each resume noted, nothing stored
overwritten, the newest measurement of a case is the run's result (read, counted,
exported and merged alike), and stores from before resumes migrate."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from store_data import RUN_ARGS, sample_measurements

from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED, RUN_RUNNING
from accelbench.errors import EXIT_STORE, StoreError
from accelbench.store import Store, StoredRun, ddl, export_json, load_json
from accelbench.store import store as store_module
from accelbench.store.record_schema import check_runs
from accelbench.store.records import ResumeEvent
from postgres import sql, tables

CORPUS = Path(__file__).parent.parent / "fixtures" / "store"


def _failed_run(store: Store) -> str:
    """A run that stored its three cases, the second failed, and finished failed."""
    run_id = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
    for m in sample_measurements():
        store.add_measurement(run_id, m)
    store.finish_run(run_id, RUN_FAILED, finished_at=1_750_000_010.0)
    return run_id


def _measured_again(store: Store, run_id: str, resumed_at: float = 1_750_000_100.0) -> None:
    """The run resumed, its failed case measured again (ok now) and the run finished."""
    store.resume_run(run_id, fingerprint_id=RUN_ARGS["fingerprint_id"], resumed_at=resumed_at)
    failed = sample_measurements()[1]
    store.add_measurement(run_id, dataclasses.replace(
        failed, status="ok", reason=None, started_at=resumed_at + 1.0))
    store.finish_run(run_id, RUN_COMPLETE, finished_at=resumed_at + 5.0)


def test_a_resume_is_noted_and_the_run_is_running_again(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = _failed_run(store)
        event = store.resume_run(run_id, fingerprint_id="fp-mi250x-01", resumed_at=2e9)
        record = store.load_run(run_id).record
    assert event == ResumeEvent(2e9, "fp-mi250x-01", RUN_FAILED)
    assert record.resumes == (event,)
    assert record.status == RUN_RUNNING and record.finished_at is None
    assert record.started_at == 1_750_000_000.0  # the run's own start is kept


def test_a_resume_on_another_stack_or_of_no_run_is_refused(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = _failed_run(store)
        with pytest.raises(StoreError, match="measured on stack fp-mi250x-01, not fp-other"):
            store.resume_run(run_id, fingerprint_id="fp-other")
        with pytest.raises(StoreError, match="no run nope") as info:
            store.resume_run("nope", fingerprint_id="fp-mi250x-01")
        assert info.value.exit_code == EXIT_STORE
        record = store.load_run(run_id).record
    assert record.resumes == () and record.status == RUN_FAILED


def test_the_newest_measurement_of_a_case_is_the_runs_result(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = _failed_run(store)
        before = store.load_run(run_id)
        _measured_again(store, run_id)
        run = store.load_run(run_id)
        (record,) = store.list_runs()
        fp8_key = before.measurements[1].case.key
        history = store.measurements_for_case(fp8_key)
    gemm, fp8, conv = before.measurements
    assert run.superseded == (fp8,)  # kept, never overwritten
    assert [m.case.key for m in run.measurements] == [gemm.case.key, conv.case.key,
                                                       fp8.case.key]
    assert run.measurements[2].status == "ok"
    assert (record.n_ok, record.n_failed, record.n_skipped) == (2, 0, 1)
    assert record.status == RUN_COMPLETE and record.finished_at == 1_750_000_105.0
    assert [m.status for _, m in history] == ["ok"]
    assert sql(store_location, "SELECT count(*) FROM measurements") == [(4,)]


def test_a_resumed_run_round_trips_through_an_export_and_a_merge(store_location: str,
                                                                 tmp_path: Path) -> None:
    source = str(tmp_path / "source.sqlite")
    with Store.open(source) as store:
        run_id = _failed_run(store)
        _measured_again(store, run_id)
        stored = store.load_run(run_id)
    data = json.loads(json.dumps(export_json([stored])))
    entry = data["runs"][0]
    assert entry["run"]["resumes"] == [{"resumed_at": 1_750_000_100.0,
                                        "fingerprint_id": "fp-mi250x-01",
                                        "status_before": RUN_FAILED}]
    assert [m["status"] for m in entry["superseded"]] == ["failed"]
    assert [m["status"] for m in entry["measurements"]] == ["ok", "skipped", "ok"]
    (loaded,) = load_json(data)
    assert loaded == stored
    check_runs([loaded], "merged store")
    with Store.open(store_location) as store:
        assert store.import_runs([loaded]) == [True]
        assert store.load_run(run_id) == stored
        assert store.import_runs([loaded]) == [False]  # idempotent, as for any run


def test_a_run_never_resumed_exports_as_it_always_did(store_location: str) -> None:
    with Store.open(store_location) as store:
        stored = store.load_run(_failed_run(store))
    entry = export_json([stored])["runs"][0]
    assert "superseded" not in entry and "resumes" not in entry["run"]
    older = {"format": "accelbench-results", "format_version": 2, "runs": [entry]}
    assert load_json(older) == [stored]


def test_a_resumed_run_left_running_is_completed_by_merging_its_spool(
        store_location: str, tmp_path: Path) -> None:
    """The store stopped answering during a resume: the spool holds the whole run (what
    was stored before, and all the resume measured); merging it completes the run."""
    with Store.open(store_location) as store:
        run_id = _failed_run(store)
        event = store.resume_run(run_id, fingerprint_id="fp-mi250x-01", resumed_at=2e9)
        stored = store.load_run(run_id)
    gemm, fp8, conv = sample_measurements()
    again = dataclasses.replace(fp8, status="ok", reason=None, started_at=2e9 + 1)
    record = dataclasses.replace(stored.record, status=RUN_COMPLETE, finished_at=2e9 + 9)
    spooled = StoredRun.of_rows(record, stored.fingerprint, [gemm, fp8, conv, again])
    assert spooled.record.resumes == (event,)
    with Store.open(store_location) as store:
        assert store.import_runs([spooled]) == [True]
        run = store.load_run(run_id)
    assert run.record.status == RUN_COMPLETE and run.record.resumes == (event,)
    assert [m.status for m in run.measurements] == ["ok", "skipped", "ok"]
    assert run.superseded == (fp8,)
    assert sql(store_location, "SELECT count(*) FROM run_resumes") == [(1,)]


def test_a_spool_of_another_run_does_not_complete_a_resumed_one(store_location: str
                                                                 ) -> None:
    with Store.open(store_location) as store:
        run_id = _failed_run(store)
        store.resume_run(run_id, fingerprint_id="fp-mi250x-01", resumed_at=2e9)
        stored = store.load_run(run_id)
        gemm, _, conv = sample_measurements()
        record = dataclasses.replace(stored.record, status=RUN_COMPLETE, finished_at=2e9 + 9)
        other = StoredRun.of_rows(record, stored.fingerprint, [gemm, conv])  # no fp8 here
        assert store.import_runs([other]) == [False]
        assert store.load_run(run_id).record.status == RUN_RUNNING


def test_a_store_from_before_resumes_migrates_and_its_runs_resume(store_location: str,
                                                                   monkeypatch) -> None:
    """A store that every earlier migration made (on both back-ends) gains the resume
    table and the index when opened, keeping every run, which can then be resumed."""
    with monkeypatch.context() as older:
        before_resumes = [name for name, _ in ddl.MIGRATIONS].index("005_run_resumes")
        older.setattr(ddl, "MIGRATIONS", ddl.MIGRATIONS[:before_resumes])
        older.setattr(ddl, "POSTGRES_MIGRATIONS", ddl.POSTGRES_MIGRATIONS[:before_resumes])
        older.setattr(ddl, "TABLES", ddl.TABLES - {"run_resumes"})
        # The runs table of that time: no request.
        older.setattr(store_module, "RUN_COLUMNS", store_module.RUN_COLUMNS[:-1])
        with Store.open(store_location) as store:
            run_id = _failed_run(store)
        assert "run_resumes" not in tables(store_location)
    rows = "SELECT * FROM measurements ORDER BY id"
    runs = f"SELECT {', '.join(store_module.RUN_COLUMNS[:-1])} FROM runs"
    stored_rows, stored_runs = sql(store_location, rows), sql(store_location, runs)
    with Store.open(store_location, create=False) as store:
        before = store.load_run(run_id)  # read after the upgrade
    assert "run_resumes" in tables(store_location)
    assert sql(store_location, rows) == stored_rows
    assert sql(store_location, runs) == stored_runs
    assert before.measurements == tuple(sample_measurements()) and before.superseded == ()
    assert sql(store_location, "SELECT name FROM migrations WHERE name = '005_run_resumes'"
               ) == [("005_run_resumes",)]
    with Store.open(store_location) as store:
        _measured_again(store, run_id)
        assert store.load_run(run_id).superseded == (before.measurements[1],)


def test_the_committed_schema_1_store_migrates_and_its_interrupted_run_resumes(
        tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    shutil.copyfile(CORPUS / "results-schema1.db", path)  # never the corpus itself
    with Store.open(path) as store:
        interrupted = next(r for r in store.list_runs() if r.status == RUN_INTERRUPTED)
        before = store.load_run(interrupted.id)
        store.resume_run(interrupted.id, fingerprint_id=interrupted.fingerprint_id,
                         resumed_at=2e9)
        (first,) = before.measurements[:1]
        store.add_measurement(interrupted.id, dataclasses.replace(first, started_at=2e9 + 1))
        store.finish_run(interrupted.id, RUN_COMPLETE)
        after = store.load_run(interrupted.id)
        others = [store.load_run(r.id) for r in store.list_runs() if r.id != interrupted.id]
    assert after.record.resumes == (ResumeEvent(2e9, interrupted.fingerprint_id,
                                                RUN_INTERRUPTED),)
    assert after.superseded == (first,) and after.measurements[-1].started_at == 2e9 + 1
    assert after.record.status == RUN_COMPLETE
    assert all(r.record.resumes == () and r.superseded == () for r in others)
