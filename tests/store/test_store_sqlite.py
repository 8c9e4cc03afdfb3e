"""The SQLite store: opening and refusing files, migrations, round trips, run references."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.errors import EXIT_STORE, EXIT_USAGE, StoreError, UserError
from accelbench.store import Store, default_store_path
from accelbench.store.schema import APPLICATION_ID, MIGRATIONS
from fakes import stored_measurement

RUN_ARGS = {
    "fingerprint": {"device": {"name": "AMD Instinct MI250X", "arch": "gfx90a"}, "rocm": "6.2"},
    "fingerprint_id": "fp-mi250x-01",
    "generation_key": "rocm/gfx90a/torch-2.5",
    "device": "cuda:0",
    "suite": "quick",
    "argv": ["run", "--suite", "quick"],
    "host": "node-3",
    "accelbench_version": "0.1.0",
}


def sample_measurements() -> list[Measurement]:
    gemm = Case.make("gemm", "v1", "micro", {"shape": 4096, "dtype": "fp16"}, "cuda:0")
    fp8 = Case.make("gemm", "v1", "micro", {"shape": 4096, "dtype": "fp8"}, "cuda:0")
    conv = Case.make("conv2d", "v2", "micro", {"channels": 64}, "cuda:0")
    return [
        stored_measurement(
            case=gemm, status="ok", samples=(1.0e-3, 1.1e-3, 0.1 + 0.2, 9.87654321e-4),
            number=10,
            figures=(Figure("throughput", 1.2345678901234e14, "FLOP/s", True, 3.83e14),
                     Figure("time", 1.05e-3, "s", higher_is_better=False)),
            warnings=("noisy: IQR is 12% of the median",),
            details={"stop_reason": "budget", "warmup_calls": 5},
            started_at=1_750_000_001.25, duration_s=3.5, confidence=0.99,
        ),
        stored_measurement(case=fp8, status="failed", reason="RuntimeError: no fp8 on gfx90a",
                    started_at=1_750_000_005.0, duration_s=0.25),
        stored_measurement(case=conv, status="skipped", reason="MIOpen disabled",
                    started_at=1_750_000_006.0),
    ]


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "results.sqlite"


def test_default_store_path_honours_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCELBENCH_STORE", str(tmp_path / "x.sqlite"))
    assert default_store_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("ACCELBENCH_STORE")
    assert default_store_path().name == "results.sqlite"


def test_create_applies_migrations_once(store_path: Path) -> None:
    with Store.open(store_path):
        pass
    with Store.open(store_path), Store.open(store_path, create=False):
        pass
    conn = sqlite3.connect(store_path)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM migrations")]
        assert names == [name for name, _ in MIGRATIONS]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_reopening_an_up_to_date_store_writes_nothing(store_path: Path) -> None:
    with Store.open(store_path):
        pass
    before = snapshot(store_path)
    with Store.open(store_path) as store:
        assert store.list_runs() == []
    assert snapshot(store_path) == before


def test_missing_store_without_create(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "results.sqlite"
    with pytest.raises(StoreError, match=r"no result store at .*run `accelbench run` first") as e:
        Store.open(path, create=False)
    assert e.value.exit_code == EXIT_STORE
    assert not path.exists() and not path.parent.exists()


def _write_text(path: Path) -> None:
    path.write_text("run_id,value\n1,2\n")


def _write_random(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _write_foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
        conn.commit()
    finally:
        conn.close()


def _write_other_application_id(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA application_id = 1234")
        conn.commit()
    finally:
        conn.close()


def _write_newer_store(path: Path) -> None:
    with Store.open(path):
        pass
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO migrations VALUES ('999_from_the_future', 0)")
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (_write_text, "file is not a database"),
        (_write_random, "file is not a database"),
        (_write_foreign_db, "another application"),
        (_write_other_application_id, "another application"),
        (_write_newer_store, "newer accelbench .*999_from_the_future"),
    ],
)
@pytest.mark.parametrize("create", [True, False])
def test_refused_files_are_left_untouched(tmp_path: Path, write, message: str,
                                          create: bool) -> None:
    path = tmp_path / "results.sqlite"
    write(path)
    before = snapshot(path)
    with pytest.raises(StoreError, match=message) as e:
        Store.open(path, create=create)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)
    assert snapshot(path) == before


def test_unusable_paths(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        Store.open(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create result store"):
        Store.open(blocker / "results.sqlite")


def test_round_trip(store_path: Path) -> None:
    measurements = sample_measurements()
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        for m in measurements:
            store.add_measurement(run_id, m)
        store.finish_run(run_id, "complete")

    with Store.open(store_path, create=False) as store:
        run = store.load_run(run_id)
    assert run.measurements == tuple(measurements)
    assert run.measurements[0].samples == (1.0e-3, 1.1e-3, 0.1 + 0.2, 9.87654321e-4)
    assert run.measurements[1].reason == "RuntimeError: no fp8 on gfx90a"
    assert run.measurements[1].samples == ()
    assert run.fingerprint == RUN_ARGS["fingerprint"]
    record = run.record
    assert record.id == run_id and run_id.startswith("20250615-150640-")
    assert record.status == "complete" and record.finished_at is not None
    assert record.argv == ("run", "--suite", "quick")
    assert (record.suite, record.device, record.host) == ("quick", "cuda:0", "node-3")
    assert (record.generation_key, record.fingerprint_id) == ("rocm/gfx90a/torch-2.5",
                                                              "fp-mi250x-01")
    assert (record.n_ok, record.n_failed, record.n_skipped) == (1, 1, 1)


def test_columns_for_queries(store_path: Path) -> None:
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
        for m in sample_measurements():
            store.add_measurement(run_id, m)
    conn = sqlite3.connect(store_path)
    try:
        rows = conn.execute(
            "SELECT benchmark, dtype, status, reason, family, device, duration_s, run_id"
            " FROM measurement_cases ORDER BY id"
        ).fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert rows == [
        ("gemm", "fp16", "ok", None, "micro", "cuda:0", 3.5, run_id),
        ("gemm", "fp8", "failed", "RuntimeError: no fp8 on gfx90a", "micro", "cuda:0", 0.25,
         run_id),
        ("conv2d", None, "skipped", "MIOpen disabled", "micro", "cuda:0", 0.0, run_id),
    ]
    assert "figures" not in tables  # figures are derived from the records when read


def test_nan_figure_survives(store_path: Path) -> None:
    case = Case.make("launch", "v1", "micro", {}, "cpu")
    m = stored_measurement(case, "ok", samples=(0.0, 0.0), number=1,
                    figures=(Figure("rate", math.nan, "call/s"),))
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
        store.add_measurement(run_id, m)
        (loaded,) = store.load_run(run_id).measurements
    assert math.isnan(loaded.figures[0].value)


def test_runs_and_references(store_path: Path) -> None:
    with Store.open(store_path) as store:
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


def test_finish_run_checks_its_arguments(store_path: Path) -> None:
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
        with pytest.raises(ValueError, match="unknown run status"):
            store.finish_run(run_id, "done")
        with pytest.raises(StoreError, match="no run missing"):
            store.finish_run("missing", "complete")


def test_measurements_for_case(store_path: Path) -> None:
    gemm = sample_measurements()[0]
    with Store.open(store_path) as store:
        later = store.begin_run(**RUN_ARGS, started_at=1_750_000_100.0)
        earlier = store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0)
        for run_id in (later, earlier):
            for m in sample_measurements():
                store.add_measurement(run_id, m)
        history = store.measurements_for_case(gemm.case.key)
        assert store.measurements_for_case("0" * 16) == []
    assert [(r.id, m) for r, m in history] == [(earlier, gemm), (later, gemm)]
    assert history[0][0].n_ok == 1


def test_a_new_migration_upgrades_an_existing_store(store_path: Path, monkeypatch) -> None:
    from accelbench.store import sqlite as store_sqlite

    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
    broken = [*MIGRATIONS, ("999_broken", ["ALTER TABLE runs ADD COLUMN note TEXT",
                                           "ALTER TABLE no_such_table ADD COLUMN x"])]
    monkeypatch.setattr(store_sqlite, "MIGRATIONS", broken)
    monkeypatch.setattr(store_sqlite, "KNOWN_MIGRATIONS", {name for name, _ in broken})
    with pytest.raises(StoreError, match="no such table"):
        Store.open(store_path)

    added = [*MIGRATIONS, ("999_run_note", ["ALTER TABLE runs ADD COLUMN note TEXT"])]
    monkeypatch.setattr(store_sqlite, "MIGRATIONS", added)
    monkeypatch.setattr(store_sqlite, "KNOWN_MIGRATIONS", {name for name, _ in added})
    with Store.open(store_path) as store:
        assert store.resolve_run("latest") == run_id
    conn = sqlite3.connect(store_path)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
        assert names == [*(name for name, _ in MIGRATIONS), "999_run_note"]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1
        assert conn.execute("SELECT note FROM runs").fetchall() == [(None,)]
    finally:
        conn.close()


# -- files that are not files, and reading that must not write ---------------------------


@pytest.fixture
def no_hang():
    """Fail, rather than hang, a test whose code under test blocks (opening a FIFO)."""
    import signal

    def expire(signum, frame):
        raise TimeoutError("blocked: the FIFO was opened")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO"


def _socket(path: Path) -> str:
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays
    return "a socket"


@pytest.mark.parametrize("make", [_fifo, _socket])
@pytest.mark.parametrize("create", [True, False])
def test_special_files_are_refused_without_opening_them(tmp_path: Path, make, create: bool,
                                                        no_hang) -> None:
    path = tmp_path / "results.sqlite"
    kind = make(path)
    with pytest.raises(StoreError, match=f"{path} is {kind}, not a regular file") as e:
        Store.open(path, create=create)
    assert e.value.exit_code == EXIT_STORE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


@pytest.mark.parametrize("create", [True, False])
def test_a_device_is_refused(create: bool) -> None:
    with pytest.raises(StoreError, match="/dev/null is a device, not a regular file"):
        Store.open("/dev/null", create=create)


def _write_empty(path: Path) -> None:
    path.write_bytes(b"")


def _write_schemaless(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA user_version = 7")  # a valid SQLite file with no table
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("write", [_write_empty, _write_schemaless])
def test_an_empty_file_is_refused_for_reading_and_left_untouched(tmp_path: Path,
                                                                 write) -> None:
    path = tmp_path / "empty.sqlite"
    write(path)
    before = snapshot(path)
    with pytest.raises(StoreError, match=f"^{path} is empty: not a result store$") as e:
        Store.open(path, create=False)
    assert e.value.exit_code == EXIT_STORE
    assert snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]


def test_an_empty_file_still_becomes_a_store_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    with Store.open(path) as store:
        store.begin_run(**RUN_ARGS)
    with Store.open(path, create=False) as store:
        assert len(store.list_runs()) == 1


def test_reading_opens_the_store_read_only(store_path: Path) -> None:
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
    before = snapshot(store_path)
    with Store.open(store_path, create=False) as store:
        assert store.read_only
        assert store.resolve_run("latest") == run_id
        with pytest.raises(StoreError, match="open for reading only"):
            store.begin_run(**RUN_ARGS)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._conn.execute("DELETE FROM runs")  # the connection itself cannot write
    assert snapshot(store_path) == before


def _older_accelbench(monkeypatch) -> None:
    """Make the stores written so far be those of an older accelbench: this one knows a
    migration that they lack."""
    from accelbench.store import sqlite as store_sqlite

    added = [*MIGRATIONS, ("999_run_note", ["ALTER TABLE runs ADD COLUMN note TEXT"])]
    monkeypatch.setattr(store_sqlite, "MIGRATIONS", added)
    monkeypatch.setattr(store_sqlite, "KNOWN_MIGRATIONS", {name for name, _ in added})


def _migration_names(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
    finally:
        conn.close()


def test_reading_upgrades_an_older_store_that_can_be_written(store_path: Path,
                                                             monkeypatch) -> None:
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
    _older_accelbench(monkeypatch)
    with Store.open(store_path, create=False) as store:
        assert store.read_only
        assert store.resolve_run("latest") == run_id
        assert store._query("SELECT note FROM runs") != []
    assert _migration_names(store_path)[-1] == "999_run_note"
    with Store.open(store_path, create=False) as store:
        assert store.load_run(run_id).record.id == run_id


def test_reading_an_older_store_that_cannot_be_written_upgrades_a_copy(
        store_path: Path, monkeypatch) -> None:
    from accelbench.store import sqlite as store_sqlite

    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
        store.add_measurement(run_id, sample_measurements()[0])
    before = snapshot(store_path)
    _older_accelbench(monkeypatch)
    monkeypatch.setattr(store_sqlite, "_writable", lambda path: False)
    with Store.open(store_path, create=False) as store:
        assert store.read_only
        assert store.load_run(run_id).measurements == (sample_measurements()[0],)
        assert store._query("SELECT note FROM runs") != []  # upgraded, in memory
        with pytest.raises(StoreError, match="open for reading only"):
            store.finish_run(run_id, "complete")
    assert snapshot(store_path) == before
    assert "999_run_note" not in _migration_names(store_path)


def _cannot_open_shm(monkeypatch, error: str = "unable to open database file",
                     code: int = 14) -> list[int]:
    """Make the first read of the store fail as on a read-only directory (SQLite cannot
    create the -shm file there), and later ones (the immutable fallback) work."""
    from accelbench.store import sqlite as store_sqlite

    calls: list[int] = []
    real = store_sqlite._first_read

    def first_read(conn: sqlite3.Connection) -> None:
        calls.append(1)
        if len(calls) == 1:
            e = sqlite3.OperationalError(error)
            e.sqlite_errorcode = code
            raise e
        real(conn)

    monkeypatch.setattr(store_sqlite, "_first_read", first_read)
    return calls


def test_a_store_in_a_read_only_directory_is_read_as_immutable(store_path: Path,
                                                                monkeypatch) -> None:
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
        store.add_measurement(run_id, sample_measurements()[0])
    before = snapshot(store_path)
    calls = _cannot_open_shm(monkeypatch)
    with Store.open(store_path, create=False) as store:
        assert store.load_run(run_id).measurements == (sample_measurements()[0],)
    assert len(calls) == 1
    assert snapshot(store_path) == before
    # Read as immutable: a read-only WAL reader would have created the -shm file.
    assert [p.name for p in store_path.parent.iterdir()] == ["results.sqlite"]


def test_the_immutable_fallback_refuses_a_store_with_unsaved_log(store_path: Path,
                                                                 monkeypatch) -> None:
    with Store.open(store_path) as writer:  # still open: its commits are in the -wal file
        writer.begin_run(**RUN_ARGS)
        _cannot_open_shm(monkeypatch)
        with pytest.raises(StoreError, match=r"write-ahead log results\.sqlite-wal holds"):
            Store.open(store_path, create=False)


def test_other_read_errors_do_not_fall_back(store_path: Path, monkeypatch) -> None:
    Store.open(store_path).close()
    calls = _cannot_open_shm(monkeypatch, "disk I/O error", code=10)
    with pytest.raises(StoreError, match=r"cannot read result store .*disk I/O error"):
        Store.open(store_path, create=False)
    assert len(calls) == 1
