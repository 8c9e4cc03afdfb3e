"""The seam between `Store` and the database it is kept in (SQLite or PostgreSQL).

`Store` writes every query once, with `?` placeholders and SQL that both databases
read alike; a back-end opens the connection, runs queries and write transactions
(translating the placeholders where its driver wants others), reads whether the
database is an accelbench store at all, holds the named migrations in its own words
and marks a database as migrated. Nothing above this seam knows which one it talks to.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from accelbench.store import ddl
from accelbench.store.location import StoreLocation


class Row(Protocol):
    """One result row: by column name or by position."""

    def __getitem__(self, key: int | str, /) -> Any: ...


class Result(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Transaction(Protocol):
    """What a write transaction offers: `?` placeholders, as everywhere above the seam."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


@dataclass(frozen=True)
class Inspection:
    """What a database holds before it is trusted: its tables (and views), whether it is
    marked as an accelbench store ("ours"), unmarked ("none") or marked by another
    application ("foreign"), and the migrations recorded in it."""

    tables: frozenset[str]
    mark: str
    applied: frozenset[str]


class Backend(Protocol):
    location: StoreLocation
    read_only: bool

    @property
    def migrations(self) -> Sequence[tuple[str, Sequence[ddl.Step]]]:
        """The named migrations, in this database's words."""
        ...

    @property
    def foreign_reason(self) -> str:
        """Why a database of another application is no store."""
        ...

    def inspect(self) -> Inspection:
        """The database's tables, mark and applied migrations, read in one snapshot;
        writes nothing."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    def write(self) -> AbstractContextManager[Transaction]:
        """One write transaction, committed on exit, rolled back on any exception."""
        ...

    def migration_transaction(self) -> AbstractContextManager[Transaction]:
        """A write transaction that holds the store's migration lock, so that processes
        opening a new store at once apply each migration exactly once."""
        ...

    def mark_migrated(self, tx: Transaction, applied: int) -> None:
        """Mark the database as an accelbench store with `applied` migrations."""
        ...

    def prepare_for_writes(self) -> None: ...

    def can_upgrade_in_place(self) -> bool: ...

    def reopened(self, *, writable: bool) -> Backend:
        """A new connection to the same store (this one stays open)."""
        ...

    def copy_for_reading(self) -> Backend:
        """A writable copy of the store, to be upgraded and read where the store itself
        cannot be written (raises StoreError where no copy can be made); closes this."""
        ...

    def close(self) -> None: ...
