"""A real PostgreSQL server for the store's tests, and one store location on each back-end.

`pg_cluster` (session) starts a throwaway cluster (bench/_pgcluster.py) and stops it at
the end; `pg_url` is a fresh database on it for one test; `store_location` is the one
fixture the store's suite runs on, once with a SQLite file and once with a PostgreSQL
database. Where the server binaries are missing the PostgreSQL cases skip, except in CI
(CI=true), where they fail: CI can never pass without running them.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import _pgcluster

_databases = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[_pgcluster.Cluster]:
    bindir = _pgcluster.bin_dir()
    if bindir is None:
        message = ("no PostgreSQL server binaries (initdb, pg_ctl, postgres): install "
                   "Debian's postgresql")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    cluster = _pgcluster.start(bindir)
    try:
        yield cluster
    finally:
        cluster.stop()


def new_database(cluster: _pgcluster.Cluster, owner: str = _pgcluster.TRUST_ROLE) -> str:
    return cluster.create_database(f"t{os.getpid()}_{next(_databases)}", owner=owner)


@pytest.fixture
def pg_url(pg_cluster: _pgcluster.Cluster) -> str:
    """A URL of a new, empty database, owned by the role the URL logs in as."""
    return pg_cluster.url(new_database(pg_cluster))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a new store goes: a file in a new folder, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "nested" / "dir" / "results.sqlite")
    return str(request.getfixturevalue("pg_url"))


def is_postgres(location: str) -> bool:
    return location.startswith("postgresql://")


def sql(location: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the store's database directly (committed); its rows."""
    if is_postgres(location):
        import psycopg

        with psycopg.connect(location, autocommit=True) as pg_conn:
            cur = pg_conn.execute(statement.replace("?", "%s"), params or None)
            return [tuple(row) for row in cur.fetchall()] if cur.description else []
    conn = sqlite3.connect(location)
    try:
        rows = conn.execute(statement, params).fetchall()
        conn.commit()
        return rows
    finally:
        conn.close()


def tables(location: str) -> list[str]:
    if is_postgres(location):
        rows = sql(location, "SELECT relname FROM pg_class c JOIN pg_namespace n"
                   " ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
                   " AND relkind IN ('r', 'v') ORDER BY relname")
    else:
        rows = sql(location, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                   " ORDER BY name")
    return [row[0] for row in rows]


def snapshot(location: str) -> Any:
    """All a store holds, to tell that something left it untouched: the file's bytes and
    time, or every table's rows and comment in the database."""
    if not is_postgres(location):
        path = Path(location)
        return path.read_bytes(), path.stat().st_mtime_ns
    state = []
    for name in tables(location):
        rows = sql(location, f'SELECT * FROM "{name}"')
        comment = sql(location, "SELECT obj_description(?::regclass, 'pg_class')",
                      (f'"{name}"',))
        state.append((name, sorted(map(repr, rows)), comment))
    return state
