"""The PostgreSQL back-end of the store: one database shared by a fleet (psycopg 3).

The driver is imported only when such a store is opened (`pip install
'accelbench[postgres]'`). Each write is one transaction; what many nodes write at once
is kept apart by the database (run ids and fingerprints are inserted with ON CONFLICT
DO NOTHING, so a clash is seen and never fails a transaction), and processes that open
a new store at once apply its migrations one at a time, under a transaction-level
advisory lock. A store that is only read is opened with read-only transactions.

The connection's failures are told apart for the exit code: a server that cannot be
reached (StoreUnreachable), credentials it refuses (StoreAuthFailed), a database that
does not exist (StoreError, as a store file that does not exist). libpq gives no
SQLSTATE for a connection that failed, so they are told by libpq's and the server's
words. A password in the URL never reaches a message.

Nothing waits forever on a server that stops answering: connecting has a deadline
(libpq's connect_timeout, 10 s unless the URL gives one; 0, "wait forever", is refused
when the URL is parsed), and so has every statement. A frozen server (SIGSTOP, a paused
VM) or a partition in mid-statement is not seen by TCP keepalives, for the server's
kernel still acknowledges what is sent; so each statement runs under a client-side
deadline ($ACCELBENCH_STORE_TIMEOUT seconds, 60 by default) that cuts the connection
when it passes, and the server is told the same deadline (statement_timeout,
idle_in_transaction_session_timeout) so that a client that froze holding a lock does
not hold it for ever either. A cut connection is StoreUnreachable (exit 5).

Where the URL's own `options` set one of these server deadlines (`-c
statement_timeout=1`), the URL's is kept, and the server cancelling a statement at it
is told as that (StoreError, exit 3), not as accelbench's deadline or an unreachable
server; so is a statement that another session cancelled.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from accelbench.errors import StoreAuthFailed, StoreError, StoreUnreachable, UserError
from accelbench.store import ddl
from accelbench.store.backend import Inspection, Result, Row, Transaction
from accelbench.store.location import StoreLocation

__all__ = ["PostgresBackend", "open_postgres"]

CONNECT_TIMEOUT_S = 10  # unless the URL says connect_timeout=
TIMEOUT_ENV = "ACCELBENCH_STORE_TIMEOUT"  # seconds one statement may take
STATEMENT_TIMEOUT_S = 60.0
# TCP keepalives and the time sent data may stay unacknowledged, unless the URL says:
# what finds a peer that went away (a cable, a crashed host) between statements.
_TCP_DEFAULTS = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10",
                 "keepalives_count": "3", "tcp_user_timeout": "30000"}
# The server's deadlines that accelbench sets unless the URL's options do, and the
# SQLSTATE of the server's ending a statement (query_canceled) or a session at one.
_SERVER_DEADLINES = {"statement_timeout": "57014",
                     "idle_in_transaction_session_timeout": "25P03"}
_ROWS_PER_BATCH = 1000  # executemany in batches, each under its own deadline
_MIGRATION_LOCK = ddl.APPLICATION_ID  # the advisory lock key of migrations

_AUTH_REFUSED = re.compile(
    r"password authentication failed|no password supplied|authentication failed"
    r"|pg_hba\.conf|role \".*\" does not exist|permission denied for database"
    r"|password is required|SCRAM|certificate",
    re.IGNORECASE,
)
_NO_DATABASE = re.compile(r"database \".*\" does not exist", re.IGNORECASE)

_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""
_MARK = """
SELECT d.description FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_description d
       ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
WHERE n.nspname = current_schema() AND c.relname = 'migrations'
"""


def open_postgres(location: StoreLocation, *, create: bool) -> PostgresBackend:
    """The store in the database `location` names, on a new connection: read-only
    transactions unless `create`."""
    timeout_s = statement_timeout()
    params, url_deadlines = connection_params(location, timeout_s)
    backend = PostgresBackend(location, _connect(location, params), read_only=not create,
                              timeout_s=timeout_s, url_deadlines=url_deadlines)
    if not create:
        backend.set_read_only()
    return backend


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError("a result store on PostgreSQL needs the psycopg driver: "
                         "pip install 'accelbench[postgres]'") from None
    return psycopg


class _Row:
    """A row by column name or position, as sqlite3.Row reads."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        return self._values[self._index[key] if isinstance(key, str) else key]


def _row_factory(cursor: Any) -> Any:
    index = {column.name: i for i, column in enumerate(cursor.description or ())}
    return lambda values: _Row(values, index)


def _placeholders(sql: str) -> str:
    """`?` placeholders as psycopg's `%s` (and a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def statement_timeout() -> float:
    """$ACCELBENCH_STORE_TIMEOUT (seconds), else STATEMENT_TIMEOUT_S."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return STATEMENT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise UserError(f"{TIMEOUT_ENV}={text!r}: expected a number of seconds above 0")
    return value


def connection_params(location: StoreLocation,
                      timeout_s: float) -> tuple[dict[str, Any], dict[str, str]]:
    """libpq's parameters to connect with (the URL's, with accelbench's defaults and
    deadlines where it gives none), and the server deadlines the URL's options set."""
    psycopg = _driver()
    from psycopg.conninfo import conninfo_to_dict

    assert location.postgres is not None
    try:
        # libpq's own reading of the URL, the one it connects with.
        params: dict[str, Any] = conninfo_to_dict(location.postgres.conninfo.reveal())
    except psycopg.ProgrammingError as e:
        raise UserError(f"store {location}: {_words(location, e)}") from None
    params.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    params.setdefault("application_name", "accelbench")
    for name, value in _TCP_DEFAULTS.items():
        params.setdefault(name, value)
    server_ms = int(timeout_s * 1000)
    options = params.get("options", "")
    given = option_settings(options)
    for setting in _SERVER_DEADLINES:
        if setting not in given:
            options = f"{options} -c {setting}={server_ms}".strip()
    params["options"] = options
    return params, {name: given[name] for name in _SERVER_DEADLINES if name in given}


def option_settings(options: str) -> dict[str, str]:
    """The server settings libpq's `options` text sets, as the server reads it: words
    split at spaces that no backslash escapes; `-c name=value`, `-cname=value` or
    `--name=value`, a '-' in a name read as '_', names in any case; the last one wins."""
    words: list[str] = []
    word: list[str] = []
    escaped = False
    for char in options + " ":
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char.isspace():
            if word:
                words.append("".join(word))
                word = []
        else:
            word.append(char)
    settings: dict[str, str] = {}
    i = 0
    while i < len(words):
        item = None
        if words[i] == "-c" and i + 1 < len(words):
            item = words[i + 1]
            i += 1
        elif words[i].startswith(("-c", "--")):
            item = words[i][2:]
        i += 1
        if item is not None:
            name, sep, value = item.partition("=")
            if sep:
                settings[name.replace("-", "_").lower()] = value
    return settings


def _connect(location: StoreLocation, params: dict[str, Any]) -> Any:
    psycopg = _driver()
    try:
        return psycopg.connect(autocommit=True, row_factory=_row_factory, **params)
    except psycopg.Error as e:
        raise _connect_error(location, e) from None


class _Deadline:
    """A watch on one connection: while armed, it cuts the connection (shuts its socket
    down, so that the call waiting on it returns with an error) once `seconds` pass
    without a `renew`. One thread per connection, started at the first use.

    Arming, renewing and disarming only set the time due, and wake no thread: the watch
    never sleeps longer than `seconds`, so it wakes before any time newly set is due
    and looks again (a wake-up per statement cost a write on PostgreSQL about a tenth of
    its time; bench/store_deadline_overhead.py)."""

    def __init__(self, conn: Any, seconds: float) -> None:
        self._conn = conn
        self.seconds = seconds
        self.expired = False
        self._due: float | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Deadline:
        self.renew()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._due = None

    def renew(self) -> None:
        with self._cond:
            self._due = time.monotonic() + self.seconds
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="accelbench-store-deadline")
                self._thread.start()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                if self._due is not None and now >= self._due:
                    self._due = None
                    self.expired = True
                    self._cut()
                    continue
                left = self.seconds if self._due is None else self._due - now
                self._cond.wait(min(left, self.seconds))

    def _cut(self) -> None:
        try:
            fd = self._conn.pgconn.socket
        except Exception:  # closed meanwhile: nothing waits on it
            return
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _connect_error(location: StoreLocation, e: Exception) -> StoreError:
    words = _words(location, e)
    if _NO_DATABASE.search(words):
        return StoreError(f"no result store at {location}: {words}; create the database "
                          "first (createdb), owned by the role that writes")
    if _AUTH_REFUSED.search(words):
        return StoreAuthFailed(f"result store {location} refused the credentials: {words}")
    return StoreUnreachable(f"cannot reach result store {location}: {words}")


def _words(location: StoreLocation, e: Exception) -> str:
    """A driver's message as one line, without the password and without the SQL that
    PostgreSQL quotes back."""
    diag = getattr(e, "diag", None)
    text = (getattr(diag, "message_primary", None) if diag is not None else None) or str(e)
    text = text.removeprefix("connection failed: ")
    text = " ".join(part.strip() for part in text.splitlines() if part.strip())
    text = re.sub(r"\s+", " ", text.replace("FATAL:", "")).strip()
    return location.scrub(text) or type(e).__name__


def server_cancelled(location: StoreLocation, e: Exception, timeout_s: float,
                     url_deadlines: dict[str, str]) -> StoreError | None:
    """What the server's ending a statement means, None where it did not end one: the
    deadline accelbench gave it passed (the server is too slow or held: exit 5), one the
    URL's options set passed (exit 3: the URL asked for it), or a statement another
    session cancelled (exit 3)."""
    sqlstate = getattr(e, "sqlstate", None)
    if sqlstate not in _SERVER_DEADLINES.values():
        return None
    words = _words(location, e)
    if sqlstate == "57014" and "statement timeout" not in words.lower():
        return StoreError(f"result store {location}: the server cancelled a statement "
                          f"({words}): another session or an administrator cancelled it")
    setting = next(name for name, code in _SERVER_DEADLINES.items() if code == sqlstate)
    if setting in url_deadlines:
        value = location.scrub(url_deadlines[setting])
        return StoreError(f"result store {location}: the server cancelled a statement at "
                          f"{setting}={value}, which the URL's options set ({words}); "
                          f"raise it, or leave it out for accelbench's deadline of "
                          f"{timeout_s:g} s ({TIMEOUT_ENV})")
    return StoreUnreachable(f"result store {location} did not finish a statement within "
                            f"{timeout_s:g} s ({TIMEOUT_ENV}): {words}")


class _Tx:
    def __init__(self, conn: Any, deadline: _Deadline) -> None:
        self._conn = conn
        self._deadline = deadline

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        self._deadline.renew()
        if not params:  # no placeholders: the statement as written (a % or ? is literal)
            return self._conn.execute(sql)  # type: ignore[no-any-return]
        return self._conn.execute(_placeholders(sql), params)  # type: ignore[no-any-return]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        for start in range(0, len(rows), _ROWS_PER_BATCH):
            self._deadline.renew()
            self._conn.cursor().executemany(_placeholders(sql),
                                            rows[start:start + _ROWS_PER_BATCH])
        self._deadline.renew()  # the commit that follows has its own


class PostgresBackend:
    @property
    def foreign_reason(self) -> str:
        return "the database holds the tables of another application"

    def __init__(self, location: StoreLocation, conn: Any, *, read_only: bool,
                 timeout_s: float = STATEMENT_TIMEOUT_S,
                 url_deadlines: dict[str, str] | None = None) -> None:
        self.location = location
        self._conn = conn
        self.read_only = read_only
        self._timeout_s = timeout_s
        self._url_deadlines = dict(url_deadlines or {})
        self._watch = _Deadline(conn, timeout_s)  # every statement's deadline

    def set_read_only(self) -> None:
        """Every transaction of this connection read-only; closes it on failure."""
        psycopg = _driver()
        try:
            with self._watch:
                self._conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as e:
            error = self._error("open", e)
            self.close()
            raise error from None

    @property
    def migrations(self) -> Sequence[tuple[str, Sequence[ddl.Step]]]:
        return ddl.POSTGRES_MIGRATIONS

    def close(self) -> None:
        self._watch.close()
        self._conn.close()

    def _error(self, doing: str, e: Exception) -> StoreError:
        words = _words(self.location, e)
        if self._watch.expired:
            return StoreUnreachable(f"result store {self.location} did not answer within "
                                    f"{self._timeout_s:g} s ({TIMEOUT_ENV}): the server "
                                    "froze or the network to it is cut")
        cancelled = server_cancelled(self.location, e, self._timeout_s, self._url_deadlines)
        if cancelled is not None:
            return cancelled
        if getattr(self._conn, "broken", False) or self._conn.closed:
            return StoreUnreachable(f"lost the connection to result store {self.location}: "
                                    f"{words}")
        if getattr(e, "sqlstate", None) == "42501":  # insufficient_privilege
            return StoreError(f"cannot {doing} result store {self.location}: {words} (the "
                              "role needs to own the database, or CREATE on its schema)")
        return StoreError(f"cannot {doing} result store {self.location}: {words}")

    def inspect(self) -> Inspection:
        psycopg = _driver()
        try:
            with self._watch, self._conn.transaction():
                cur = self._conn.cursor()
                # One snapshot for all three reads: under the default READ COMMITTED each
                # statement sees its own, so a migration committed between them would
                # show its record without its tables, and the store would look damaged.
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                tables = frozenset(row[0] for row in cur.execute(_TABLES).fetchall())
                marks = cur.execute(_MARK).fetchall()
                mark = ("none" if not marks else
                        "ours" if marks[0][0] == ddl.POSTGRES_MARK else "foreign")
                applied = (frozenset(row[0] for row in
                                     cur.execute("SELECT name FROM migrations").fetchall())
                           if mark == "ours" else frozenset())
        except psycopg.Error as e:
            raise self._error("read", e) from None
        return Inspection(tables, mark, applied)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        psycopg = _driver()
        try:
            with self._watch:
                return list(self._conn.execute(_placeholders(sql) if params else sql, params
                                               or None).fetchall())
        except psycopg.Error as e:
            raise self._error("read", e) from None

    @contextmanager
    def write(self) -> Iterator[_Tx]:
        psycopg = _driver()
        try:
            with self._watch, self._conn.transaction():
                yield _Tx(self._conn, self._watch)
        except psycopg.Error as e:
            raise self._error("write", e) from None

    @contextmanager
    def migration_transaction(self) -> Iterator[_Tx]:
        with self.write() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            yield tx

    def mark_migrated(self, tx: Transaction, applied: int) -> None:
        del applied  # the migrations table itself counts them
        tx.execute(f"COMMENT ON TABLE migrations IS '{ddl.POSTGRES_MARK}'")

    def prepare_for_writes(self) -> None:
        pass

    def can_upgrade_in_place(self) -> bool:
        return True  # as far as the role may: a refusal is reported when it is tried

    def reopened(self, *, writable: bool) -> PostgresBackend:
        return open_postgres(self.location, create=writable)

    def copy_for_reading(self) -> PostgresBackend:
        self.close()
        raise StoreError(f"result store {self.location} was written by an older accelbench "
                         "and is not upgraded here: open it once with a command that reads "
                         "it (accelbench runs --store URL) to upgrade it")
