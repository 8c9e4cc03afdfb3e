"""What --store and $ACCELBENCH_STORE name: a file, a PostgreSQL URL, or a refused URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.errors import EXIT_USAGE, UserError
from accelbench.store import default_store_location, parse_location
from accelbench.store.location import POSTGRESQL, SQLITE, redact


@pytest.mark.parametrize("text", ["results.sqlite", "/abs/r.sqlite", "./odd:name.sqlite",
                                  "C:results", "a/b:c/results.sqlite"])
def test_paths_are_sqlite(text: str) -> None:
    location = parse_location(text)
    assert location.kind == SQLITE and location.path == Path(text)
    assert str(location) == str(Path(text))


@pytest.mark.parametrize("text", [
    "postgresql://user@db.example:5433/results",
    "postgres://db.example/results",
    "POSTGRESQL://u@h/d",
    "postgresql:///results?host=/run/postgresql",
    "postgresql://u@h1:5432,h2:5432/d?sslmode=require&target_session_attrs=read-write",
])
def test_postgres_urls(text: str) -> None:
    location = parse_location(text)
    assert location.kind == POSTGRESQL and location.url == text and location.path is None


@pytest.mark.parametrize(("text", "fragment"), [
    ("mysql://u@h/db", "cannot store into a 'mysql' URL"),
    ("http://example.org/results", "cannot store into a 'http' URL"),
    ("sqlite:///tmp/x.sqlite", "cannot store into a 'sqlite' URL"),
    ("postgresql:/u@h/db", "is not a PostgreSQL URL"),
    ("postgres:u@h", "is not a PostgreSQL URL"),
    ("postgresql:", "is not a PostgreSQL URL"),
    ("results:2024.sqlite", "a file whose name holds a colon: ./NAME"),
])
def test_other_urls_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment) as e:
        parse_location(text)
    assert e.value.exit_code == EXIT_USAGE
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://fleet:s3cret@h:5432/db", "postgresql://fleet:***@h:5432/db"),
    ("postgresql://fleet:s3cret%3Ap%40ss%2Fword@h/db", "postgresql://fleet:***@h/db"),
    ("postgresql://h/db?user=fleet&password=s3cret&sslmode=require",
     "postgresql://h/db?user=fleet&password=***&sslmode=require"),
    ("postgresql://fleet@h/db", "postgresql://fleet@h/db"),
    ("mysql://root:hunter2@h/db", "mysql://root:***@h/db"),
])
def test_passwords_are_redacted(url: str, shown: str) -> None:
    assert redact(url) == shown
    if url.startswith("postgresql"):
        location = parse_location(url)
        assert str(location) == shown
        for secret in location.secrets:
            assert secret not in location.scrub(f"FATAL: password {secret} refused")


def test_the_decoded_password_is_a_secret_too() -> None:
    location = parse_location("postgresql://fleet:s3cret%3Ap%40ss%2Fword@h/db")
    assert "s3cret:p@ss/word" in location.secrets
    assert location.scrub("no s3cret:p@ss/word here") == "no *** here"


def test_a_refused_url_does_not_show_its_password() -> None:
    with pytest.raises(UserError) as e:
        parse_location("mysql://root:hunter2@h/db")
    assert "hunter2" not in str(e.value)


def test_the_environment_names_the_default_store(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCELBENCH_STORE", "postgresql://u@h/db")
    assert default_store_location().url == "postgresql://u@h/db"
    monkeypatch.setenv("ACCELBENCH_STORE", str(tmp_path / "x.sqlite"))
    assert default_store_location().path == tmp_path / "x.sqlite"
    monkeypatch.setenv("ACCELBENCH_STORE", "mysql://u@h/db")
    with pytest.raises(UserError, match="mysql"):
        default_store_location()
    monkeypatch.delenv("ACCELBENCH_STORE")
    default_path = default_store_location().path
    assert default_path is not None
    assert default_path.name == "results.sqlite"


def test_files_go_beside_a_store_file_or_into_the_user_data_directory(monkeypatch,
                                                                     tmp_path: Path) -> None:
    assert parse_location(str(tmp_path / "s.sqlite")).files_dir == tmp_path
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert parse_location("postgresql://u@h/db").files_dir == tmp_path / "data" / "accelbench"
