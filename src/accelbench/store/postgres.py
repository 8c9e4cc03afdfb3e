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
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from accelbench.errors import StoreAuthFailed, StoreError, StoreUnreachable, UserError
from accelbench.store import schema
from accelbench.store.backend import Inspection, Result, Row, Transaction
from accelbench.store.location import StoreLocation

__all__ = ["PostgresBackend", "open_postgres"]

CONNECT_TIMEOUT_S = 10  # unless the URL says connect_timeout=
_MIGRATION_LOCK = schema.APPLICATION_ID  # the advisory lock key of migrations

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
    return PostgresBackend(location, _connect(location, read_only=not create),
                           read_only=not create)


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


def _connect(location: StoreLocation, *, read_only: bool) -> Any:
    psycopg = _driver()
    from psycopg.conninfo import conninfo_to_dict

    url = location.url or ""
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError as e:
        raise UserError(f"store {location}: {_words(location, e)}") from None
    extra: dict[str, Any] = {}
    if "connect_timeout" not in given:
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    if "application_name" not in given:
        extra["application_name"] = "accelbench"
    try:
        conn = psycopg.connect(url, autocommit=True, row_factory=_row_factory, **extra)
    except psycopg.Error as e:
        raise _connect_error(location, e) from None
    try:
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
    except psycopg.Error as e:
        conn.close()
        raise StoreError(f"cannot open result store {location}: {_words(location, e)}"
                         ) from None
    return conn


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


class _Tx:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        if not params:  # no placeholders: the statement as written (a % or ? is literal)
            return self._conn.execute(sql)  # type: ignore[no-any-return]
        return self._conn.execute(_placeholders(sql), params)  # type: ignore[no-any-return]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._conn.cursor().executemany(_placeholders(sql), rows)


class PostgresBackend:
    @property
    def foreign_reason(self) -> str:
        return "the database holds the tables of another application"

    def __init__(self, location: StoreLocation, conn: Any, *, read_only: bool) -> None:
        self.location = location
        self._conn = conn
        self.read_only = read_only

    @property
    def migrations(self) -> Sequence[tuple[str, Sequence[str]]]:
        return schema.POSTGRES_MIGRATIONS

    def close(self) -> None:
        self._conn.close()

    def _error(self, doing: str, e: Exception) -> StoreError:
        words = _words(self.location, e)
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
            with self._conn.transaction():  # one snapshot
                cur = self._conn.cursor()
                tables = frozenset(row[0] for row in cur.execute(_TABLES).fetchall())
                marks = cur.execute(_MARK).fetchall()
                mark = ("none" if not marks else
                        "ours" if marks[0][0] == schema.POSTGRES_MARK else "foreign")
                applied = (frozenset(row[0] for row in
                                     cur.execute("SELECT name FROM migrations").fetchall())
                           if mark == "ours" else frozenset())
        except psycopg.Error as e:
            raise self._error("read", e) from None
        return Inspection(tables, mark, applied)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        psycopg = _driver()
        try:
            return list(self._conn.execute(_placeholders(sql) if params else sql, params
                                           or None).fetchall())
        except psycopg.Error as e:
            raise self._error("read", e) from None

    @contextmanager
    def write(self) -> Iterator[_Tx]:
        psycopg = _driver()
        try:
            with self._conn.transaction():
                yield _Tx(self._conn)
        except psycopg.Error as e:
            raise self._error("write", e) from None

    @contextmanager
    def migration_transaction(self) -> Iterator[_Tx]:
        with self.write() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            yield tx

    def mark_migrated(self, tx: Transaction, applied: int) -> None:
        del applied  # the migrations table itself counts them
        tx.execute(f"COMMENT ON TABLE migrations IS '{schema.POSTGRES_MARK}'")

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
