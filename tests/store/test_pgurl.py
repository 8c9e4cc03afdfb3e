"""A PostgreSQL URL is read exactly as libpq reads it (libpq's own parser, through
psycopg, is the reference), and no way of writing a password lets it be shown."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import EXIT_USAGE, UserError
from accelbench.store import parse_location
from accelbench.store.location import redact, redact_argv
from accelbench.store.pgurl import REDACTED, Secret, URLError, parse_url

conninfo = pytest.importorskip("psycopg.conninfo")


def libpq(url: str) -> dict[str, str]:
    """What libpq itself reads from `url` (scheme in lower case, as libpq needs)."""
    scheme, sep, rest = url.partition("://")
    keywords: dict[str, str] = conninfo.conninfo_to_dict(f"{scheme.lower()}{sep}{rest}")
    return keywords


def ours(url: str) -> dict[str, str]:
    parsed = parse_url(url)
    return {**parsed.keywords, **{k: s.reveal() for k, s in parsed.secrets}}


# Every character libpq takes as it is in a URL's password: all but '@' (which ends the
# user part), '/' (which ends the host part before any '@'), ' ' (refused inside a value
# since libpq 17), NUL, and '%' (which starts an escape). Written percent-encoded, a
# password may hold any character but NUL.
RAW_PASSWORD_CHARS = st.characters(blacklist_characters="@/% \x00",
                                   blacklist_categories=["Cs"])
ANY_PASSWORD_CHARS = st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"])


@given(password=st.text(RAW_PASSWORD_CHARS, min_size=1, max_size=24),
       params=st.sampled_from(["", "?sslmode=require", "?application_name=x&connect_timeout=5"]))
@settings(max_examples=300, deadline=None)
def test_a_raw_password_is_read_as_libpq_reads_it(password: str, params: str) -> None:
    url = f"postgresql://fleet:{password}@db.example:5432/results{params}"
    assert ours(url) == libpq(url)
    parsed = parse_url(url)
    assert parsed.password is not None and parsed.password.reveal() == password
    assert parsed.shown == f"postgresql://fleet:{REDACTED}@db.example:5432/results{params}"
    assert parsed.bare == f"postgresql://fleet@db.example:5432/results{params}"
    assert libpq(parsed.bare).get("password") is None


@given(password=st.text(ANY_PASSWORD_CHARS, min_size=1, max_size=24),
       where=st.sampled_from(["user", "query", "query-first", "encoded-key"]))
@settings(max_examples=300, deadline=None)
def test_an_encoded_password_anywhere_is_kept_secret(password: str, where: str) -> None:
    url, shown, bare = _encoded(password, where)
    assert ours(url) == libpq(url)
    location = parse_location(url)
    assert location.postgres is not None
    assert location.postgres.password.reveal() == password  # type: ignore[union-attr]
    assert (str(location), location.url, location.url_without_secrets) == (shown, shown, bare)
    assert list(redact_argv(["run", f"--store={url}", url])) == ["run", f"--store={shown}",
                                                                  shown]
    assert "password" not in libpq(bare)
    # Nothing printable of it depends on the password.
    assert repr(location) == repr(parse_location(_encoded("another one", where)[0]))


def _encoded(password: str, where: str) -> tuple[str, str, str]:
    """A URL with `password` percent-encoded in it, how it is shown, how it is handed on."""
    written = quote(password, safe="")
    return {
        "user": (f"postgresql://fleet:{written}@h/db?sslmode=disable",
                 "postgresql://fleet:***@h/db?sslmode=disable",
                 "postgresql://fleet@h/db?sslmode=disable"),
        "query": (f"postgresql://h/db?user=fleet&password={written}&sslmode=disable",
                  "postgresql://h/db?user=fleet&password=***&sslmode=disable",
                  "postgresql://h/db?user=fleet&sslmode=disable"),
        "query-first": (f"postgresql://h/db?password={written}",
                        "postgresql://h/db?password=***", "postgresql://h/db"),
        "encoded-key": (f"postgresql://h/db?user=fleet&pass%77ord={written}",
                        "postgresql://h/db?user=fleet&pass%77ord=***",
                        "postgresql://h/db?user=fleet"),
    }[where]


@pytest.mark.parametrize("password", ["pw#Hash9", "s3cret:p@ss/word", "a b&c=d?e%f", "ü€x"])
def test_a_driver_message_is_scrubbed_of_the_password(password: str) -> None:
    written = quote(password, safe="")
    location = parse_location(f"postgresql://fleet:{written}@h/db")
    assert location.scrub(f"FATAL: {password} and {written}") == \
        f"FATAL: {REDACTED} and {REDACTED}"


# Mostly the characters that carry meaning in a libpq URL, so that the fuzz reaches every
# branch of the grammar; any other character now and then.
URL_PIECES = st.sampled_from([
    *"@/:?&=%[],. aZ09#ü", "%40", "%2F", "%20", "%zz", "%00", "password=", "pass%77ord=",
    "ssl=", "port=", "host=", "sslmode=", "connect_timeout="]) | st.characters(
        blacklist_categories=["Cs"])
URL_TEXT = st.lists(URL_PIECES, max_size=30).map("".join)


@pytest.mark.slow
@given(URL_TEXT)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_text_after_the_scheme_parses_as_libpq_or_is_refused(tail: str) -> None:
    """Fuzz: our reading agrees with libpq's wherever both accept the URL; a refusal is
    one line of exit 2; and whatever libpq would take as a password is never shown."""
    url = "postgresql://" + tail
    try:
        expected = libpq(url)
    except Exception:
        expected = None
    secret = (expected or {}).get("password", "")
    # Checkable where the password stands nowhere else in the text (a host that is
    # spelled like it would be shown, rightly) and cannot be part of "***".
    checkable = len(secret) > 2 and url.count(secret) <= 1 and "*" not in secret
    try:
        location = parse_location(url)
    except UserError as e:
        assert e.exit_code == EXIT_USAGE and "\n" not in str(e)
        if checkable:
            assert secret not in str(e)
        return
    if expected is None:
        return  # libpq refuses what we pass on (an unknown keyword): it says so at connect
    assert ours(url) == expected
    if checkable:
        for shown in (str(location), location.url_without_secrets or "", redact(url),
                      *redact_argv([url])):
            assert secret not in shown


@pytest.mark.parametrize(("url", "fragment"), [
    ("postgresql://u@h:99999/db", "port '99999' is not a port number"),
    ("postgresql://u@h:abc/db", "port 'abc' is not a port number"),
    ("postgresql://u@h/db?port=0", "port '0'"),
    ("postgresql://u@h/db?sslmode=bogus", "sslmode='bogus' is not one of"),
    ("postgresql://u@h/db?connect_timeout=soon", "connect_timeout='soon' is not a whole"),
    ("postgresql://u@h/db?connect_timeout=0", "would wait forever"),
    ("postgresql://u@h/db?connect_timeout=-3", "would wait forever"),
    ("postgresql://u@h/db?keepalives=2", "keepalives='2'"),
    ("postgresql://u@h/db?target_session_attrs=fast", "target_session_attrs='fast'"),
    ("postgresql://u@h/db?ssl=yes", "ssl='yes'"),
    ("postgresql://u:p%zz@h/db", "invalid percent-encoded token"),
    ("postgresql://u:p%00@h/db", "%00"),
    ("postgresql://u@h/db?sslmode", "no '='"),
    ("postgresql://u@h/db?a=b=c", "more than one '='"),
    ("postgresql://u@[::1/db", "no closing ']'"),
])
def test_values_libpq_refuses_only_when_connecting_are_bad_input(url: str,
                                                                 fragment: str) -> None:
    with pytest.raises(UserError) as e:
        parse_location(url)
    assert e.value.exit_code == EXIT_USAGE
    assert fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("url", [
    "postgresql://fleet:pw%23Hash9@h:abc/db",
    "postgresql://fleet:pw#Hash9@h:abc/db",
    "postgresql://fleet:pw?Hash9@h/db?sslmode=bogus",
    "postgresql://fleet:pw@Hash9@h/db?connect_timeout=soon",
    "postgresql://h/db?password=pw%23Hash9&sslmode=bogus",
])
def test_a_refused_url_shows_no_password(url: str) -> None:
    with pytest.raises(UserError) as e:
        parse_location(url)
    assert "Hash9" not in str(e.value)


@pytest.mark.parametrize("url", ["POSTGRESQL://u@h/d", "Postgres://u@h/d"])
def test_the_scheme_is_read_in_any_case(url: str) -> None:
    location = parse_location(url)
    assert location.url == url  # shown as written
    assert location.postgres is not None
    assert location.postgres.conninfo.reveal().startswith("postgresql://")
    assert libpq(location.postgres.conninfo.reveal()) == {"user": "u", "host": "h",
                                                           "dbname": "d"}


def test_a_secret_never_prints() -> None:
    secret = Secret("hunter2")
    assert "hunter2" not in f"{secret} {secret!r} {secret:>20} " + str([secret])
    parsed = parse_url("postgresql://u:hunter2@h/d?sslpassword=keypass")
    assert "hunter2" not in repr(parsed) and "keypass" not in repr(parsed)
    assert parsed.bare == "postgresql://u@h/d"
    assert dict(parsed.secrets).keys() == {"password", "sslpassword"}


def test_argv_keeps_everything_but_the_secrets() -> None:
    argv = ["run", "--store", "postgresql://fleet:pw#Hash9@h/db", "--bench", "gemm",
            "--store=postgres://u:x%40y@h/db", "host=h password='a b' dbname=d",
            "mysql://root:hunter2@h/db", "sqlite:///x.db"]
    assert list(redact_argv(argv)) == [
        "run", "--store", "postgresql://fleet:***@h/db", "--bench", "gemm",
        "--store=postgres://u:***@h/db", "host=h password=*** dbname=d",
        "mysql://root:***@h/db", "sqlite:///x.db"]


def test_an_error_echoes_what_was_written() -> None:
    with pytest.raises(URLError):
        parse_url("mysql://x")
    with pytest.raises(UserError, match=re.escape("'sqlite:///x.db'")):
        parse_location("sqlite:///x.db")


@given(password=st.text(st.characters(blacklist_characters="@/\x00",
                                      blacklist_categories=["Cs"]), min_size=3, max_size=16))
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
def test_fuzz_a_command_given_any_password(password: str, capsys, tmp_path, monkeypatch) -> None:
    """Through the command line, against a port where nothing listens: exit 2 (refused
    before connecting) or 5 (nothing to reach) only, one error line, the password in no
    spelling, and nothing created."""
    from accelbench.cli.main import main

    monkeypatch.chdir(tmp_path)
    url = f"postgresql://fleet:{password}@127.0.0.1:1/results?connect_timeout=2"
    code = main(["runs", "--store", url])
    err = capsys.readouterr().err
    assert code in (EXIT_USAGE, 5), err
    assert err.startswith("accelbench: error: ") and err.count("\n") == 1
    if "*" not in password and url.count(password) == 1:
        assert password not in err and quote(password, safe="") not in err
    assert list(tmp_path.iterdir()) == []
