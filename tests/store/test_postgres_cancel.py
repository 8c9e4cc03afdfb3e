"""A statement the PostgreSQL server ends is told apart by why: accelbench's own deadline
(exit 5), a deadline the URL's options set (exit 3: the URL asked for it), or another
session's cancel (exit 3); the password never shows."""

from __future__ import annotations

import urllib.parse

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_STORE, EXIT_STORE_UNREACHABLE, StoreUnreachable
from accelbench.store import Store, parse_location

psycopg = pytest.importorskip("psycopg")
from accelbench.store.postgres import (  # noqa: E402
    connection_params,
    option_settings,
    server_cancelled,
)

URL = "postgresql://fleet:pw%40secret@db.example/fleet"


@pytest.mark.parametrize(("options", "settings"), [
    ("-c statement_timeout=1", {"statement_timeout": "1"}),
    ("-cstatement_timeout=5s --lock-timeout=2", {"statement_timeout": "5s",
                                                 "lock_timeout": "2"}),
    ("--Statement-Timeout=7 -c statement_timeout=9", {"statement_timeout": "9"}),
    (r"-c search_path=a\ b -c work_mem=64MB", {"search_path": "a b", "work_mem": "64MB"}),
    ("-c", {}),
    ("", {}),
])
def test_the_settings_of_the_options_are_read_as_the_server_reads_them(
        options: str, settings: dict[str, str]) -> None:
    assert option_settings(options) == settings


def test_a_deadline_the_url_sets_is_kept_and_known() -> None:
    location = parse_location(URL + "?options=-c%20statement_timeout%3D1")
    params, given = connection_params(location, 60.0)
    assert given == {"statement_timeout": "1"}
    assert params["options"] == ("-c statement_timeout=1 "
                                 "-c idle_in_transaction_session_timeout=60000")
    params, given = connection_params(parse_location(URL), 2.5)
    assert given == {} and params["options"] == (
        "-c statement_timeout=2500 -c idle_in_transaction_session_timeout=2500")


def test_why_the_server_ended_a_statement_decides_the_error() -> None:
    location = parse_location(URL)
    timeout = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    ours = server_cancelled(location, timeout, 60.0, {})
    assert isinstance(ours, StoreUnreachable) and "within 60 s" in str(ours)
    theirs = server_cancelled(location, timeout, 60.0, {"statement_timeout": "1"})
    assert theirs is not None and theirs.exit_code == EXIT_STORE
    assert "statement_timeout=1, which the URL's options set" in str(theirs)
    assert "within 60 s" not in str(theirs)
    idle = psycopg.errors.IdleInTransactionSessionTimeout(
        "terminating connection due to idle-in-transaction timeout")
    unnamed = server_cancelled(location, idle, 60.0, {})
    assert unnamed is not None and unnamed.exit_code == EXIT_STORE_UNREACHABLE
    named = server_cancelled(location, idle, 60.0,
                             {"idle_in_transaction_session_timeout": "10"})
    assert named is not None and named.exit_code == EXIT_STORE
    assert "idle_in_transaction_session_timeout=10" in str(named)
    by_hand = server_cancelled(
        location, psycopg.errors.QueryCanceled("canceling statement due to user request"),
        60.0, {})
    assert by_hand is not None and by_hand.exit_code == EXIT_STORE
    assert "cancelled" in str(by_hand)
    assert server_cancelled(location, psycopg.errors.UndefinedTable("x"), 60.0, {}) is None
    for error in (ours, theirs, named, by_hand):
        assert "secret" not in str(error) and "***" in str(error)


def test_the_url_s_statement_timeout_is_named_when_the_server_uses_it(pg_cluster,
                                                                      capsys) -> None:
    """A statement held by a lock another session keeps is cancelled by the server at
    the URL's statement_timeout (half a second), long before accelbench's deadline."""
    import _pgcluster
    from postgres import new_database

    database = new_database(pg_cluster, owner=_pgcluster.PASSWORD_ROLE)
    url = pg_cluster.url(database, _pgcluster.PASSWORD_ROLE, _pgcluster.PASSWORD)
    Store.open(url).close()
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        options = urllib.parse.quote("-c statement_timeout=500", safe="")
        code = main(["runs", "--store", f"{url}?options={options}"])
    out, err = capsys.readouterr()
    assert code == EXIT_STORE, err
    assert err.count("\n") == 1 and "statement_timeout=500, which the URL's options set" in err
    assert _pgcluster.PASSWORD not in out + err
    assert urllib.parse.quote(_pgcluster.PASSWORD, safe="") not in out + err
