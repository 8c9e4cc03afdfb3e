"""The SQLite back-end of the store: one file, the embedded default.

Several processes may write to one store at once (WAL journal, a long busy timeout,
one short transaction per measurement: BEGIN IMMEDIATE takes the write lock), and a
writer that dies loses only what it had not committed. The file is checked before
SQLite opens it (a FIFO, a device, a directory or a file that is no database is refused
without being opened), and a store that is only read is opened read-only: as immutable
where its directory cannot be written, and upgraded in a copy in memory where the file
cannot be written.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from accelbench.errors import StoreError
from accelbench.store import ddl
from accelbench.store.backend import Inspection, Result, Row, Transaction
from accelbench.store.location import SQLITE, StoreLocation

__all__ = ["SqliteBackend", "check_regular_file", "open_sqlite"]

BUSY_TIMEOUT_S = 60.0
_SQLITE_HEADER = b"SQLite format 3\x00"
_SQLITE_READONLY, _SQLITE_CANTOPEN = 8, 14  # primary result codes


def open_sqlite(path: Path, *, create: bool) -> SqliteBackend:
    """The store file at `path`: created (with its folders) if asked, else opened
    read-only; refused, untouched, when it is no file SQLite should open."""
    _check_file(path, create)
    if create:
        return SqliteBackend(path, _connect(path, "mode=rwc"), read_only=False)
    return SqliteBackend(path, _connect_read_only(path), read_only=True)


class _Tx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)


class SqliteBackend:
    @property
    def foreign_reason(self) -> str:
        return "it is the SQLite database of another application"

    def __init__(self, path: Path, conn: sqlite3.Connection, *, read_only: bool) -> None:
        self.location = StoreLocation(SQLITE, path=path)
        self.path = path
        self._conn = conn
        self.read_only = read_only

    @property
    def migrations(self) -> Sequence[tuple[str, Sequence[ddl.Step]]]:
        return ddl.MIGRATIONS

    def close(self) -> None:
        self._conn.close()

    def inspect(self) -> Inspection:
        conn = self._conn
        try:
            conn.execute("BEGIN")  # one snapshot, while other processes may be migrating
            try:
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                tables = frozenset(row[0] for row in rows)
                applied = (
                    frozenset(row[0] for row in conn.execute("SELECT name FROM migrations"))
                    if "migrations" in tables and app_id == ddl.APPLICATION_ID
                    else frozenset()
                )
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        except sqlite3.OperationalError as e:
            raise StoreError(f"cannot read result store {self.path}: {e}") from None
        except sqlite3.DatabaseError as e:
            if _corrupt(e):
                raise _damaged(self.path, e) from None
            raise StoreError(f"{self.path} is not an accelbench result store: {e}") from None
        mark = ("ours" if app_id == ddl.APPLICATION_ID else "none" if app_id == 0
                else "foreign")
        return Inspection(tables, mark, applied)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            if _corrupt(e):
                raise _damaged(self.path, e) from None
            raise StoreError(f"cannot read result store {self.path}: {e}") from None
        except sqlite3.Error as e:
            raise StoreError(f"cannot read result store {self.path}: {e}") from None

    @contextmanager
    def write(self) -> Iterator[_Tx]:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield _Tx(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise StoreError(f"cannot write result store {self.path}: {e}") from None

    def migration_transaction(self) -> AbstractContextManager[_Tx]:
        return self.write()  # BEGIN IMMEDIATE is the lock

    def mark_migrated(self, tx: Transaction, applied: int) -> None:
        tx.execute(f"PRAGMA user_version = {int(applied)}")
        tx.execute(f"PRAGMA application_id = {ddl.APPLICATION_ID}")

    def prepare_for_writes(self) -> None:
        try:
            _enable_wal(self._conn)
        except sqlite3.Error as e:
            raise StoreError(f"cannot write result store {self.path}: {e}") from None

    def can_upgrade_in_place(self) -> bool:
        return _writable(self.path)

    def reopened(self, *, writable: bool) -> SqliteBackend:
        if writable:
            return SqliteBackend(self.path, _connect(self.path, "mode=rw"), read_only=False)
        return SqliteBackend(self.path, _connect_read_only(self.path), read_only=True)

    def copy_for_reading(self) -> SqliteBackend:
        try:
            copy = _copy_in_memory(self._conn, self.path)
        finally:
            self.close()
        return SqliteBackend(self.path, copy, read_only=False)


def _check_file(path: Path, create: bool) -> None:
    """Refuse what SQLite should not even open (what is not a regular file, from its
    stat, as check_regular_file does); create parent directories if asked."""
    try:
        info = path.stat()
    except NotADirectoryError:
        raise StoreError(f"no result store can be at {path}: {_file_in_the_way(path)} is "
                         "not a folder") from None
    except FileNotFoundError:
        if not create:
            raise StoreError(f"no result store at {path}; run `accelbench run` first") from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create result store {path}: {e.strerror or e}") from None
        return
    except OSError as e:
        raise StoreError(f"cannot read result store {path}: {e.strerror or e}") from None
    _refuse_special(path, info.st_mode)
    if not create and info.st_size == 0:
        raise StoreError(f"{path} is empty: not a result store")
    header = _read_header(path)
    if header and header != _SQLITE_HEADER:
        raise StoreError(f"{path} is not an accelbench result store: file is not a database")


def _file_in_the_way(path: Path) -> Path:
    """The nearest folder of `path` that is a file (or something else) instead."""
    for parent in path.parents:
        try:
            if not stat.S_ISDIR(parent.stat().st_mode):
                return parent
        except OSError:
            continue
    return path.parent


def check_regular_file(path: Path) -> os.stat_result:
    """Its stat, refusing without opening it what is not a regular file: a FIFO opened
    for reading waits for a writer forever, and a device is no store."""
    try:
        info = path.stat()
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from None
    _refuse_special(path, info.st_mode)
    return info


def _refuse_special(path: Path, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise StoreError(f"result store {path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a special file")
        raise StoreError(f"result store {path} is {kind}, not a regular file")


def _read_header(path: Path) -> bytes:
    """The first bytes of the file; O_NONBLOCK, so that a FIFO put in its place since
    the stat cannot make this wait (it is refused again from the open file)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise StoreError(f"cannot read result store {path}: {e.strerror or e}") from None
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
        return os.read(fd, len(_SQLITE_HEADER))
    except OSError as e:
        raise StoreError(f"cannot read result store {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _connect(path: Path, query: str) -> sqlite3.Connection:
    """A connection to the store opened as the URI `query` says (mode=rwc, rw or ro)."""
    uri = f"{path.resolve().as_uri()}?{query}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open result store {path}: {e}") from None
    return _configured(conn, path)


def _configured(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as e:
        conn.close()
        raise StoreError(f"cannot open result store {path}: {e}") from None
    return conn


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection, which writes nothing to the store.

    Reading a WAL store needs its -shm file, which SQLite creates beside the store when
    it is missing; in a directory that cannot be written (read-only media, an archive)
    that fails, and the store is opened as immutable instead. That is safe only when no
    write-ahead log holds committed changes not yet in the file: a log is left only
    beside a store that some writer still has open, or that one left when it died, and
    then the store is refused rather than read without them.
    """
    conn = _connect(path, "mode=ro")
    try:
        _first_read(conn)
        return conn
    except sqlite3.OperationalError as e:
        conn.close()
        if not _cannot_open_shared_memory(e):
            raise StoreError(f"cannot read result store {path}: {e}") from None
    except sqlite3.DatabaseError as e:  # a truncated or overwritten file
        conn.close()
        raise _damaged(path, e) if _corrupt(e) else StoreError(
            f"{path} is not an accelbench result store: {e}") from None
    real = path.resolve()  # where SQLite keeps the log of a store given by a link
    log = real.with_name(real.name + "-wal")
    if log.exists() and log.stat().st_size > 0:
        raise StoreError(f"cannot read result store {path}: its write-ahead log {log.name} "
                         "holds changes, and its directory cannot be written")
    return _connect(path, "mode=ro&immutable=1")


def _first_read(conn: sqlite3.Connection) -> None:
    """Read the schema: where SQLite opens (or fails to open) a WAL store's -shm file."""
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def _cannot_open_shared_memory(e: sqlite3.OperationalError) -> bool:
    """SQLITE_CANTOPEN or SQLITE_READONLY (and their extended codes): what reading a WAL
    store fails with when its -shm file can neither be opened nor created."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CANTOPEN, _SQLITE_READONLY)
    return "unable to open" in str(e) or "readonly" in str(e)


_SQLITE_CORRUPT = 11  # primary result code


def _corrupt(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return bool(code & 0xFF == _SQLITE_CORRUPT)
    return "malformed" in str(e)


def _damaged(path: Path, e: sqlite3.Error) -> StoreError:
    return StoreError(f"result store {path} is damaged ({e}): restore it from a copy")


def _writable(path: Path) -> bool:
    """Whether an upgrade can be written: the file, and its directory for the journal."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _copy_in_memory(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """The store read into memory, to be upgraded there when it cannot be written."""
    copy = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.backup(copy)
    except sqlite3.Error as e:
        copy.close()
        raise StoreError(f"cannot read result store {path}: {e}") from None
    return _configured(copy, path)


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch a new store to WAL, waiting for other processes doing the same.

    SQLite does not call the busy handler for this change, so wait here instead.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
