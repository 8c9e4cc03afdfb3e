"""Every reading command, merge both ways, and each bad store URL, on a real PostgreSQL
server; a password in the URL is never shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import _pgcluster
from accelbench.cli.main import main
from accelbench.errors import (
    EXIT_CASE_FAILED,
    EXIT_STORE,
    EXIT_STORE_AUTH,
    EXIT_STORE_UNREACHABLE,
    EXIT_USAGE,
)
from accelbench.store import Store, load_json
from postgres import new_database, snapshot, sql, tables

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from analysis_data import BAD_NETWORK_NODE, SLOW_GEMM_NODE, make_fleet


@pytest.fixture
def fleet_url(pg_cluster: _pgcluster.Cluster) -> str:
    """A store of 16 nodes, two bad, in a database reached with a password."""
    database = new_database(pg_cluster, owner=_pgcluster.PASSWORD_ROLE)
    url = pg_cluster.url(database, _pgcluster.PASSWORD_ROLE, _pgcluster.PASSWORD)
    make_fleet(url)
    return url


@pytest.fixture(autouse=True)
def _data_home(tmp_path: Path, monkeypatch) -> Path:
    """Reports of a database store go to the user data directory: keep it here."""
    home = tmp_path / "data-home"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert _pgcluster.PASSWORD not in text
        assert "s3cret" not in text


def _one_line_error(err: str, fragment: str) -> None:
    assert err.startswith("accelbench: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert fragment in err, err


def test_runs_and_show(fleet_url: str, capsys) -> None:
    assert main(["runs", "--store", fleet_url, "--json"]) == 0
    out, err = capsys.readouterr()
    runs = json.loads(out)
    assert len(runs) == 16 and runs[0]["host"] == "node16"
    assert main(["runs", "--store", fleet_url]) == 0
    table, _ = capsys.readouterr()
    assert runs[0]["id"] in table
    assert main(["show", "latest", "--store", fleet_url, "--json"]) == 0
    shown, _ = capsys.readouterr()
    assert json.loads(shown)["runs"][0]["run"]["host"] == "node16"
    _no_secret(out, err, table, shown)


def test_the_environment_names_the_store(fleet_url: str, capsys, monkeypatch) -> None:
    monkeypatch.setenv("ACCELBENCH_STORE", fleet_url)
    assert main(["runs", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 16


def test_report_goes_to_the_user_data_directory(fleet_url: str, capsys, _data_home) -> None:
    assert main(["report", "latest", "--store", fleet_url]) == 0
    out, err = capsys.readouterr()
    written = Path(out.split("Report: ")[1].strip())
    assert written.parent == _data_home / "accelbench" / "reports"
    assert "node16" in written.read_text(encoding="utf-8")
    _no_secret(out, err, written.read_text(encoding="utf-8"))
    assert main(["report", "latest", "--store", fleet_url, "-o", "-"]) == 0
    assert "node16" in capsys.readouterr().out


def test_compare_history_generations(fleet_url: str, capsys) -> None:
    assert main(["compare", "host=node01", f"host={SLOW_GEMM_NODE}", "--store", fleet_url,
                 "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert compared
    assert main(["history", "gemm", "--store", fleet_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["generations", "--store", fleet_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_diagnose_and_baseline(fleet_url: str, capsys, tmp_path: Path) -> None:
    assert main(["diagnose", "--store", fleet_url]) == EXIT_CASE_FAILED
    out = capsys.readouterr().out
    assert SLOW_GEMM_NODE in out and BAD_NETWORK_NODE in out
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", "--store", fleet_url, "-o", str(baseline)]) == 0
    assert baseline.exists()
    healthy = [f"host=node0{i}" for i in (1, 2, 3, 4)]
    assert main(["diagnose", "--store", fleet_url, "--baseline", str(baseline), *healthy]) == 0


def test_export_round_trips(fleet_url: str, capsys, tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    assert main(["export", "--store", fleet_url, "-o", str(out)]) == 0
    exported = load_json(json.loads(out.read_text()))
    with Store.open(fleet_url, create=False) as store:
        stored = [store.load_run(r.id) for r in reversed(store.list_runs())]
    assert sorted(r.record.id for r in exported) == sorted(r.record.id for r in stored)
    assert {r.record.id: r for r in exported} == {r.record.id: r for r in stored}


def test_merge_both_ways_is_idempotent(fleet_url: str, pg_url: str, capsys,
                                       tmp_path: Path) -> None:
    local = tmp_path / "local.sqlite"
    assert main(["merge", fleet_url, "--into", str(local), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["added"] == 16 and first["already_present"] == 0
    _no_secret(json.dumps(first))
    assert main(["merge", fleet_url, "--into", str(local), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 0

    assert main(["merge", str(local), "--into", pg_url]) == 0
    assert "Merged 16 run(s)" in capsys.readouterr().out
    assert main(["merge", str(local), "--into", pg_url]) == 0
    assert "Merged 0 run(s)" in capsys.readouterr().out
    with Store.open(pg_url, create=False) as a, Store.open(fleet_url, create=False) as b:
        assert ([a.load_run(r.id) for r in a.list_runs()]
                == [b.load_run(r.id) for r in b.list_runs()])


def test_merge_from_postgres_checks_what_it_reads(pg_url: str, tmp_path: Path,
                                                  capsys) -> None:
    """A run another writer left unreadable is refused, and nothing is merged."""
    make_fleet(pg_url, nodes=2)
    sql(pg_url, "UPDATE measurements SET record = '{\"format_version\": 99}'"
        " WHERE id = (SELECT min(id) FROM measurements)")
    local = tmp_path / "local.sqlite"
    assert main(["merge", pg_url, "--into", str(local)]) == EXIT_STORE
    _one_line_error(capsys.readouterr().err, "measurement")
    assert not local.exists()


# -- bad input: one line, its own exit code, nothing touched ------------------------------


def _export(tmp_path: Path) -> Path:
    source = tmp_path / "src.sqlite"
    make_fleet(source, nodes=1)
    out = tmp_path / "one.json"
    assert main(["export", "--store", str(source), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("url", ["mysql://root:hunter2@127.0.0.1/db", "http://example.org/x",
                                 "postgresql:/u@127.0.0.1:1/db"])
def test_unknown_schemes_are_refused_and_make_no_folder(url: str, tmp_path: Path, capsys,
                                                        monkeypatch) -> None:
    export = _export(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    capsys.readouterr()
    assert main(["merge", str(export), "--into", url]) == EXIT_USAGE
    _one_line_error(capsys.readouterr().err, "URL")
    assert main(["runs", "--store", url]) == EXIT_USAGE
    assert "hunter2" not in capsys.readouterr().err
    assert list(work.iterdir()) == []


def test_a_postgres_url_is_no_longer_a_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    """`--store postgresql://user@host:port/db` once made a folder named `postgresql:`
    and a SQLite file in it; now it is a database to reach (here: nothing listens)."""
    export = _export(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    capsys.readouterr()
    url = "postgresql://user@127.0.0.1:1/db"
    assert main(["merge", str(export), "--into", url]) == EXIT_STORE_UNREACHABLE
    _one_line_error(capsys.readouterr().err, "cannot reach result store")
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("url", ["postgresql://user@127.0.0.1:1/db",
                                 "postgresql://user:pw@no-such-host.invalid/db",
                                 "postgresql://user@/db?host=/nonexistent-socket-dir"])
def test_an_unreachable_server(url: str, capsys) -> None:
    assert main(["runs", "--store", url]) == EXIT_STORE_UNREACHABLE
    err = capsys.readouterr().err
    _one_line_error(err, "cannot reach result store")
    assert ":pw@" not in err


def test_refused_credentials(pg_cluster, capsys) -> None:
    database = new_database(pg_cluster, owner=_pgcluster.PASSWORD_ROLE)
    wrong = pg_cluster.url(database, _pgcluster.PASSWORD_ROLE, "not-the-password")
    assert main(["runs", "--store", wrong]) == EXIT_STORE_AUTH
    err = capsys.readouterr().err
    _one_line_error(err, "refused the credentials")
    assert "not-the-password" not in err and "password authentication failed" in err
    missing = pg_cluster.url(database, _pgcluster.PASSWORD_ROLE)
    assert main(["runs", "--store", missing]) == EXIT_STORE_AUTH
    _one_line_error(capsys.readouterr().err, "refused the credentials")
    assert main(["runs", "--store", pg_cluster.url(database, "nobody")]) == EXIT_STORE_AUTH


def test_a_database_that_does_not_exist(pg_cluster, capsys) -> None:
    url = pg_cluster.url("no_such_database")
    assert main(["runs", "--store", url]) == EXIT_STORE
    _one_line_error(capsys.readouterr().err, 'database "no_such_database" does not exist')
    assert "no_such_database" not in pg_cluster.sql("SELECT datname FROM pg_database")


def test_another_applications_database_is_untouched(pg_url: str, tmp_path: Path,
                                                    capsys) -> None:
    export = _export(tmp_path)
    sql(pg_url, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
    sql(pg_url, "INSERT INTO orders VALUES (1, 9.5)")
    before = snapshot(pg_url)
    capsys.readouterr()
    assert main(["merge", str(export), "--into", pg_url]) == EXIT_STORE
    _one_line_error(capsys.readouterr().err, "tables of another application")
    assert main(["runs", "--store", pg_url]) == EXIT_STORE
    assert snapshot(pg_url) == before


def test_a_newer_store_is_untouched(pg_url: str, tmp_path: Path, capsys) -> None:
    export = _export(tmp_path)
    Store.open(pg_url).close()
    sql(pg_url, "INSERT INTO migrations VALUES ('999_from_the_future', 0)")
    before = snapshot(pg_url)
    capsys.readouterr()
    assert main(["merge", str(export), "--into", pg_url]) == EXIT_STORE
    _one_line_error(capsys.readouterr().err, "newer accelbench")
    assert snapshot(pg_url) == before


def test_reading_an_empty_database_creates_nothing(pg_url: str, capsys) -> None:
    assert main(["runs", "--store", pg_url]) == EXIT_STORE
    _one_line_error(capsys.readouterr().err, "is empty: not a result store")
    assert tables(pg_url) == []


def test_a_role_that_may_not_create_tables(pg_cluster, tmp_path: Path, capsys) -> None:
    """PostgreSQL 15 lets only the owner create in `public`: said in one line."""
    database = new_database(pg_cluster)  # owned by the trusted role
    url = pg_cluster.url(database, _pgcluster.PASSWORD_ROLE, _pgcluster.PASSWORD)
    export = _export(tmp_path)
    capsys.readouterr()
    assert main(["merge", str(export), "--into", url]) == EXIT_STORE
    err = capsys.readouterr().err
    _one_line_error(err, "permission denied")
    _no_secret(err)


def test_the_driver_missing_is_one_line(pg_url: str, capsys, monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_psycopg(name, *args, **kwargs):
        if name == "psycopg" or name.startswith("psycopg."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    assert main(["runs", "--store", pg_url]) == EXIT_STORE
    _one_line_error(capsys.readouterr().err, "pip install 'accelbench[postgres]'")


def _accelbench(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, env=env, timeout=600, check=False)


def test_run_validate_and_profile_write_into_postgres(pg_url: str, _data_home: Path) -> None:
    """The commands that measure store into a database as into a file: their runs are
    there, and their reports and traces go to the user data directory."""
    ran = _accelbench("run", "--bench", "gemm", "--dtype", "fp32", "-p", "shape=64",
                      "--device", "cpu", "--max-time", "0.1", "--store", pg_url, "--json",
                      home=_data_home)
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert run["status"] == "complete" and Path(run["report"]).is_file()
    assert Path(run["report"]).is_relative_to(_data_home / "accelbench" / "reports")

    checked = _accelbench("validate", "--check", "determinism", "--dtype", "fp32",
                          "--device", "cpu", "--store", pg_url, "--json", "--no-report",
                          home=_data_home)
    assert checked.returncode == 0, checked.stderr
    validation = json.loads(checked.stdout)

    profiled = _accelbench("profile", "gemm", "-p", "shape=96", "--dtype", "fp32",
                           "--device", "cpu", "--wait", "1", "--warmup", "1", "--steps", "3",
                           "--store", pg_url, "--json", home=_data_home)
    assert profiled.returncode == 0, profiled.stderr
    profile = json.loads(profiled.stdout)
    (trace,) = profile["traces"]
    assert Path(trace).is_relative_to(_data_home / "accelbench" / "profiles")

    with Store.open(pg_url, create=False) as store:
        stored = {r.id: r for r in store.list_runs()}
        assert set(stored) == {run["run_id"], validation["run_id"], profile["run_id"]}
        assert stored[profile["run_id"]].suite == "profile"
        assert [p.case_key for p in store.profiles_for_run(profile["run_id"])] == [
            profile["measurement"]["case"]["key"]]
        assert store.load_run(validation["run_id"]).measurements
