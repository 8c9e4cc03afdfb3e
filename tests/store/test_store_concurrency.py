"""Several processes writing one store at once (on both back-ends), and a writer that dies
mid-run."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.store import Store
from accelbench.store.postgres import PostgresBackend
from fakes import stored_measurement

pytestmark = pytest.mark.slow

WRITERS = 6
RUNS_PER_WRITER = 3
PER_WRITER = 25


def _measurement(writer: int, i: int) -> Measurement:
    case = Case.make("gemm", "v1", "micro", {"shape": 256 * (i + 1), "writer": writer}, "cpu")
    measurement: Measurement = stored_measurement(
        case, "ok", samples=(1e-3 + i * 1e-6, 1.1e-3), number=3,
        figures=(Figure("time", 1e-3, "s", higher_is_better=False),))
    return measurement


def _begin(store: Store, writer: int) -> str:
    return store.begin_run(
        fingerprint={"writer": writer}, fingerprint_id=f"fp-{writer}", generation_key="cpu",
        device="cpu", suite=None, argv=["run"], host=f"host-{writer}",
        accelbench_version="0.1.0", started_at=1_750_000_000.0,
    )


def _write_runs(location: str, writer: int, barrier) -> None:
    barrier.wait()
    with Store.open(location) as store:  # every writer opens (and migrates) a new store
        for _ in range(RUNS_PER_WRITER):
            run_id = _begin(store, writer)  # all in the same second: ids may clash
            for i in range(PER_WRITER):
                store.add_measurement(run_id, _measurement(writer, i))
            store.finish_run(run_id, "complete")


def _write_then_die(path: str, committed) -> None:
    store = Store.open(path)
    run_id = _begin(store, 0)
    for i in range(3):
        store.add_measurement(run_id, _measurement(0, i))
    committed.set()
    os._exit(1)  # no close, no finish_run: as if the process were killed


def test_concurrent_writers_on_a_new_store(store_location: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_write_runs, args=(store_location, w, barrier))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * WRITERS

    with Store.open(store_location, create=False) as store:
        runs = store.list_runs()
        assert len({r.id for r in runs}) == len(runs) == WRITERS * RUNS_PER_WRITER
        assert all(r.status == "complete" and r.n_ok == PER_WRITER for r in runs)
        loaded = [store.load_run(r.id) for r in runs]
    writers = sorted(run.fingerprint["writer"] for run in loaded)
    assert writers == sorted(list(range(WRITERS)) * RUNS_PER_WRITER)
    for run in loaded:
        writer = run.fingerprint["writer"]
        assert run.record.host == f"host-{writer}"
        assert run.measurements == tuple(_measurement(writer, i) for i in range(PER_WRITER))


def test_a_crashed_writer_keeps_what_it_committed(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    ctx = multiprocessing.get_context("spawn")
    committed = ctx.Event()
    proc = ctx.Process(target=_write_then_die, args=(str(path), committed))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 1 and committed.is_set()

    with Store.open(path, create=False) as store:
        run = store.load_run("latest")
    assert run.record.status == "running" and run.record.finished_at is None
    assert run.measurements == tuple(_measurement(0, i) for i in range(3))


def test_the_inspection_reads_one_snapshot(pg_url: str, monkeypatch) -> None:
    """What opening a store reads (its tables, its mark, its migrations) comes from one
    moment: a migration another writer commits between those reads is seen whole or not
    at all, never as a record without its tables (which looked like a damaged store)."""
    import psycopg

    from postgres import sql

    with Store.open(pg_url) as store:
        backend = store._backend
        assert isinstance(backend, PostgresBackend)
        real_execute = psycopg.Cursor.execute
        committed: list[str] = []

        def execute(cursor, query, *args, **kwargs):
            result = real_execute(cursor, query, *args, **kwargs)
            if cursor.connection is backend._conn and "relname" in str(query) and not committed:
                # Another writer commits its next migration now, after the table list.
                sql(pg_url, "INSERT INTO migrations (name, applied_at) VALUES (?, 0)",
                    ("999_from_elsewhere",))
                committed.append("999_from_elsewhere")
            return result

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        seen = backend.inspect()
        monkeypatch.undo()
        assert committed
        assert "999_from_elsewhere" not in seen.applied
        assert "999_from_elsewhere" in backend.inspect().applied
