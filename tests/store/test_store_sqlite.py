"""The SQLite back-end: opening and refusing files, its pragmas, reading without writing.

What both back-ends do alike is tested on both in test_store.py."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from store_data import RUN_ARGS, sample_measurements

from accelbench.errors import EXIT_STORE, StoreError
from accelbench.store import Store, default_store_path
from accelbench.store.ddl import APPLICATION_ID, MIGRATIONS


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


def _write_other_application_id(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA application_id = 1234")
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (_write_text, "file is not a database"),
        (_write_random, "file is not a database"),
        (_write_other_application_id, "another application"),
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
    with pytest.raises(StoreError, match="is not a folder"):
        Store.open(blocker / "results.sqlite")


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


def _older_accelbench(monkeypatch) -> None:
    """Make the stores written so far be those of an older accelbench: this one knows a
    migration that they lack."""
    from accelbench.store import ddl

    added = [*MIGRATIONS, ("999_run_note", ["ALTER TABLE runs ADD COLUMN note TEXT"])]
    monkeypatch.setattr(ddl, "MIGRATIONS", added)


def _migration_names(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
    finally:
        conn.close()


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


class _CodedOperationalError(sqlite3.OperationalError):
    """An OperationalError carrying its SQLite result code, as sqlite3 raises them from
    Python 3.11 on."""

    sqlite_errorcode: int


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
            e = _CodedOperationalError(error)
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
