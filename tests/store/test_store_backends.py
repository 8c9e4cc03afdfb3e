"""The store on both back-ends (SQLite and a real PostgreSQL server): migrations, refusing
databases that are no store, round trips, run references, reading without writing."""

from __future__ import annotations

import math

import pytest
from store_data import RUN_ARGS, sample_measurements

from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.errors import EXIT_STORE, EXIT_USAGE, StoreError, UserError
from accelbench.store import Store, ddl
from fakes import stored_measurement
from postgres import is_postgres, snapshot, sql, tables


def migration_names(location: str) -> list[str]:
    order = "applied_at, name" if is_postgres(location) else "rowid"
    return [row[0] for row in sql(location, f"SELECT name FROM migrations ORDER BY {order}")]


def test_create_applies_migrations_once(store_location: str) -> None:
    with Store.open(store_location):
        pass
    with Store.open(store_location), Store.open(store_location, create=False):
        pass
    assert migration_names(store_location) == [name for name, _ in ddl.MIGRATIONS]
    assert {"fingerprints", "runs", "measurements", "profiles", "measurement_cases",
            "migrations"} <= set(tables(store_location))
    assert "figures" not in tables(store_location)


def test_both_back_ends_know_the_same_migrations() -> None:
    assert ([name for name, _ in ddl.POSTGRES_MIGRATIONS]
            == [name for name, _ in ddl.MIGRATIONS])


def test_reopening_an_up_to_date_store_writes_nothing(store_location: str) -> None:
    with Store.open(store_location):
        pass
    before = snapshot(store_location)
    with Store.open(store_location) as store:
        assert store.list_runs() == []
    with Store.open(store_location, create=False) as store:
        assert store.list_runs() == []
    assert snapshot(store_location) == before


def _foreign_tables(location: str) -> None:
    sql(location, "CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    sql(location, "INSERT INTO moz_places (id, url) VALUES (1, 'https://example.org')")


def _foreign_migrations_table(location: str) -> None:
    """Another application's "migrations" table, as many frameworks keep."""
    sql(location, "CREATE TABLE migrations (id INTEGER PRIMARY KEY, migration TEXT, batch "
        "INTEGER)")
    sql(location, "INSERT INTO migrations VALUES (1, '2014_10_12_create_users_table', 1)")


def _newer_store(location: str) -> None:
    with Store.open(location):
        pass
    sql(location, "INSERT INTO migrations VALUES ('999_from_the_future', 0)")


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (_foreign_tables, "is not an accelbench result store: .*another application"),
        (_foreign_migrations_table, "is not an accelbench result store: .*another application"),
        (_newer_store, "newer accelbench .*999_from_the_future"),
    ],
)
@pytest.mark.parametrize("create", [True, False])
def test_refused_databases_are_left_untouched(store_location: str, write, message: str,
                                              create: bool) -> None:
    if not is_postgres(store_location):
        Store.open(store_location).close()  # the folder and an empty store file
        for name in tables(store_location):
            kind = "VIEW" if name == "measurement_cases" else "TABLE"
            sql(store_location, f"DROP {kind} {name}")
        sql(store_location, "PRAGMA application_id = 0")
    write(store_location)
    before = snapshot(store_location)
    with pytest.raises(StoreError, match=message) as e:
        Store.open(store_location, create=create)
    assert e.value.exit_code == EXIT_STORE
    assert "\n" not in str(e.value)
    assert snapshot(store_location) == before


def test_an_empty_database_is_refused_for_reading_and_left_untouched(store_location: str
                                                                     ) -> None:
    if not is_postgres(store_location):
        pytest.skip("the SQLite cases are in test_store_sqlite.py")
    with pytest.raises(StoreError, match="is empty: not a result store") as e:
        Store.open(store_location, create=False)
    assert e.value.exit_code == EXIT_STORE
    assert tables(store_location) == []


def test_round_trip(store_location: str) -> None:
    measurements = sample_measurements()
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        for m in measurements:
            store.add_measurement(run_id, m)
        store.finish_run(run_id, "complete")

    with Store.open(store_location, create=False) as store:
        run = store.load_run(run_id)
    assert run.measurements == tuple(measurements)
    assert run.measurements[0].samples == (1.0e-3, 1.1e-3, 0.1 + 0.2, 9.87654321e-4)
    assert run.measurements[1].reason == "RuntimeError: no fp8 on gfx90a"
    assert run.measurements[1].samples == ()
    assert run.fingerprint == RUN_ARGS["fingerprint"]
    record = run.record
    assert record.id == run_id and run_id.startswith("20250615-150640-")
    assert record.status == "complete" and record.finished_at is not None
    assert record.started_at == 1_750_000_000.0  # a double, not a 24-bit REAL
    assert record.argv == ("run", "--suite", "quick")
    assert (record.suite, record.device, record.host) == ("quick", "cuda:0", "node-3")
    assert (record.generation_key, record.fingerprint_id) == ("rocm/gfx90a/torch-2.5",
                                                              "fp-mi250x-01")
    assert (record.n_ok, record.n_failed, record.n_skipped) == (1, 1, 1)


def test_columns_for_queries(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
        for m in sample_measurements():
            store.add_measurement(run_id, m)
    rows = sql(store_location,
               "SELECT benchmark, dtype, status, reason, family, device, duration_s, run_id"
               " FROM measurement_cases ORDER BY id")
    assert rows == [
        ("gemm", "fp16", "ok", None, "micro", "cuda:0", 3.5, run_id),
        ("gemm", "fp8", "failed", "RuntimeError: no fp8 on gfx90a", "micro", "cuda:0", 0.25,
         run_id),
        ("conv2d", None, "skipped", "MIOpen disabled", "micro", "cuda:0", 0.0, run_id),
    ]


def test_nan_figure_survives(store_location: str) -> None:
    case = Case.make("launch", "v1", "micro", {}, "cpu")
    m = stored_measurement(case, "ok", samples=(0.0, 0.0), number=1,
                           figures=(Figure("rate", math.nan, "call/s"),))
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
        store.add_measurement(run_id, m)
        (loaded,) = store.load_run(run_id).measurements
    assert math.isnan(loaded.figures[0].value)
    # The view still reads (a record JSON cannot hold shows its identity at least).
    assert [row[0] for row in sql(store_location, "SELECT run_id FROM measurement_cases")] == [
        run_id]


def test_runs_and_references(store_location: str) -> None:
    with Store.open(store_location) as store:
        with pytest.raises(UserError, match="no runs in result store"):
            store.resolve_run("latest")
        first = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        same_second = [store.begin_run(**RUN_ARGS, started_at=1_750_000_000.5)
                       for _ in range(20)]
        newest = store.begin_run(**RUN_ARGS, started_at=1_750_000_100.0)
        store.add_measurement(newest, sample_measurements()[0])
        store.finish_run(first, "failed")

        runs = store.list_runs()
        assert len({r.id for r in runs}) == 22
        assert runs[0].id == newest and runs[-1].id == first
        assert [r.id for r in store.list_runs(limit=2)] == [r.id for r in runs[:2]]
        assert runs[0].status == "running" and runs[0].finished_at is None
        assert (runs[0].n_ok, runs[0].n_failed, runs[0].n_skipped) == (1, 0, 0)
        assert runs[-1].status == "failed"

        assert store.resolve_run("latest") == store.resolve_run("last") == newest
        assert store.resolve_run(first) == first
        assert store.resolve_run(newest[:-1]) == newest
        with pytest.raises(UserError, match="ambiguous: it matches 21 runs") as e:
            store.resolve_run("20250615-150640")
        assert e.value.exit_code == EXIT_USAGE
        with pytest.raises(UserError, match="no run matches '1999'"):
            store.resolve_run("1999")
        with pytest.raises(UserError, match="no run matches"):
            store.load_run("nope")
        assert same_second  # all distinct, counted above


def test_a_taken_run_id_is_chosen_again(store_location: str, monkeypatch) -> None:
    """A run id another writer inserted between the check and the insert is not reused."""
    from accelbench.store import store as store_module

    with Store.open(store_location) as store:
        taken = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        real = store_module._unused_run_id
        calls: list[str] = []

        def unused(tx, started_at):
            calls.append("x")
            return taken if len(calls) == 1 else real(tx, started_at)

        monkeypatch.setattr(store_module, "_unused_run_id", unused)
        other = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        assert other != taken and len(calls) == 2
        assert len(store.list_runs()) == 2


def test_finish_run_checks_its_arguments(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
        with pytest.raises(ValueError, match="unknown run status"):
            store.finish_run(run_id, "done")
        with pytest.raises(StoreError, match="no run missing"):
            store.finish_run("missing", "complete")


def test_measurements_for_case(store_location: str) -> None:
    gemm = sample_measurements()[0]
    with Store.open(store_location) as store:
        later = store.begin_run(**RUN_ARGS, started_at=1_750_000_100.0)
        earlier = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        for run_id in (later, earlier):
            for m in sample_measurements():
                store.add_measurement(run_id, m)
        history = store.measurements_for_case(gemm.case.key)
        assert store.measurements_for_case("0" * 16) == []
    assert [(r.id, m) for r, m in history] == [(earlier, gemm), (later, gemm)]
    assert history[0][0].n_ok == 1


def test_a_case_pattern_reads_only_the_cases_it_selects(store_location: str) -> None:
    from accelbench.analysis.select import parse_case_pattern, select_case_runs

    gemm, fp8, conv = sample_measurements()[:3]
    with Store.open(store_location) as store:
        later = store.begin_run(**RUN_ARGS, started_at=1_750_000_100.0)
        earlier = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        for run_id in (later, earlier):
            for m in sample_measurements():
                store.add_measurement(run_id, m)
        assert {m.case.key for m in store.case_examples()} == {
            m.case.key for m in sample_measurements()}
        runs = select_case_runs(store, parse_case_pattern("GEMM dtype=fp*"))
        by_key = select_case_runs(store, conv.case.key)
        assert select_case_runs(store, parse_case_pattern("attention")) == []
    assert [r.record.id for r in runs] == [earlier, later]
    assert all(r.measurements == (gemm, fp8) for r in runs)
    assert [(r.record.id, r.measurements) for r in by_key] == [(earlier, (conv,)),
                                                               (later, (conv,))]


def test_the_newest_run_of_each_node_is_read_alone(store_location: str) -> None:
    from accelbench.analysis.baseline import node_runs
    from accelbench.analysis.select import select_node_runs, select_runs

    with Store.open(store_location) as store:
        for i, host in enumerate(["node-b", "node-a", "node-b", "node-a", "node-c"]):
            run_id = store.begin_run(**{**RUN_ARGS, "host": host},
                                     started_at=1_750_000_000.0 + i)
            store.add_measurement(run_id, sample_measurements()[0])
        newest = select_node_runs(store, [])
        assert newest == node_runs(select_runs(store, []))
        assert [r.record.host for r in newest] == ["node-a", "node-b", "node-c"]
        assert {r.record.started_at for r in newest} == {
            1_750_000_002.0, 1_750_000_003.0, 1_750_000_004.0}
        only_b = select_node_runs(store, ["host=node-b"])
    assert [(r.record.host, r.record.started_at) for r in only_b] == [
        ("node-b", 1_750_000_002.0)]


def test_profiles_round_trip(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
        first = store.add_profile(run_id, case_key="k1", benchmark="gemm", label="gemm fp16",
                                  trace_paths=["a.json"], analysis={"top": [1, 2]},
                                  created_at=5.0)
        second = store.add_profile(run_id, case_key="k2", benchmark="gemm", label="b",
                                   trace_paths=[], analysis={})
        profiles = store.profiles_for_run("latest")
    assert second > first > 0
    assert next((p.id, p.case_key, p.trace_paths, p.analysis, p.created_at)
            for p in profiles) == (first, "k1", ("a.json",), {"top": [1, 2]}, 5.0)
    assert [p.id for p in profiles] == [first, second]


def test_import_runs_is_idempotent_and_refuses_another_fingerprint(store_location: str,
                                                                   tmp_path) -> None:
    source = str(tmp_path / "source.sqlite")
    with Store.open(source) as store:
        run_id = store.begin_run(**RUN_ARGS)
        for m in sample_measurements():
            store.add_measurement(run_id, m)
        stored = store.load_run(run_id)
    with Store.open(store_location) as store:
        assert store.import_runs([stored]) == [True]
        assert store.import_runs([stored]) == [False]
        assert store.load_run(run_id) == stored
        other = stored.record.__class__(**{**stored.record.__dict__, "id": "other"})
        changed = stored.__class__(other, {"something": "else"}, stored.measurements)
        with pytest.raises(StoreError, match="holds fingerprint 'fp-mi250x-01' with other"):
            store.import_runs([changed])
        assert [r.id for r in store.list_runs()] == [run_id]
    assert sql(store_location, "SELECT count(*) FROM measurements") == [(3,)]


def _patch_migrations(monkeypatch, extra: tuple[str, list[str]]) -> None:
    monkeypatch.setattr(ddl, "MIGRATIONS", [*ddl.MIGRATIONS, extra])
    monkeypatch.setattr(ddl, "POSTGRES_MIGRATIONS", [*ddl.POSTGRES_MIGRATIONS, extra])


def test_a_new_migration_upgrades_an_existing_store(store_location: str, monkeypatch) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
    with monkeypatch.context() as patched:
        _patch_migrations(patched, ("999_broken", ["ALTER TABLE runs ADD COLUMN note TEXT",
                                                   "ALTER TABLE no_such_table ADD COLUMN x TEXT"]))
        with pytest.raises(StoreError, match="no_such_table"):
            Store.open(store_location)
    assert "999_broken" not in migration_names(store_location)  # rolled back whole

    _patch_migrations(monkeypatch, ("999_run_note", ["ALTER TABLE runs ADD COLUMN note TEXT"]))
    with Store.open(store_location) as store:
        assert store.resolve_run("latest") == run_id
    assert migration_names(store_location)[-1] == "999_run_note"
    assert sql(store_location, "SELECT note FROM runs") == [(None,)]


def test_reading_opens_the_store_read_only(store_location: str) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
    before = snapshot(store_location)
    with Store.open(store_location, create=False) as store:
        assert store.read_only
        assert store.resolve_run("latest") == run_id
        with pytest.raises(StoreError, match="open for reading only"):
            store.begin_run(**RUN_ARGS)
        # The connection itself cannot write.
        with pytest.raises(StoreError, match=r"(?i)read-?only"):
            store._query("DELETE FROM runs WHERE id = ?", (run_id,))
    assert snapshot(store_location) == before


def test_reading_upgrades_an_older_store_that_can_be_written(store_location: str,
                                                             monkeypatch) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(**RUN_ARGS)
    _patch_migrations(monkeypatch, ("999_run_note", ["ALTER TABLE runs ADD COLUMN note TEXT"]))
    with Store.open(store_location, create=False) as store:
        assert store.read_only
        assert store.resolve_run("latest") == run_id
        assert store._query("SELECT note FROM runs") != []
    assert migration_names(store_location)[-1] == "999_run_note"
    with Store.open(store_location, create=False) as store:
        assert store.load_run(run_id).record.id == run_id


def test_an_older_postgres_store_merged_from_is_not_changed(store_location: str,
                                                           monkeypatch) -> None:
    if not is_postgres(store_location):
        pytest.skip("SQLite upgrades a copy in memory: test_store_sqlite.py")
    with Store.open(store_location) as store:
        store.begin_run(**RUN_ARGS)
    before = snapshot(store_location)
    _patch_migrations(monkeypatch, ("999_run_note", ["ALTER TABLE runs ADD COLUMN note TEXT"]))
    with pytest.raises(StoreError, match="older accelbench and is not upgraded here"):
        Store.open(store_location, create=False, upgrade_in_place=False)
    assert snapshot(store_location) == before
