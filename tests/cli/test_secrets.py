"""No password of a store URL reaches anything stored, printed or written: a real run into
a real PostgreSQL server logged in with passwords that hold every kind of character
libpq accepts in a URL, then every command that reads, exports, reports or merges it,
and the migration that scrubs stores written before."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

import _pgcluster
from accelbench.cli.main import main
from accelbench.store import Store
from accelbench.store import ddl as store_schema
from postgres import is_postgres, new_database, sql, tables

# Raw where libpq takes the character as it is (# ? : & = ' " \ and any letter), encoded
# where it must be (@ / % and space).
PASSWORDS = ["pw#Hash9?x", "a:b&c=d'e\"f\\g", "p@ss/wo rd%ü€"]
_roles = itertools.count()


def written(password: str) -> str:
    """The password as it stands in a URL: only what libpq needs encoded is encoded."""
    return "".join(quote(c, safe="") if c in "@/% " else c for c in password)


def forms(password: str) -> set[str]:
    """Every spelling of the password that must not appear anywhere."""
    return {password, written(password), quote(password, safe=""), quote(password)}


def assert_secret_free(password: str, *texts: str | bytes) -> None:
    for text in texts:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
        for form in forms(password):
            assert form.encode() not in data, f"{form!r} found in {data[:300]!r}"


@pytest.fixture
def hostile_url(pg_cluster, request) -> tuple[str, str]:
    """(URL, password): a database owned by a role whose password is `request.param`."""
    password = request.param
    role = f"hostile{os.getpid()}_{next(_roles)}"
    escaped = password.replace("'", "''")
    pg_cluster.sql(f"CREATE ROLE {role} LOGIN PASSWORD '{escaped}'")
    database = new_database(pg_cluster, owner=role)
    return (f"postgresql://{role}:{written(password)}@127.0.0.1:{pg_cluster.port}/{database}",
            password)


@pytest.fixture(autouse=True)
def _data_home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "data-home"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def _every_file(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in folder.rglob("*") if p.is_file()]


def _reads(url: str, tmp_path: Path, capsys) -> list[str | bytes]:
    """What every reading command prints and writes about the store at `url`."""
    out: list[str | bytes] = []
    for argv in (["runs"], ["runs", "--json"], ["show", "latest"], ["show", "latest", "--json"],
                 ["show", "latest", "--env"], ["export"], ["export", "--format", "csv"],
                 ["export", "--format", "openmetrics"], ["history", "launch", "--json"],
                 ["diagnose", "--json"], ["generations", "--json"]):
        main([*argv, "--store", url])
        captured = capsys.readouterr()
        out += [captured.out, captured.err]
    for name in ("r.html", "r.md"):
        main(["report", "latest", "--store", url, "-o", str(tmp_path / name)])
        out += [*capsys.readouterr(), (tmp_path / name).read_bytes()]
    local = tmp_path / "merged.sqlite"
    assert main(["merge", url, "--into", str(local)]) == 0
    out += [*capsys.readouterr(), local.read_bytes()]
    assert main(["export", "--store", url, "-o", str(tmp_path / "all.json")]) == 0
    out += [*capsys.readouterr(), (tmp_path / "all.json").read_bytes()]
    exported = json.loads((tmp_path / "all.json").read_text())
    assert any("***" in word for word in exported["runs"][0]["run"]["argv"])  # shown, redacted
    out.append(_dump(url))
    return out


def _dump(url: str) -> str:
    """Every cell of every table of the store's database, as text."""
    return "\n".join(str(cell) for name in tables(url)
                     for row in sql(url, f'SELECT * FROM "{name}"') for cell in row)


@pytest.mark.slow
@pytest.mark.parametrize("hostile_url", PASSWORDS[:1], indirect=True)
def test_a_real_run_into_postgres_keeps_no_password(hostile_url, tmp_path: Path, capsys,
                                                    _data_home: Path) -> None:
    url, password = hostile_url
    env = {**os.environ, "XDG_DATA_HOME": str(_data_home), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-m", "accelbench", "run", "--bench", "launch",
                           "--max-time", "0.1", "--store", url], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert done.returncode in (0, 1), done.stderr
    (argv,) = sql(url, "SELECT argv FROM runs")[0:1]
    stored = json.loads(argv[0])
    assert stored[:2] == ["run", "--bench"] and "--store" in stored
    assert stored[stored.index("--store") + 1] == url.replace(written(password), "***")
    assert_secret_free(password, done.stdout, done.stderr, *_reads(url, tmp_path, capsys),
                       *_every_file(_data_home))


@pytest.mark.parametrize("hostile_url", PASSWORDS, indirect=True)
def test_no_command_shows_a_password_given_anywhere(hostile_url, tmp_path: Path,
                                                    capsys) -> None:
    """The command line of a run holds the URL in every way one can be given; the run is
    written as `run` writes one (Store.begin_run), and every command reads it."""
    url, password = hostile_url
    in_query = (url.replace(f":{written(password)}@", "@")
                + f"?password={quote(password, safe='')}")
    with Store.open(url) as store:
        run_id = store.begin_run(
            fingerprint={"format_version": 1}, fingerprint_id="fp", generation_key="CPU",
            device="cpu", suite="quick", host="h", accelbench_version="0",
            argv=["run", "--store", url, f"--store={in_query}",
                  f"host=h password={password}"])
        store.finish_run(run_id, "complete")
    (row,) = sql(url, "SELECT argv FROM runs")
    assert_secret_free(password, row[0], *_reads(url, tmp_path, capsys))


@pytest.mark.parametrize("password", PASSWORDS)
def test_errors_never_show_the_password(password: str, pg_cluster, capsys) -> None:
    """Refused credentials, an unreachable server, and URLs refused before connecting."""
    port = pg_cluster.port
    w = written(password)
    for url, code in ((f"postgresql://{_pgcluster.PASSWORD_ROLE}:{w}@127.0.0.1:{port}/x", 6),
                      (f"postgresql://u:{w}@127.0.0.1:1/db?connect_timeout=2", 5),
                      (f"postgresql://u:{w}@127.0.0.1:abc/db", 2),
                      (f"postgresql://u:{w}@h/db?sslmode=bogus", 2),
                      (f"POSTGRESQL://u:{w}@h/db?connect_timeout=soon", 2)):
        assert main(["runs", "--store", url]) == code, url
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("accelbench: error: ")
        assert_secret_free(password, err)


@pytest.mark.parametrize("hostile_url", PASSWORDS[:1], indirect=True)
def test_the_environment_can_name_a_store_with_a_password(hostile_url, monkeypatch,
                                                          capsys) -> None:
    url, password = hostile_url
    Store.open(url).close()
    monkeypatch.setenv("ACCELBENCH_STORE", url)
    assert main(["runs", "--json"]) == 0
    assert main(["env", "--json"]) == 0
    assert_secret_free(password, *capsys.readouterr())


# -- stores written before: scrubbed by a migration ---------------------------------------


def _unscrub(location: str) -> None:
    """Make the store look as one written before the scrubbing migration: that
    migration not recorded, and a password in a stored command line."""
    secret_argv = json.dumps(["run", "--store", "postgresql://fleet:pw%23Hash9@h/db",
                              "--store=postgres://u:s3cret@h/d"])
    sql(location, "UPDATE runs SET argv = ?", (secret_argv,))
    sql(location, "DELETE FROM migrations WHERE name = ?", (store_schema._SCRUB[0],))
    if not is_postgres(location):
        sql(location, f"PRAGMA user_version = {len(store_schema.MIGRATIONS) - 1}")


def test_an_older_store_is_scrubbed_when_opened(store_location: str, capsys) -> None:
    with Store.open(store_location) as store:
        run_id = store.begin_run(fingerprint={"format_version": 1}, fingerprint_id="fp",
                                 generation_key="CPU", device="cpu", suite=None,
                                 argv=["run"], host="h", accelbench_version="0")
        store.finish_run(run_id, "complete")
    _unscrub(store_location)
    assert "Hash9" in sql(store_location, "SELECT argv FROM runs")[0][0]
    assert main(["runs", "--store", store_location, "--json"]) == 0  # upgrades in place
    out = capsys.readouterr().out
    assert "Hash9" not in out and "s3cret" not in out
    (row,) = sql(store_location, "SELECT argv FROM runs")
    assert json.loads(row[0]) == ["run", "--store", "postgresql://fleet:***@h/db",
                                  "--store=postgres://u:***@h/d"]
    if not is_postgres(store_location):
        raw = b"".join(p.read_bytes() for p in Path(store_location).parent.iterdir())
        assert b"Hash9" not in raw and b"s3cret" not in raw


def test_a_merged_store_is_read_scrubbed_and_left_as_it_is(tmp_path: Path, capsys) -> None:
    """A source of `merge` is never changed (it is upgraded in a copy in memory), and what
    is merged from it is scrubbed."""
    source = tmp_path / "old.sqlite"
    with Store.open(source) as store:
        run_id = store.begin_run(fingerprint={"format_version": 1}, fingerprint_id="fp",
                                 generation_key="CPU", device="cpu", suite=None,
                                 argv=["run"], host="h", accelbench_version="0")
        store.finish_run(run_id, "complete")
    _unscrub(str(source))
    conn = sqlite3.connect(source)
    conn.execute("PRAGMA journal_mode=DELETE")  # the whole store in one file
    conn.close()
    before = source.read_bytes()
    target = tmp_path / "new.sqlite"
    assert main(["merge", str(source), "--into", str(target), "--json"]) == 0
    assert_secret_free("s3cret", capsys.readouterr().out, target.read_bytes())
    assert_secret_free("pw#Hash9", target.read_bytes())
    assert source.read_bytes() == before
