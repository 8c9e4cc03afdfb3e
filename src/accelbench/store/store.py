"""The result store: every run, its stack fingerprint and its raw measurements.

One interface, two back-ends (`store.backend`): a SQLite file, the embedded default, and
a PostgreSQL database shared by a fleet. Each case is stored as it finishes, one short
transaction per measurement, so several processes (or nodes) may write at once, and a
writer that dies loses only what it had not committed: its run stays "running".
Opening checks that the database is an accelbench store this version understands
before anything is written to it.

Reading (`Store.open(location, create=False)`, what every read command does) never
creates or changes a store, with one exception: a store written by an older accelbench
is upgraded, losslessly and one transaction per migration, when it can be written; a
SQLite file that cannot is read from an upgraded copy in memory.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
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
from accelbench.store import ddl
from accelbench.store import gpus as gpu_table
from accelbench.store.backend import Backend, Row, Transaction
from accelbench.store.location import (
    POSTGRESQL,
    StoreLocation,
    default_store_location,
    parse_location,
    redact_argv,
    redact_request,
)
from accelbench.store.records import (
    ResumeEvent,
    RunRecord,
    StoredExplanation,
    StoredProfile,
    StoredRun,
)

__all__ = [
    "RUN_COMPLETE", "RUN_FAILED", "RUN_INTERRUPTED", "RUN_RUNNING", "RUN_STATUSES",
    "RunRecord", "Store", "StoredProfile", "StoredRun", "default_store_path",
]


def default_store_path() -> Path:
    """$ACCELBENCH_STORE if set, else results.sqlite in the user's data directory (as a
    path: see store.location.default_store_location for a store that may be a URL)."""
    env = os.environ.get("ACCELBENCH_STORE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_path

    return user_data_path("accelbench", appauthor=False) / "results.sqlite"


# A measurement that is its run's result for its case: no later one of the same case in
# the same run (a resume measures again the cases that failed or were cut short, and
# keeps the earlier measurement: `StoredRun.superseded`).
_NEWEST = ("NOT EXISTS (SELECT 1 FROM measurements later WHERE later.run_id = m.run_id"
           " AND later.case_key = m.case_key AND later.id > m.id)")

# Counts by status of the cases' newest measurements, written so that SQLite and
# PostgreSQL read it alike.
_RUNS_QUERY = """
SELECT r.*,
       COALESCE(SUM(CASE WHEN m.status = 'ok' THEN 1 ELSE 0 END), 0) AS n_ok,
       COALESCE(SUM(CASE WHEN m.status = 'failed' THEN 1 ELSE 0 END), 0) AS n_failed,
       COALESCE(SUM(CASE WHEN m.status = 'skipped' THEN 1 ELSE 0 END), 0) AS n_skipped
FROM runs r LEFT JOIN measurements m ON m.run_id = r.id AND """ + _NEWEST + """
{where}
GROUP BY r.id
ORDER BY r.started_at DESC, r.id DESC
{limit}
"""


def _open_backend(location: StoreLocation, create: bool) -> Backend:
    if location.kind == POSTGRESQL:
        from accelbench.store.postgres import open_postgres

        return open_postgres(location, create=create)
    from accelbench.store.sqlite import open_sqlite

    assert location.path is not None
    return open_sqlite(location.path, create=create)


class Store:
    """An open result store. Use `Store.open(location)`, as a context manager."""

    def __init__(self, backend: Backend, read_only: bool = False) -> None:
        self._backend = backend
        self.location: StoreLocation = backend.location
        self.read_only = read_only
        self._pending: list[str] = []  # migrations this (read-only) store lacks

    @property
    def name(self) -> str:
        """The store as messages name it: its path, or its URL without the password."""
        return str(self.location)

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, location: str | os.PathLike[str] | StoreLocation | None = None, *,
             create: bool = True, upgrade_in_place: bool = True) -> Store:
        """Open (and with `create`, create) the store at `location`: a path (SQLite), a
        postgresql:// URL, or by default default_store_location().

        Without `create` the store is only read: opened read-only, and refused when it is
        missing or empty; one of an older accelbench is upgraded in place when it can be
        written and `upgrade_in_place` (the user's own store), else (a SQLite file) in a
        copy in memory (a store merged from elsewhere is never changed). Raises
        StoreError, leaving the store as it was, when it is missing (and `create` is
        false), not a regular file, unreadable, not a database, another application's
        database or written by a newer accelbench; StoreUnreachable and StoreAuthFailed
        when its database server cannot be reached or refuses the credentials.
        """
        if location is None:
            location = default_store_location()
        elif not isinstance(location, StoreLocation):
            location = parse_location(location)
        backend = _open_backend(location, create)
        store = cls._opened(backend, migrate=create)
        return store._upgraded(upgrade_in_place) if store._pending else store

    def _upgraded(self, in_place: bool) -> Store:
        """This store, written by an older accelbench, brought to the schema that reading
        it needs; closes this one.

        The one write that reading does: in place when asked and the store can be
        written (every migration keeps every record, and runs in its own transaction);
        else in a copy, so that a store on read-only media, of another user or merged
        from elsewhere can be read.
        """
        backend = self._backend
        if not (in_place and backend.can_upgrade_in_place()):
            return self._opened(backend.copy_for_reading(), migrate=True, read_only=True)
        try:
            writer = backend.reopened(writable=True)
        finally:
            self.close()
        self._opened(writer, migrate=True).close()
        reader = writer.reopened(writable=False)
        return self._opened(reader, migrate=False)

    @classmethod
    def _opened(cls, backend: Backend, *, migrate: bool, read_only: bool = False) -> Store:
        """The store on an open back-end, checked (and with `migrate`, brought up to
        date); the back-end is closed if that fails."""
        store = cls(backend, read_only=not migrate)
        try:
            applied = store._applied_migrations()
            if migrate:
                store._migrate(applied)
            else:
                store._pending = [name for name, _ in backend.migrations if name not in applied]
        except BaseException:
            backend.close()
            raise
        store.read_only = store.read_only or read_only
        return store

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _applied_migrations(self) -> set[str]:
        """Read-only checks that this is our store and not from a newer accelbench."""
        seen = self._backend.inspect()
        if seen.mark == "foreign" or (seen.mark == "none" and seen.tables):
            raise StoreError(f"{self.name} is not an accelbench result store: "
                             f"{self._backend.foreign_reason}")
        if not seen.tables and self.read_only:
            raise StoreError(f"{self.name} is empty: not a result store")
        self._refuse_unknown(seen.applied)
        missing = sorted(ddl.TABLES - seen.tables)
        if seen.applied >= {name for name, _ in self._backend.migrations} and missing:
            raise StoreError(f"result store {self.name} is damaged: it has no "
                             f"{', '.join(missing)} table: restore it "
                             "from a copy")
        return set(seen.applied)

    def _refuse_unknown(self, applied: set[str] | frozenset[str]) -> None:
        unknown = sorted(applied - {name for name, _ in self._backend.migrations})
        if unknown:
            raise StoreError(
                f"result store {self.name} was written by a newer accelbench "
                f"(unknown schema migrations: {', '.join(unknown)}); upgrade accelbench to use it"
            )

    def _migrate(self, applied: set[str]) -> None:
        migrations = self._backend.migrations
        pending = [(name, sql) for name, sql in migrations if name not in applied]
        if not pending:
            return
        self._backend.prepare_for_writes()
        for name, statements in pending:
            # Checked again under the migration lock: another process may have applied it.
            with self._backend.migration_transaction() as tx:
                tx.execute(ddl.MIGRATIONS_TABLE)
                recorded = {row[0] for row in tx.execute("SELECT name FROM migrations")
                            .fetchall()}
                self._refuse_unknown(recorded)
                if name in recorded:
                    continue
                for step in statements:
                    if callable(step):
                        step(tx)
                    else:
                        tx.execute(step)
                tx.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                           (name, time.time()))
                self._backend.mark_migrated(tx, len(recorded) + 1)

    # -- transactions ----------------------------------------------------------------

    def _write(self) -> Any:
        """One write transaction, committed on exit (rolled back on any exception)."""
        if self.read_only:  # and what a copy in memory took would be lost
            raise StoreError(f"result store {self.name} is open for reading only")
        return self._backend.write()

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._backend.query(sql, params)

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
        request: Mapping[str, Any] | None = None,
    ) -> str:
        """Record a new run in status "running" and return its id; `request` is what it
        was asked for (core.request.RunRequest.to_dict())."""
        started_at = time.time() if started_at is None else started_at
        with self._write() as tx:
            # A run id another writer took meanwhile (many nodes start in the same
            # second) is not inserted: choose again.
            for _ in range(_ID_ATTEMPTS):
                run_id = _unused_run_id(tx, started_at)
                record = RunRecord(
                    id=run_id, started_at=started_at, finished_at=None, status=RUN_RUNNING,
                    suite=suite, argv=tuple(argv), device=device,
                    generation_key=generation_key, host=host,
                    accelbench_version=accelbench_version, fingerprint_id=fingerprint_id,
                    n_ok=0, n_failed=0, n_skipped=0, request=request,
                )
                if _insert_run(tx, record, fingerprint):
                    return run_id
        raise StoreError(f"no free run id found in result store {self.name}")

    def add_measurement(self, run_id: str, m: Measurement) -> None:
        """Store one measurement, committed before this returns."""
        with self._write() as tx:
            _insert_measurement(tx, run_id, m)

    def resume_run(self, run_id: str, *, fingerprint_id: str,
                   resumed_at: float | None = None) -> ResumeEvent:
        """Note that `run_id` is being resumed on the stack `fingerprint_id` (which must be
        the run's own) and set it "running" again, in one transaction; the run's
        measurements are left as they are. Returns the event recorded."""
        resumed_at = time.time() if resumed_at is None else resumed_at
        with self._write() as tx:
            row = tx.execute("SELECT status, fingerprint_id FROM runs WHERE id = ?",
                             (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"no run {run_id} in result store {self.name}")
            if row[1] != fingerprint_id:
                raise StoreError(f"run {run_id} was measured on stack {row[1]}, not "
                                 f"{fingerprint_id}: it cannot be resumed on this one")
            event = ResumeEvent(resumed_at, fingerprint_id, row[0])
            _insert_resumes(tx, run_id, [event])
            tx.execute("UPDATE runs SET status = ?, finished_at = NULL WHERE id = ?",
                       (RUN_RUNNING, run_id))
        return event

    def hold_run(self, run_id: str) -> AbstractContextManager[None]:
        """The run `run_id` locked for this process while in the `with` block: one resume
        of a run at a time (store.run_lock); a UserError when another process holds it."""
        from accelbench.store.run_lock import hold

        return hold(self._backend, run_id)

    def import_run(self, stored: StoredRun) -> bool:
        """Copy a run read from another store or an export into this one, with its id;
        see import_runs."""
        return self.import_runs([stored])[0]

    def import_runs(self, runs: Sequence[StoredRun]) -> list[bool]:
        """Copy runs read from other stores or exports into this one, with their ids, all
        in one transaction: either every run is written or none is.

        Idempotent on the run id: a run already here is left as it is (False); a new one
        is written with its fingerprint and measurements (True). One exception: a run
        here still "running" whose cases are the first of the imported run's (a run
        whose store stopped answering, spooled by `RunRecorder`) is completed from it:
        its missing measurements added, its status and end set (True). A fingerprint id
        that is already here with other content is refused: the id names one stack, and
        binding the run to the stored one would misstate what it ran on.
        """
        added = []
        with self._write() as tx:
            for stored in runs:
                record = stored.record
                here = tx.execute("SELECT status, fingerprint_id FROM runs WHERE id = ?",
                                  (record.id,)).fetchone()
                if here is not None:
                    added.append(_complete_run(tx, stored, here[0], here[1]))
                    continue
                _check_fingerprint(tx, self.name, record.fingerprint_id, stored.fingerprint)
                if not _insert_run(tx, record, stored.fingerprint):
                    added.append(False)  # written meanwhile by another merge
                    continue
                tx.executemany(_INSERT_MEASUREMENT,
                               [_measurement_row(record.id, m) for m in stored.rows])
                _insert_resumes(tx, record.id, record.resumes)
                added.append(True)
        return added

    def finish_run(self, run_id: str, status: str, finished_at: float | None = None) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        with self._write() as tx:
            cursor = tx.execute(
                "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                (status, time.time() if finished_at is None else finished_at, run_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"no run {run_id} in result store {self.name}")

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
        with self._write() as tx:
            row = tx.execute(
                "INSERT INTO profiles (run_id, case_key, benchmark, label, trace_paths,"
                " analysis, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, case_key, benchmark, label, _dumps(list(trace_paths)),
                 _dumps(analysis), time.time() if created_at is None else created_at),
            ).fetchone()
        return int(row[0])

    def add_explanation(self, run_a: str, run_b: str, *, case_key: str, label: str,
                        findings: dict[str, Any], created_at: float | None = None) -> int:
        """Store what `accelbench explain` found for one case of two runs; its id."""
        with self._write() as tx:
            row = tx.execute(
                "INSERT INTO explanations (run_a, run_b, case_key, label, findings,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (run_a, run_b, case_key, label, _dumps(findings),
                 time.time() if created_at is None else created_at),
            ).fetchone()
        return int(row[0])

    # -- reading ---------------------------------------------------------------------

    def found_for_run(self, ref: str) -> list[StoredProfile | StoredExplanation]:
        """What was found of a run beyond its measurements, as its reports show it: its
        profiles, then the explanations of its cases against other runs."""
        run_id = self.resolve_run(ref)
        return [*self.profiles_for_run(run_id), *self.explanations([run_id])]

    def explanations(self, run_ids: Sequence[str] | None = None) -> list[StoredExplanation]:
        """The explanations of which either run is among `run_ids` (None: all), oldest
        first. A row whose findings do not read is left out: a store from anywhere is
        untrusted, and one bad row must not hide a report."""
        rows = self._query("SELECT * FROM explanations ORDER BY id")
        wanted = None if run_ids is None else set(run_ids)
        out = []
        for row in rows:
            if wanted is not None and row["run_a"] not in wanted and row["run_b"] not in wanted:
                continue
            try:
                findings = json.loads(row["findings"])
            except ValueError:
                continue
            if not isinstance(findings, dict):
                continue
            out.append(StoredExplanation(row["id"], row["run_a"], row["run_b"],
                                         row["case_key"], row["label"], findings,
                                         row["created_at"]))
        return out

    # -- GPUs ----------------------------------------------------------------------------

    def gpus(self) -> list[gpu_table.StoredGpu]:
        """Every GPU seen in the store's runs (store.gpus), with the nodes it was seen in
        and when; the GPU last seen first. A GPU recorded by its UUID alone in some runs
        (its serial unreadable there: no vendor library) is the GPU recorded with that
        UUID and a serial in others, under the serial's key."""
        alias = self._gpu_aliases()
        spans: dict[tuple[str, str], list[float]] = {}
        for row in self._query(
                "SELECT g.gpu_key, g.host, MIN(r.started_at) AS first_seen,"
                " MAX(r.started_at) AS last_seen, COUNT(DISTINCT g.run_id) AS runs"
                " FROM run_gpus g JOIN runs r ON r.id = g.run_id GROUP BY g.gpu_key, g.host"):
            key = alias.get(row["gpu_key"], row["gpu_key"])
            span = spans.setdefault((key, row["host"]), [math.inf, -math.inf, 0])
            span[:] = [min(span[0], float(row["first_seen"])),
                       max(span[1], float(row["last_seen"])), span[2] + int(row["runs"])]
        stays: dict[str, list[gpu_table.Stay]] = {}
        for (key, host), (first, last, runs) in spans.items():
            stays.setdefault(key, []).append(gpu_table.Stay(host, first, last, int(runs)))
        named: dict[str, tuple[tuple[bool, float], Row]] = {}
        for row in self._query(
                "SELECT g.gpu_key, g.uuid, g.serial, g.product, MAX(r.started_at) AS seen"
                " FROM run_gpus g JOIN runs r ON r.id = g.run_id"
                " GROUP BY g.gpu_key, g.uuid, g.serial, g.product"):
            key = alias.get(row["gpu_key"], row["gpu_key"])
            rank = (row["serial"] is not None, float(row["seen"]))  # with a serial, newest
            if key not in named or rank > named[key][0]:
                named[key] = (rank, row)
        out = [gpu_table.StoredGpu(
            key, gpu_table.text(named[key][1]["uuid"]), gpu_table.text(named[key][1]["serial"]),
            gpu_table.text(named[key][1]["product"]),
            tuple(sorted(found, key=lambda s: (s.first_seen, s.host))))
            for key, found in stays.items()]
        out.sort(key=lambda g: (-g.last_seen, g.key))
        return out

    def _gpu_aliases(self) -> dict[str, str]:
        """Key -> the key of the same GPU: a key that is a UUID, of a GPU recorded with that
        UUID and a serial in other runs, -> the serial's key."""
        rows = self._query("SELECT DISTINCT gpu_key, uuid, serial FROM run_gpus"
                           " WHERE uuid IS NOT NULL")
        bare = gpu_table.bare_uuid
        by_uuid = {bare(r["uuid"]): r["gpu_key"] for r in rows if r["serial"] is not None}
        return {r["gpu_key"]: by_uuid[bare(r["uuid"])] for r in rows
                if r["serial"] is None and bare(r["gpu_key"]) == bare(r["uuid"])
                and by_uuid.get(bare(r["uuid"]), r["gpu_key"]) != r["gpu_key"]}

    def run_gpus(self, run_ids: Sequence[str] | None = None) -> list[gpu_table.RunGpu]:
        """The GPUs of these runs (None: of every run), by run and device index, each under
        the key `gpus` lists it by."""
        alias = self._gpu_aliases()
        if run_ids is None:
            out = self._run_gpus("", ())
        else:
            ids = sorted(set(run_ids))
            out = []
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start:start + _IDS_PER_QUERY]
                out += self._run_gpus(f"WHERE run_id IN ({', '.join('?' for _ in chunk)})",
                                      chunk)
        return [dataclasses.replace(g, key=alias[g.key]) if g.key in alias else g for g in out]

    def _run_gpus(self, where: str, params: Sequence[Any]) -> list[gpu_table.RunGpu]:
        out = []
        for row in self._query(
                f"SELECT * FROM run_gpus {where} ORDER BY run_id, device_index", params):
            key, index = gpu_table.text(row["gpu_key"]), row["device_index"]
            if key is None or isinstance(index, bool) or not isinstance(index, int) \
                    or not 0 <= index < gpu_table.MAX_GPUS:
                continue  # not as written: left out rather than guessed at
            out.append(gpu_table.RunGpu(
                row["run_id"], index, key, gpu_table.text(row["uuid"]),
                gpu_table.text(row["serial"]), gpu_table.text(row["bus_id"]),
                gpu_table.text(row["host"]) or "", gpu_table.text(row["product"])))
        return out

    def gpu_measurements(self, keys: str | Sequence[str]
                         ) -> list[tuple[RunRecord, Measurement]]:
        """Every measurement of the runs the GPU(s) `keys` were in, oldest run first (each
        run's result of each case); which of them used which GPU is for
        analysis.gpu_history to say, with `run_gpus`."""
        asked = {keys} if isinstance(keys, str) else set(keys)
        wanted = sorted(asked | {k for k, same in self._gpu_aliases().items() if same in asked})
        ids: set[str] = set()
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            chunk = wanted[start:start + _IDS_PER_QUERY]
            ids.update(row["run_id"] for row in self._query(
                "SELECT DISTINCT run_id FROM run_gpus"
                f" WHERE gpu_key IN ({', '.join('?' for _ in chunk)})", chunk))
        run_ids = sorted(ids)
        out: list[tuple[RunRecord, Measurement]] = []
        for start in range(0, len(run_ids), _IDS_PER_QUERY):
            chunk = run_ids[start:start + _IDS_PER_QUERY]
            out += self._measurements_where(
                f"m.run_id IN ({', '.join('?' for _ in chunk)})", chunk)
        out.sort(key=lambda pair: (pair[0].started_at, pair[0].id))  # stable: m.id kept
        return out

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
                    f"result store {self.name}: cannot read profile {row['id']}: {e}"
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
                raise UserError(f"no runs in result store {self.name}")
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
            raise UserError(f"no run matches {ref!r} in result store {self.name}")
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
        return StoredRun.of_rows(record, json.loads(row["data"]),
                                 [self._measurement(r["id"], r["record"]) for r in rows])

    def measurements_for_case(self, case_key: str) -> list[tuple[RunRecord, Measurement]]:
        """Every stored measurement of one case, oldest run first: each run's result for
        it (a measurement a resume superseded is left out, as `load_run` leaves it)."""
        return self._measurements_where("m.case_key = ?", (case_key,))

    def case_examples(self) -> list[Measurement]:
        """One stored measurement of each case (the first stored), by case key: what
        tells which cases a pattern selects without reading every record."""
        rows = self._query(
            "SELECT m.id, m.record FROM measurements m WHERE m.id IN"
            " (SELECT MIN(id) FROM measurements GROUP BY case_key) ORDER BY m.case_key")
        return [self._measurement(r["id"], r["record"]) for r in rows]

    def measurements_for_cases(self, case_keys: Sequence[str]
                               ) -> list[tuple[RunRecord, Measurement]]:
        """Every stored measurement of these cases, oldest run first."""
        out: list[tuple[RunRecord, Measurement]] = []
        keys = sorted(set(case_keys))
        for start in range(0, len(keys), _IDS_PER_QUERY):
            chunk = keys[start:start + _IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            out += self._measurements_where(f"m.case_key IN ({marks})", chunk)
        if len(keys) > _IDS_PER_QUERY:
            out.sort(key=lambda pair: (pair[0].started_at, pair[0].id))  # stable: m.id kept
        return out

    def _measurements_where(self, where: str, params: Sequence[Any]
                            ) -> list[tuple[RunRecord, Measurement]]:
        rows = self._query(
            "SELECT m.id, m.run_id, m.record FROM measurements m JOIN runs r ON r.id = m.run_id"
            f" WHERE ({where}) AND {_NEWEST} ORDER BY r.started_at, r.id, m.id", params)
        ids = sorted({r["run_id"] for r in rows})
        runs: dict[str, RunRecord] = {}
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start:start + _IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            runs.update((record.id, record)
                        for record in self._runs(f"WHERE r.id IN ({marks})", chunk))
        return [(runs[r["run_id"]], self._measurement(r["id"], r["record"])) for r in rows]

    def _runs(self, where: str, params: Sequence[Any], limit: int | None = None) -> list[RunRecord]:
        sql = _RUNS_QUERY.format(where=where, limit="LIMIT ?" if limit is not None else "")
        rows = self._query(sql, (*params, limit) if limit is not None else params)
        records = [_run_record(row) for row in rows]
        resumes = self._resumes([r.id for r in records])
        return [dataclasses.replace(r, resumes=tuple(resumes[r.id])) if r.id in resumes else r
                for r in records]

    def _resumes(self, run_ids: Sequence[str]) -> dict[str, list[ResumeEvent]]:
        """The resumes of these runs, oldest first, by run id (runs never resumed have
        none). Most runs never are: the table is read only when it holds anything."""
        out: dict[str, list[ResumeEvent]] = {}
        if not run_ids or not self._query("SELECT 1 FROM run_resumes LIMIT 1"):
            return out
        ids = sorted(set(run_ids))
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start:start + _IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            for row in self._query(
                    "SELECT run_id, resumed_at, fingerprint_id, status_before FROM run_resumes"
                    f" WHERE run_id IN ({marks}) ORDER BY resumed_at, id", chunk):
                out.setdefault(row["run_id"], []).append(
                    ResumeEvent(row["resumed_at"], row["fingerprint_id"], row["status_before"]))
        return out

    def _measurement(self, measurement_id: int, record: str) -> Measurement:
        try:
            return Measurement.from_dict(json.loads(record))
        except StoreError as e:
            raise StoreError(f"result store {self.name}: measurement {measurement_id}: {e}"
                             ) from None
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(
                f"result store {self.name}: cannot read measurement {measurement_id}: {e}"
            ) from None


_ID_ATTEMPTS = 100
_IDS_PER_QUERY = 500  # below SQLite's older limit of 999 bound parameters
_INSERT_MEASUREMENT = (
    "INSERT INTO measurements (run_id, case_key, status, record) VALUES (?, ?, ?, ?)"
)


def _unused_run_id(tx: Transaction, started_at: float) -> str:
    """"20261130-002249-3fa2": UTC start time and 4 random hex digits, free in this store."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started_at))
    for _ in range(1000):
        run_id = f"{stamp}-{secrets.token_hex(2)}"
        if not tx.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
            return run_id
    raise StoreError(f"no free run id left for {stamp}")


# The columns of the runs table that a run is written into (ddl: 006 added `request`).
RUN_COLUMNS = ("id", "started_at", "finished_at", "status", "suite", "argv", "device",
               "generation_key", "fingerprint_id", "host", "accelbench_version",
               "format_version", "request")


def _insert_run(tx: Transaction, record: RunRecord, fingerprint: dict[str, Any]) -> bool:
    """The one place a run (and its fingerprint, once per stack) is written; False, and
    nothing written, when a run of that id is there already (another writer's).

    ON CONFLICT DO NOTHING: a clash with a writer still in its transaction waits for it
    and then skips, rather than failing this transaction (as a unique violation would
    on PostgreSQL).
    """
    if record.status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {record.status!r}")
    tx.execute(
        "INSERT INTO fingerprints (id, generation_key, data, first_seen)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (record.fingerprint_id, record.generation_key, _dumps(fingerprint), record.started_at),
    )
    row = {
        "id": record.id, "started_at": record.started_at, "finished_at": record.finished_at,
        "status": record.status, "suite": record.suite,
        "argv": _dumps(list(redact_argv(record.argv))), "device": record.device,
        "generation_key": record.generation_key, "fingerprint_id": record.fingerprint_id,
        "host": record.host, "accelbench_version": record.accelbench_version,
        "format_version": FORMAT_VERSION,
        "request": (None if record.request is None
                    else _dumps(redact_request(dict(record.request)))),
    }
    columns = [name for name in RUN_COLUMNS if name in row]
    inserted = tx.execute(
        f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        " ON CONFLICT (id) DO NOTHING", tuple(row[name] for name in columns))
    if inserted.rowcount != 1:
        return False
    gpu_rows = gpu_table.rows_of(record.id, record.host, fingerprint)
    if gpu_rows:
        tx.executemany(f"INSERT INTO run_gpus ({', '.join(gpu_table.COLUMNS)})"
                       f" VALUES ({', '.join('?' * len(gpu_table.COLUMNS))})", gpu_rows)
    return True


def _complete_run(tx: Transaction, stored: StoredRun, status: str, fingerprint_id: str) -> bool:
    """Complete the run left "running" here from `stored`, if it is the same run further
    on: the same stack, and the cases stored here are the first of its own (for a
    resumed run, whose measurements are not in one order: every measurement and resume
    stored here is one of its own, by case, status and start). Whether it was
    completed: what it has that is not here added, its status and end set."""
    record = stored.record
    if status != RUN_RUNNING or record.status == RUN_RUNNING \
            or fingerprint_id != record.fingerprint_id:
        return False
    here = tx.execute("SELECT case_key, record FROM measurements WHERE run_id = ? ORDER BY id",
                      (record.id,)).fetchall()
    theirs = stored.rows
    if not record.resumes:
        if [m.case.key for m in theirs[:len(here)]] != [row[0] for row in here]:
            return False
        added = list(theirs[len(here):])
    else:
        unmatched: list[tuple[str, object, object] | None] = [
            _identity(m.case.key, m.to_dict()) for m in theirs]
        for key, text in here:
            try:
                unmatched[unmatched.index(_identity(key, json.loads(text)))] = None
            except (ValueError, AttributeError):
                return False  # not one of the imported run's measurements
        added = [m for m, left in zip(theirs, unmatched, strict=True) if left is not None]
    resumed = {row[0] for row in tx.execute(
        "SELECT resumed_at FROM run_resumes WHERE run_id = ?", (record.id,)).fetchall()}
    if not resumed <= {event.resumed_at for event in record.resumes}:
        return False
    tx.executemany(_INSERT_MEASUREMENT, [_measurement_row(record.id, m) for m in added])
    _insert_resumes(tx, record.id, [e for e in record.resumes if e.resumed_at not in resumed])
    tx.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
               (record.status, record.finished_at, record.id))
    return True


def _identity(case_key: str, record: Any) -> tuple[str, object, object]:
    """What tells one stored measurement of a run from another: its case, status and
    start."""
    return (case_key, record.get("status"), record.get("started_at"))


def _insert_resumes(tx: Transaction, run_id: str, events: Sequence[ResumeEvent]) -> None:
    tx.executemany(
        "INSERT INTO run_resumes (run_id, resumed_at, fingerprint_id, status_before)"
        " VALUES (?, ?, ?, ?)",
        [(run_id, e.resumed_at, e.fingerprint_id, e.status_before) for e in events])


def _check_fingerprint(tx: Transaction, name: str, fingerprint_id: str,
                       fingerprint: dict[str, Any]) -> None:
    row = tx.execute("SELECT data FROM fingerprints WHERE id = ?", (fingerprint_id,)
                       ).fetchone()
    if row is not None and json.loads(row[0]) != json.loads(_dumps(fingerprint)):
        raise StoreError(f"result store {name} holds fingerprint {fingerprint_id!r} with other "
                         "content than the one imported: refusing to bind the run to it")


def _insert_measurement(tx: Transaction, run_id: str, m: Measurement) -> None:
    tx.execute(_INSERT_MEASUREMENT, _measurement_row(run_id, m))


def _measurement_row(run_id: str, m: Measurement) -> tuple[str, str, str, str]:
    return (run_id, m.case.key, m.status, _dumps(m.to_dict()))


def _run_record(row: Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        status=row["status"],
        suite=row["suite"],
        argv=redact_argv(json.loads(row["argv"])),
        device=row["device"],
        generation_key=row["generation_key"],
        host=row["host"],
        accelbench_version=row["accelbench_version"],
        fingerprint_id=row["fingerprint_id"],
        n_ok=row["n_ok"],
        n_failed=row["n_failed"],
        n_skipped=row["n_skipped"],
        request=_stored_request(row["request"]),
    )


def _stored_request(text: str | None) -> dict[str, Any] | None:
    """A run's stored request as its JSON form, secrets redacted again; None when there is
    none, or it is not a JSON object (RunRequest.from_dict says what else is wrong)."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return redact_request(data) if isinstance(data, dict) else None


def _dumps(value: Any) -> str:
    # default=str: an odd value in `details` must not cost the measurement.
    return json.dumps(value, default=str)
