"""The result store: one SQLite file, written as each case finishes.

Several processes may write to one store at once (WAL journal, a long busy timeout,
one short transaction per measurement), and a writer that dies loses only what it had
not committed: its run stays "running". Opening checks that the file is an accelbench
store this version understands before anything is written to it.

Reading (`Store.open(path, create=False)`, what every read command does) opens the file
read-only and never creates or changes a store, with one exception: a store written by
an older accelbench is upgraded, losslessly and one transaction per migration, when the
file can be written; when it cannot, it is read from an upgraded copy in memory.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core.measurement import FORMAT_VERSION, Measurement
from accelbench.core.names import (
    RUN_COMPLETE,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_RUNNING,
    RUN_STATUSES,
)
from accelbench.errors import StoreError, UserError
from accelbench.store.schema import (
    APPLICATION_ID,
    KNOWN_MIGRATIONS,
    MIGRATIONS,
    MIGRATIONS_TABLE,
)

__all__ = [
    "RUN_COMPLETE", "RUN_FAILED", "RUN_INTERRUPTED", "RUN_RUNNING", "RUN_STATUSES",
    "RunRecord", "Store", "StoredProfile", "StoredRun", "check_regular_file",
    "default_store_path",
]

BUSY_TIMEOUT_S = 60.0
_SQLITE_HEADER = b"SQLite format 3\x00"
_SQLITE_READONLY, _SQLITE_CANTOPEN = 8, 14  # primary result codes


def default_store_path() -> Path:
    """$ACCELBENCH_STORE if set, else results.sqlite in the user's data directory."""
    env = os.environ.get("ACCELBENCH_STORE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_path

    return user_data_path("accelbench", appauthor=False) / "results.sqlite"


@dataclass(frozen=True)
class RunRecord:
    id: str
    started_at: float
    finished_at: float | None
    status: str
    suite: str | None
    argv: tuple[str, ...]
    device: str
    generation_key: str
    host: str
    accelbench_version: str
    fingerprint_id: str
    n_ok: int
    n_failed: int
    n_skipped: int


@dataclass(frozen=True)
class StoredRun:
    record: RunRecord
    fingerprint: dict[str, Any]
    measurements: tuple[Measurement, ...]  # in the order they were added


@dataclass(frozen=True)
class StoredProfile:
    """A profile of one case of a run: its trace files and their analysis (JSON)."""

    id: int
    run_id: str
    case_key: str
    benchmark: str
    label: str
    trace_paths: tuple[str, ...]
    analysis: dict[str, Any]
    created_at: float


_RUNS_QUERY = """
SELECT r.*,
       COALESCE(SUM(m.status = 'ok'), 0) AS n_ok,
       COALESCE(SUM(m.status = 'failed'), 0) AS n_failed,
       COALESCE(SUM(m.status = 'skipped'), 0) AS n_skipped
FROM runs r LEFT JOIN measurements m ON m.run_id = r.id
{where}
GROUP BY r.id
ORDER BY r.started_at DESC, r.id DESC
{limit}
"""


class Store:
    """An open result store. Use `Store.open(path)`, as a context manager."""

    def __init__(self, path: Path, connection: sqlite3.Connection,
                 read_only: bool = False) -> None:
        self.path = path
        self._conn = connection
        self.read_only = read_only
        self._pending: list[str] = []  # migrations this (read-only) store lacks

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, create: bool = True,
             upgrade_in_place: bool = True) -> Store:
        """Open (and with `create`, create) the store at `path` (default: default_store_path()).

        Without `create` the store is only read: opened read-only, and refused when it is
        missing or empty; one of an older accelbench is upgraded in place when it can be
        written and `upgrade_in_place` (the user's own store), else in a copy in memory
        (a store merged from elsewhere is never changed). Raises StoreError, leaving the
        file as it was, when it is missing (and `create` is false), not a regular file,
        unreadable, not SQLite, another application's database or written by a newer
        accelbench.
        """
        path = Path(path).expanduser() if path is not None else default_store_path()
        _check_file(path, create)
        if create:
            return cls._opened(path, _connect(path, "mode=rwc"), migrate=True)
        store = cls._opened(path, _connect_read_only(path), migrate=False)
        return store._upgraded(upgrade_in_place) if store._pending else store

    def _upgraded(self, in_place: bool) -> Store:
        """This store, written by an older accelbench, brought to the schema that reading
        it needs; closes this one.

        The one write that reading does: in place when asked and the file can be written
        (every migration keeps every record, and runs in its own transaction); else in a
        copy in memory, so that a store on read-only media, of another user or merged
        from elsewhere can be read.
        """
        path = self.path
        if not (in_place and _writable(path)):
            try:
                copy = _copy_in_memory(self._conn, path)
            finally:
                self.close()
            return self._opened(path, copy, migrate=True, read_only=True)
        self.close()
        self._opened(path, _connect(path, "mode=rw"), migrate=True).close()
        return self._opened(path, _connect_read_only(path), migrate=False)

    @classmethod
    def _opened(cls, path: Path, conn: sqlite3.Connection, *, migrate: bool,
                read_only: bool = False) -> Store:
        """The store on an open connection, checked (and with `migrate`, brought up to
        date); the connection is closed if that fails."""
        store = cls(path, conn, read_only=not migrate)
        try:
            applied = store._applied_migrations()
            if migrate:
                store._migrate(applied)
            else:
                store._pending = [name for name, _ in MIGRATIONS if name not in applied]
        except BaseException:
            conn.close()
            raise
        store.read_only = store.read_only or read_only
        return store

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _applied_migrations(self) -> set[str]:
        """Read-only checks that this is our store and not from a newer accelbench."""
        conn = self._conn
        try:
            conn.execute("BEGIN")  # one snapshot, while other processes may be migrating
            try:
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                tables = {row[0] for row in rows}
                applied = (
                    {row[0] for row in conn.execute("SELECT name FROM migrations")}
                    if "migrations" in tables
                    else set()
                )
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        except sqlite3.OperationalError as e:
            raise StoreError(f"cannot read result store {self.path}: {e}") from None
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} is not an accelbench result store: {e}") from None
        if app_id != APPLICATION_ID and (app_id != 0 or tables):
            raise StoreError(
                f"{self.path} is not an accelbench result store: "
                "it is the SQLite database of another application"
            )
        if not tables and self.read_only:
            raise StoreError(f"{self.path} is empty: not a result store")
        self._refuse_unknown(applied)
        return applied

    def _refuse_unknown(self, applied: set[str]) -> None:
        unknown = sorted(applied - KNOWN_MIGRATIONS)
        if unknown:
            raise StoreError(
                f"result store {self.path} was written by a newer accelbench "
                f"(unknown schema migrations: {', '.join(unknown)}); upgrade accelbench to use it"
            )

    def _migrate(self, applied: set[str]) -> None:
        pending = [(name, sql) for name, sql in MIGRATIONS if name not in applied]
        if not pending:
            return
        try:
            _enable_wal(self._conn)
        except sqlite3.Error as e:
            raise StoreError(f"cannot write result store {self.path}: {e}") from None
        for name, statements in pending:
            # Checked again inside the write lock: another process may have applied it.
            with self._write() as conn:
                conn.execute(MIGRATIONS_TABLE)
                recorded = {row[0] for row in conn.execute("SELECT name FROM migrations")}
                self._refuse_unknown(recorded)
                if name in recorded:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                             (name, time.time()))
                conn.execute(f"PRAGMA user_version = {len(recorded) + 1}")
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    # -- transactions ----------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on exit (rolled back on any exception)."""
        if self.read_only:  # and what a copy in memory took would be lost
            raise StoreError(f"result store {self.path} is open for reading only")
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise StoreError(f"cannot write result store {self.path}: {e}") from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read result store {self.path}: {e}") from None

    # -- writing ---------------------------------------------------------------------

    def begin_run(
        self,
        *,
        fingerprint: dict[str, Any],
        fingerprint_id: str,
        generation_key: str,
        device: str,
        suite: str | None,
        argv: Sequence[str],
        host: str,
        accelbench_version: str,
        started_at: float | None = None,
    ) -> str:
        """Record a new run in status "running" and return its id."""
        started_at = time.time() if started_at is None else started_at
        with self._write() as conn:
            run_id = _unused_run_id(conn, started_at)
            record = RunRecord(
                id=run_id, started_at=started_at, finished_at=None, status=RUN_RUNNING,
                suite=suite, argv=tuple(argv), device=device, generation_key=generation_key,
                host=host, accelbench_version=accelbench_version,
                fingerprint_id=fingerprint_id, n_ok=0, n_failed=0, n_skipped=0,
            )
            _insert_run(conn, record, fingerprint)
        return run_id

    def add_measurement(self, run_id: str, m: Measurement) -> None:
        """Store one measurement, committed before this returns."""
        with self._write() as conn:
            _insert_measurement(conn, run_id, m)

    def import_run(self, stored: StoredRun) -> bool:
        """Copy a run read from another store or an export into this one, with its id;
        see import_runs."""
        return self.import_runs([stored])[0]

    def import_runs(self, runs: Sequence[StoredRun]) -> list[bool]:
        """Copy runs read from other stores or exports into this one, with their ids, all
        in one transaction: either every run is written or none is.

        Idempotent on the run id: a run already here is left as it is (False); a new one
        is written with its fingerprint and measurements (True). A fingerprint id that
        is already here with other content is refused: the id names one stack, and
        binding the run to the stored one would misstate what it ran on.
        """
        added = []
        with self._write() as conn:
            for stored in runs:
                record = stored.record
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (record.id,)).fetchone():
                    added.append(False)
                    continue
                _check_fingerprint(conn, self.path, record.fingerprint_id, stored.fingerprint)
                _insert_run(conn, record, stored.fingerprint)
                for m in stored.measurements:
                    _insert_measurement(conn, record.id, m)
                added.append(True)
        return added

    def finish_run(self, run_id: str, status: str, finished_at: float | None = None) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                (status, time.time() if finished_at is None else finished_at, run_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"no run {run_id} in result store {self.path}")

    def add_profile(
        self,
        run_id: str,
        *,
        case_key: str,
        benchmark: str,
        label: str,
        trace_paths: Sequence[str],
        analysis: dict[str, Any],
        created_at: float | None = None,
    ) -> int:
        """Store the profile of one case of a run; returns its id."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO profiles (run_id, case_key, benchmark, label, trace_paths,"
                " analysis, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, case_key, benchmark, label, _dumps(list(trace_paths)),
                 _dumps(analysis), time.time() if created_at is None else created_at),
            )
        return int(cursor.lastrowid or 0)

    # -- reading ---------------------------------------------------------------------

    def profiles_for_run(self, ref: str) -> list[StoredProfile]:
        """The profiles of a run (an id, a unique prefix or "latest"), oldest first."""
        run_id = self.resolve_run(ref)
        rows = self._query("SELECT * FROM profiles WHERE run_id = ? ORDER BY id", (run_id,))
        out = []
        for row in rows:
            try:
                paths, analysis = json.loads(row["trace_paths"]), json.loads(row["analysis"])
            except ValueError as e:
                raise StoreError(
                    f"result store {self.path}: cannot read profile {row['id']}: {e}"
                ) from None
            out.append(StoredProfile(row["id"], row["run_id"], row["case_key"],
                                     row["benchmark"], row["label"], tuple(paths), analysis,
                                     row["created_at"]))
        return out


    def list_runs(self, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first."""
        return self._runs("", (), limit)

    def resolve_run(self, ref: str) -> str:
        """A full run id, a unique prefix of one, or "latest"/"last" -> the run id."""
        if ref in ("latest", "last"):
            rows = self._query("SELECT id FROM runs ORDER BY started_at DESC, id DESC LIMIT 1")
            if not rows:
                raise UserError(f"no runs in result store {self.path}")
            return str(rows[0][0])
        if not ref:
            raise UserError("no run id given")
        if self._query("SELECT 1 FROM runs WHERE id = ?", (ref,)):
            return ref
        rows = self._query(
            "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY started_at DESC, id DESC",
            (len(ref), ref),
        )
        if not rows:
            raise UserError(f"no run matches {ref!r} in result store {self.path}")
        if len(rows) > 1:
            shown = ", ".join(row[0] for row in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise UserError(f"run {ref!r} is ambiguous: it matches {len(rows)} runs ({shown})")
        return str(rows[0][0])

    def load_run(self, ref: str) -> StoredRun:
        run_id = self.resolve_run(ref)
        (record,) = self._runs("WHERE r.id = ?", (run_id,))
        (row,) = self._query("SELECT data FROM fingerprints WHERE id = ?", (record.fingerprint_id,))
        rows = self._query(
            "SELECT id, record FROM measurements WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return StoredRun(
            record=record,
            fingerprint=json.loads(row["data"]),
            measurements=tuple(self._measurement(r["id"], r["record"]) for r in rows),
        )

    def measurements_for_case(self, case_key: str) -> list[tuple[RunRecord, Measurement]]:
        """Every stored measurement of one case, oldest run first."""
        runs = {
            record.id: record
            for record in self._runs(
                "WHERE r.id IN (SELECT run_id FROM measurements WHERE case_key = ?)", (case_key,)
            )
        }
        rows = self._query(
            "SELECT m.id, m.run_id, m.record FROM measurements m JOIN runs r ON r.id = m.run_id"
            " WHERE m.case_key = ? ORDER BY r.started_at, r.id, m.id",
            (case_key,),
        )
        return [(runs[r["run_id"]], self._measurement(r["id"], r["record"])) for r in rows]

    def _runs(self, where: str, params: Sequence[Any], limit: int | None = None) -> list[RunRecord]:
        sql = _RUNS_QUERY.format(where=where, limit="LIMIT ?" if limit is not None else "")
        rows = self._query(sql, (*params, limit) if limit is not None else params)
        return [_run_record(row) for row in rows]

    def _measurement(self, measurement_id: int, record: str) -> Measurement:
        try:
            return Measurement.from_dict(json.loads(record))
        except StoreError as e:
            raise StoreError(f"result store {self.path}: measurement {measurement_id}: {e}"
                             ) from None
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(
                f"result store {self.path}: cannot read measurement {measurement_id}: {e}"
            ) from None


def _check_file(path: Path, create: bool) -> None:
    """Refuse what SQLite should not even open (what is not a regular file, from its
    stat, as check_regular_file does); create parent directories if asked."""
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
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


def _unused_run_id(conn: sqlite3.Connection, started_at: float) -> str:
    """"20261130-002249-3fa2": UTC start time and 4 random hex digits, free in this store."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started_at))
    for _ in range(1000):
        run_id = f"{stamp}-{secrets.token_hex(2)}"
        if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
            return run_id
    raise StoreError(f"no free run id left for {stamp}")


def _insert_run(conn: sqlite3.Connection, record: RunRecord, fingerprint: dict[str, Any]
                ) -> None:
    """The one place a run (and its fingerprint, once per stack) is written."""
    if record.status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {record.status!r}")
    conn.execute(
        "INSERT OR IGNORE INTO fingerprints (id, generation_key, data, first_seen)"
        " VALUES (?, ?, ?, ?)",
        (record.fingerprint_id, record.generation_key, _dumps(fingerprint), record.started_at),
    )
    conn.execute(
        "INSERT INTO runs (id, started_at, finished_at, status, suite, argv, device,"
        " generation_key, fingerprint_id, host, accelbench_version, format_version)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (record.id, record.started_at, record.finished_at, record.status, record.suite,
         _dumps(list(record.argv)), record.device, record.generation_key,
         record.fingerprint_id, record.host, record.accelbench_version, FORMAT_VERSION),
    )


def _check_fingerprint(conn: sqlite3.Connection, path: Path, fingerprint_id: str,
                       fingerprint: dict[str, Any]) -> None:
    row = conn.execute("SELECT data FROM fingerprints WHERE id = ?", (fingerprint_id,)
                       ).fetchone()
    if row is not None and json.loads(row[0]) != json.loads(_dumps(fingerprint)):
        raise StoreError(f"result store {path} holds fingerprint {fingerprint_id!r} with other "
                         "content than the one imported: refusing to bind the run to it")


def _insert_measurement(conn: sqlite3.Connection, run_id: str, m: Measurement) -> None:
    conn.execute(
        "INSERT INTO measurements (run_id, case_key, status, record) VALUES (?, ?, ?, ?)",
        (run_id, m.case.key, m.status, _dumps(m.to_dict())),
    )


def _run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        status=row["status"],
        suite=row["suite"],
        argv=tuple(json.loads(row["argv"])),
        device=row["device"],
        generation_key=row["generation_key"],
        host=row["host"],
        accelbench_version=row["accelbench_version"],
        fingerprint_id=row["fingerprint_id"],
        n_ok=row["n_ok"],
        n_failed=row["n_failed"],
        n_skipped=row["n_skipped"],
    )


def _dumps(value: Any) -> str:
    # default=str: an odd value in `details` must not cost the measurement.
    return json.dumps(value, default=str)
