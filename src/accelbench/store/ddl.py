"""The store's data definition: its tables, built up by named migrations, in SQLite's and
PostgreSQL's words.

Each migration is applied once, in its own transaction, and recorded by name in the
`migrations` table; PRAGMA user_version mirrors how many are applied. Never edit or
reorder a migration that has shipped: add a new one at the end. A store whose
`migrations` table names one that is not listed here was written by a newer accelbench
and is refused rather than guessed at.

`record` in `measurements` is `Measurement.to_dict()` as JSON, the raw record the
measurement is rebuilt from (and upgraded from, when it is of an older format); beside
it, only the columns that queries select by (run, case key, status). The view
`measurement_cases` shows each record's identity and outcome as columns, for people who
query the store with SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from accelbench.store.location import redact_argv, redact_request


class _Tx(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...


# A migration's step: one SQL statement, or a function of the transaction for what SQL
# alone cannot do (the same function serves both databases).
Step = str | Callable[[_Tx], None]

# "ACBN": marks a SQLite file as an accelbench store (PRAGMA application_id).
APPLICATION_ID = 0x4143424E

# Marks a PostgreSQL database as an accelbench store (the comment on its migrations
# table): a table named "migrations" is common, and one of another application's is
# refused rather than read.
POSTGRES_MARK = "accelbench result store"

# Created before the first migration, in the same transaction.
MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS migrations ("
    " name TEXT PRIMARY KEY,"
    " applied_at REAL NOT NULL)"
)

MIGRATIONS: list[tuple[str, list[Step]]] = [
    (
        "001_initial",
        [
            """CREATE TABLE fingerprints (
                id TEXT PRIMARY KEY,
                generation_key TEXT NOT NULL,
                data TEXT NOT NULL,
                first_seen REAL NOT NULL
            )""",
            """CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                started_at REAL NOT NULL,
                finished_at REAL,
                status TEXT NOT NULL
                    CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),
                suite TEXT,
                argv TEXT NOT NULL,
                device TEXT NOT NULL,
                generation_key TEXT NOT NULL,
                fingerprint_id TEXT NOT NULL REFERENCES fingerprints(id),
                host TEXT NOT NULL,
                accelbench_version TEXT NOT NULL,
                format_version INTEGER NOT NULL
            )""",
            """CREATE TABLE measurements (
                id INTEGER PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs(id),
                case_key TEXT NOT NULL,
                benchmark TEXT NOT NULL,
                benchmark_version TEXT NOT NULL,
                family TEXT NOT NULL,
                params TEXT NOT NULL,
                device TEXT NOT NULL,
                dtype TEXT,
                status TEXT NOT NULL,
                reason TEXT,
                samples TEXT NOT NULL,
                number INTEGER NOT NULL,
                warnings TEXT NOT NULL,
                details TEXT NOT NULL,
                started_at REAL NOT NULL,
                duration_s REAL NOT NULL,
                confidence REAL NOT NULL,
                record TEXT NOT NULL
            )""",
            """CREATE TABLE figures (
                measurement_id INTEGER NOT NULL REFERENCES measurements(id),
                name TEXT NOT NULL,
                value REAL,
                unit TEXT NOT NULL,
                higher_is_better INTEGER NOT NULL,
                peak REAL,
                pct_of_peak REAL
            )""",
            "CREATE INDEX measurements_run_id ON measurements(run_id)",
            "CREATE INDEX measurements_case_key ON measurements(case_key)",
            "CREATE INDEX figures_measurement_id ON figures(measurement_id)",
            "CREATE INDEX runs_started_at ON runs(started_at)",
            "CREATE INDEX runs_generation_key ON runs(generation_key)",
        ],
    ),
    (
        # Profiles (`accelbench profile`): where the traces are and their analysis, as
        # versioned JSON (accelbench.profile.analysis.FORMAT_VERSION).
        "002_profiles",
        [
            """CREATE TABLE profiles (
                id INTEGER PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs(id),
                case_key TEXT NOT NULL,
                benchmark TEXT NOT NULL,
                label TEXT NOT NULL,
                trace_paths TEXT NOT NULL,
                analysis TEXT NOT NULL,
                created_at REAL NOT NULL
            )""",
            "CREATE INDEX profiles_run_id ON profiles(run_id)",
        ],
    ),
]

MIGRATIONS.append(
    (
        # Records are raw first (format 2) and figures are derived when read: the copies
        # of samples, warnings and details beside each record, and the table of derived
        # figures, were written and never read. Older records stay as they are and are
        # upgraded when read.
        "003_raw_records",
        [
            "DROP TABLE figures",
            """CREATE TABLE measurements_raw (
                id INTEGER PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs(id),
                case_key TEXT NOT NULL,
                status TEXT NOT NULL,
                record TEXT NOT NULL
            )""",
            "INSERT INTO measurements_raw (id, run_id, case_key, status, record)"
            " SELECT id, run_id, case_key, status, record FROM measurements",
            "DROP TABLE measurements",
            "ALTER TABLE measurements_raw RENAME TO measurements",
            "CREATE INDEX measurements_run_id ON measurements(run_id)",
            "CREATE INDEX measurements_case_key ON measurements(case_key)",
            """CREATE VIEW measurement_cases AS SELECT
                id, run_id, case_key, status,
                json_extract(record, '$.case.benchmark') AS benchmark,
                json_extract(record, '$.case.version') AS benchmark_version,
                json_extract(record, '$.case.family') AS family,
                json_extract(record, '$.case.params') AS params,
                json_extract(record, '$.case.device') AS device,
                json_extract(record, '$.case.params.dtype') AS dtype,
                json_extract(record, '$.reason') AS reason,
                json_extract(record, '$.started_at') AS started_at,
                json_extract(record, '$.duration_s') AS duration_s,
                json_extract(record, '$.format_version') AS format_version
            FROM measurements""",
        ],
    )
)

# The same migrations, by the same names, for a store on PostgreSQL: the same tables,
# columns and indexes (REAL is DOUBLE PRECISION there: PostgreSQL's REAL has 24 bits;
# INTEGER PRIMARY KEY is an identity column), so that every query reads both alike.
# The migrations table is marked with a comment instead of an application id.
POSTGRES_MIGRATIONS: list[tuple[str, list[Step]]] = [
    (
        "001_initial",
        [
            """CREATE TABLE fingerprints (
                id TEXT PRIMARY KEY,
                generation_key TEXT NOT NULL,
                data TEXT NOT NULL,
                first_seen DOUBLE PRECISION NOT NULL
            )""",
            """CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                started_at DOUBLE PRECISION NOT NULL,
                finished_at DOUBLE PRECISION,
                status TEXT NOT NULL
                    CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),
                suite TEXT,
                argv TEXT NOT NULL,
                device TEXT NOT NULL,
                generation_key TEXT NOT NULL,
                fingerprint_id TEXT NOT NULL REFERENCES fingerprints(id),
                host TEXT NOT NULL,
                accelbench_version TEXT NOT NULL,
                format_version INTEGER NOT NULL
            )""",
            """CREATE TABLE measurements (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs(id),
                case_key TEXT NOT NULL,
                benchmark TEXT NOT NULL,
                benchmark_version TEXT NOT NULL,
                family TEXT NOT NULL,
                params TEXT NOT NULL,
                device TEXT NOT NULL,
                dtype TEXT,
                status TEXT NOT NULL,
                reason TEXT,
                samples TEXT NOT NULL,
                number INTEGER NOT NULL,
                warnings TEXT NOT NULL,
                details TEXT NOT NULL,
                started_at DOUBLE PRECISION NOT NULL,
                duration_s DOUBLE PRECISION NOT NULL,
                confidence DOUBLE PRECISION NOT NULL,
                record TEXT NOT NULL
            )""",
            """CREATE TABLE figures (
                measurement_id BIGINT NOT NULL REFERENCES measurements(id),
                name TEXT NOT NULL,
                value DOUBLE PRECISION,
                unit TEXT NOT NULL,
                higher_is_better INTEGER NOT NULL,
                peak DOUBLE PRECISION,
                pct_of_peak DOUBLE PRECISION
            )""",
            "CREATE INDEX measurements_run_id ON measurements(run_id)",
            "CREATE INDEX measurements_case_key ON measurements(case_key)",
            "CREATE INDEX figures_measurement_id ON figures(measurement_id)",
            "CREATE INDEX runs_started_at ON runs(started_at)",
            "CREATE INDEX runs_generation_key ON runs(generation_key)",
        ],
    ),
    (
        "002_profiles",
        [
            """CREATE TABLE profiles (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs(id),
                case_key TEXT NOT NULL,
                benchmark TEXT NOT NULL,
                label TEXT NOT NULL,
                trace_paths TEXT NOT NULL,
                analysis TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX profiles_run_id ON profiles(run_id)",
        ],
    ),
    (
        # PostgreSQL drops columns in place, keeping the ids and their sequence.
        "003_raw_records",
        [
            "DROP TABLE figures",
            "ALTER TABLE measurements DROP COLUMN benchmark, DROP COLUMN benchmark_version,"
            " DROP COLUMN family, DROP COLUMN params, DROP COLUMN device, DROP COLUMN dtype,"
            " DROP COLUMN reason, DROP COLUMN samples, DROP COLUMN number,"
            " DROP COLUMN warnings, DROP COLUMN details, DROP COLUMN started_at,"
            " DROP COLUMN duration_s, DROP COLUMN confidence",
            # A record that JSON cannot read (a NaN figure) shows NULLs rather than fail
            # the whole view.
            """CREATE VIEW measurement_cases AS SELECT
                id, run_id, case_key, status,
                j -> 'case' ->> 'benchmark' AS benchmark,
                j -> 'case' ->> 'version' AS benchmark_version,
                j -> 'case' ->> 'family' AS family,
                (j -> 'case' -> 'params')::text AS params,
                j -> 'case' ->> 'device' AS device,
                j -> 'case' -> 'params' ->> 'dtype' AS dtype,
                j ->> 'reason' AS reason,
                (j ->> 'started_at')::double precision AS started_at,
                (j ->> 'duration_s')::double precision AS duration_s,
                (j ->> 'format_version')::integer AS format_version
            FROM (SELECT id, run_id, case_key, status,
                         CASE WHEN record ~ '\\m(NaN|-?Infinity)\\M' THEN NULL
                              ELSE record::jsonb END AS j
                  FROM measurements) AS m""",
        ],
    ),
]


def scrub_stored_argv(tx: _Tx) -> None:
    """Every stored command line with its secrets replaced by *** (`redact_argv`): runs
    stored before accelbench kept them out (`--store postgresql://user:PASSWORD@...`)."""
    for run_id, text in tx.execute("SELECT id, argv FROM runs").fetchall():
        try:
            argv = json.loads(text)
        except ValueError:
            continue  # not ours to mend: reading the run says what is wrong with it
        if not isinstance(argv, list):
            continue
        scrubbed = list(redact_argv(argv))
        if scrubbed != argv:
            tx.execute("UPDATE runs SET argv = ? WHERE id = ?", (json.dumps(scrubbed), run_id))


# Both databases, the same step.
_SCRUB: tuple[str, list[Step]] = ("004_scrub_secrets", [scrub_stored_argv])
MIGRATIONS.append(_SCRUB)
POSTGRES_MIGRATIONS.append(_SCRUB)


def _resumes(real: str, identity: str) -> list[Step]:
    return [
        f"""CREATE TABLE run_resumes (
            id {identity},
            run_id TEXT NOT NULL REFERENCES runs(id),
            resumed_at {real} NOT NULL,
            fingerprint_id TEXT NOT NULL REFERENCES fingerprints(id),
            status_before TEXT NOT NULL
        )""",
        "CREATE INDEX run_resumes_run_id ON run_resumes(run_id)",
        # A resumed run holds a case more than once, and its newest measurement is the
        # run's result: what reading the run, and counting its cases, look up.
        "CREATE INDEX measurements_run_case ON measurements(run_id, case_key, id)",
    ]


# `accelbench run --resume`: each resume of a run, when and on which stack. Nothing
# already stored changes: a case measured again is a new row beside the earlier one.
MIGRATIONS.append(("005_run_resumes", _resumes("REAL", "INTEGER PRIMARY KEY")))
POSTGRES_MIGRATIONS.append(("005_run_resumes", _resumes(
    "DOUBLE PRECISION", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")))

def request_from_stored_argv(tx: _Tx) -> None:
    """Every run's request, read once from the command line stored with it
    (`core.request_argv`): runs stored before requests were. A run of another command, or
    a line that does not read, keeps none (it was never resumable)."""
    from accelbench.core.request_argv import request_from_argv

    for run_id, text in tx.execute("SELECT id, argv FROM runs").fetchall():
        try:
            argv = json.loads(text)
        except ValueError:
            continue  # not ours to mend: reading the run says what is wrong with it
        request = request_from_argv(argv) if isinstance(argv, list) else None
        if request is not None:
            tx.execute("UPDATE runs SET request = ? WHERE id = ?",
                       (json.dumps(redact_request(request.to_dict())), run_id))


# What each run was asked for (core.request.RunRequest, its JSON form, secrets redacted):
# what `run --resume` goes on with and `show --request` prints.
_REQUESTS: tuple[str, list[Step]] = ("006_run_requests", [
    "ALTER TABLE runs ADD COLUMN request TEXT", request_from_stored_argv])
MIGRATIONS.append(_REQUESTS)
POSTGRES_MIGRATIONS.append(_REQUESTS)


def rekey_cases(tx: _Tx) -> None:
    """Every measurement's case key, and its profiles', as its record reads now
    (`core.case.Case.from_dict`): a case stored with parameters that did not apply to it
    (`reduce` of an all-gather, `bytes` of a barrier, `seq` of a vision model) has the key
    of the same case without them, the key a run plans now. The records themselves are
    kept as stored."""
    from accelbench.core.case import Case

    for row_id, run_id, key, text in tx.execute(
            "SELECT id, run_id, case_key, record FROM measurements").fetchall():
        try:
            now = Case.from_dict(json.loads(text)["case"]).key
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not ours to mend: reading the run says what is wrong with it
        if now != key:
            tx.execute("UPDATE measurements SET case_key = ? WHERE id = ?", (now, row_id))
            tx.execute("UPDATE profiles SET case_key = ? WHERE run_id = ? AND case_key = ?",
                       (now, run_id, key))


# A parameter that does not apply to a case is no part of its identity
# (core.params.UNKEYED): stored keys as a run plans them now.
_REKEY: tuple[str, list[Step]] = ("007_case_identity", [rekey_cases])
MIGRATIONS.append(_REKEY)
POSTGRES_MIGRATIONS.append(_REKEY)
# The element type of a barrier (which moves no data) joined those parameters after.
_REKEY_BARRIER: tuple[str, list[Step]] = ("008_barrier_identity", [rekey_cases])
MIGRATIONS.append(_REKEY_BARRIER)
POSTGRES_MIGRATIONS.append(_REKEY_BARRIER)




def _explanations(real: str, identity: str) -> list[Step]:
    return [
        f"""CREATE TABLE explanations (
            id {identity},
            run_a TEXT NOT NULL REFERENCES runs(id),
            run_b TEXT NOT NULL REFERENCES runs(id),
            case_key TEXT NOT NULL,
            label TEXT NOT NULL,
            findings TEXT NOT NULL,
            created_at {real} NOT NULL
        )""",
        "CREATE INDEX explanations_run_a ON explanations(run_a)",
        "CREATE INDEX explanations_run_b ON explanations(run_b)",
    ]


# `accelbench explain`: what made one case of two runs differ, as versioned JSON
# (accelbench.profile.explain.FORMAT_VERSION), kept with the case of both runs.
MIGRATIONS.append(("009_explanations", _explanations("REAL", "INTEGER PRIMARY KEY")))
POSTGRES_MIGRATIONS.append(("009_explanations", _explanations(
    "DOUBLE PRECISION", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")))


def gpus_from_fingerprints(tx: _Tx) -> None:
    """The GPUs of every run stored before the table was, from its fingerprint's "gpus"
    (store.gpus.rows_of): none for a fingerprint that lists none."""
    from accelbench.store.gpus import COLUMNS, rows_of

    insert = (f"INSERT INTO run_gpus ({', '.join(COLUMNS)})"
              f" VALUES ({', '.join('?' * len(COLUMNS))})")
    for run_id, host, text in tx.execute(
            "SELECT r.id, r.host, f.data FROM runs r JOIN fingerprints f"
            " ON f.id = r.fingerprint_id").fetchall():
        if '"gpus"' not in text:
            continue
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            continue  # not ours to mend: reading the run says what is wrong with it
        for row in rows_of(run_id, host, data if isinstance(data, dict) else {}):
            tx.execute(insert, row)


# Which physical GPU each device of a run was (env.gpu_identity, store.gpus): the key a
# GPU's history is kept under (its board serial, else its UUID) by run and PyTorch index,
# so that a GPU keeps its history when it moves to another node.
_GPUS: tuple[str, list[Step]] = ("010_run_gpus", [
    """CREATE TABLE run_gpus (
        run_id TEXT NOT NULL REFERENCES runs(id),
        device_index INTEGER NOT NULL,
        gpu_key TEXT NOT NULL,
        uuid TEXT,
        serial TEXT,
        bus_id TEXT,
        host TEXT NOT NULL,
        product TEXT,
        PRIMARY KEY (run_id, device_index)
    )""",
    "CREATE INDEX run_gpus_key ON run_gpus(gpu_key)",
    gpus_from_fingerprints,
])
MIGRATIONS.append(_GPUS)
POSTGRES_MIGRATIONS.append(_GPUS)


# What a store that has every migration holds: a store missing one of these (dropped by
# hand, a damaged file) is refused before anything is written to it.
TABLES = frozenset({"migrations", "fingerprints", "runs", "measurements", "profiles",
                    "run_resumes", "explanations", "run_gpus"})

KNOWN_MIGRATIONS = frozenset(name for name, _ in MIGRATIONS)
