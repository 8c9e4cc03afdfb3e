"""Where a result store is: a file (SQLite) or a PostgreSQL database, as a person types it.

`--store` and $ACCELBENCH_STORE take a path (SQLite, the embedded default) or a
libpq URL, `postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]`
(or `postgres://`, in any case; `?host=/run/postgresql` for a unix socket, `sslmode=`,
... as libpq reads them: `store.pgurl`). Anything else that looks like a URL
(`mysql://...`, `http://...`, `postgresql:/db`, which a path would silently turn into a
folder named `postgresql:`) is refused; a file whose name holds a colon is given as
`./NAME`.

A password in a URL is never shown, stored or handed on: a location holds it apart
(`pgurl.Secret`), `str(location)` is the URL with it as ***, and `redact_argv` takes it
out of a command line before the command line is stored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import UserError
from accelbench.store.pgurl import (
    REDACTED,
    SCHEMES,
    PostgresURL,
    URLError,
    is_postgres_url,
    parse_url,
    redact_loosely,
)

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
POSTGRES_SCHEMES = SCHEMES
__all__ = ["POSTGRESQL", "REDACTED", "SQLITE", "StoreLocation", "default_store_location",
           "parse_location", "redact", "redact_argv", "redact_request"]

# A URL scheme and its colon: two characters at least, so that nothing is read as a
# scheme that is only a short name, and never the start of an ordinary relative path.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
# Where a command-line word holds a URL (`--store=postgresql://...`).
_URL_IN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+://")
# libpq's key=value form (`password=x`, `password='a b'`), wherever it appears.
_KEYWORD_SECRET = re.compile(
    r"(?i)\b((?:ssl)?password|oauth_client_secret)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)")


@dataclass(frozen=True)
class StoreLocation:
    """A store's place: `path` for SQLite, `postgres` (the parsed URL, its secrets held
    apart) for PostgreSQL."""

    kind: str
    path: Path | None = None
    postgres: PostgresURL | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        return self.url or ""

    @property
    def url(self) -> str | None:
        """The URL as given, with each secret as ***: safe to print and to store."""
        return self.postgres.shown if self.postgres is not None else None

    @property
    def url_without_secrets(self) -> str | None:
        """The URL with its secrets left out: what a batch job is handed (the password
        reaches it through PGPASSWORD or ~/.pgpass)."""
        return self.postgres.bare if self.postgres is not None else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret of the URL, as given and decoded: what no message may hold."""
        return self.postgres.secret_texts() if self.postgres is not None else ()

    def scrub(self, text: str) -> str:
        """`text` (a driver's message) with the secrets of this location redacted."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    @property
    def files_dir(self) -> Path:
        """The folder that reports/ and profiles/ go into by default: beside a store file;
        for a database, the user data directory (where the default store lives)."""
        if self.path is not None:
            return self.path.parent
        from platformdirs import user_data_path

        return user_data_path("accelbench", appauthor=False)


def parse_location(text: str | os.PathLike[str]) -> StoreLocation:
    """The store `text` names; a URL of a scheme accelbench cannot store into, or a
    PostgreSQL URL that libpq would refuse, is a usage error (one line, exit 2)."""
    if not isinstance(text, str):
        return StoreLocation(SQLITE, path=Path(text).expanduser())
    match = _SCHEME.match(text)
    if match is None:
        return StoreLocation(SQLITE, path=Path(text).expanduser())
    scheme = match.group(1).lower()
    if is_postgres_url(text):
        try:
            return StoreLocation(POSTGRESQL, postgres=parse_url(text))
        except URLError as e:
            raise UserError(f"store {redact(text)!r}: {e}") from None
    shown = redact(text)
    if scheme in POSTGRES_SCHEMES:
        raise UserError(f"store {shown!r} is not a PostgreSQL URL: write "
                        f"{scheme}://[user@]host[:port]/dbname")
    raise UserError(f"store {shown!r}: accelbench cannot store into a {scheme!r} URL; give a "
                    "file path (SQLite) or a postgresql:// URL (a file whose name holds a "
                    "colon: ./NAME)")


def default_store_location() -> StoreLocation:
    """$ACCELBENCH_STORE if set, else results.sqlite in the user's data directory."""
    env = os.environ.get("ACCELBENCH_STORE")
    if env:
        return parse_location(env)
    from platformdirs import user_data_path

    return StoreLocation(SQLITE,
                         path=user_data_path("accelbench", appauthor=False) / "results.sqlite")


def redact(text: str) -> str:
    """A URL as the user wrote it, with any secret replaced by ***: exactly where libpq
    would read one in a PostgreSQL URL, and everything that could be one in any other."""
    if is_postgres_url(text):
        try:
            return parse_url(text).shown
        except URLError:
            pass
    return redact_loosely(text)


def redact_word(word: str) -> str:
    """One command-line word with every secret in it replaced by ***: a store URL in it
    (`--store=postgresql://u:pw@h/db`), and libpq's `password=...`."""
    match = _URL_IN_WORD.search(word)
    if match is not None:
        word = word[:match.start()] + redact(word[match.start():])
    return _KEYWORD_SECRET.sub(lambda m: m.group(1) + m.group(2) + REDACTED, word)


def redact_request(data: Any) -> Any:
    """A request's JSON form (core.request) as it may be stored and shown: every text in
    it with its secrets replaced by *** (`redact_word`), as a command line's words, and
    the value of an A/B stack's variable whose name says it is a secret (a token, a
    password, a key)."""
    if isinstance(data, str):
        return redact_word(data)
    if isinstance(data, list):
        return [redact_request(item) for item in data]
    if isinstance(data, dict):
        return {key: _redact_env(value) if key == "env" else redact_request(value)
                for key, value in data.items()}
    return data


def _redact_env(pairs: Any) -> Any:
    from accelbench.core.request import SECRET_NAME

    if not isinstance(pairs, list):
        return redact_request(pairs)
    out = []
    for pair in pairs:
        if (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                and SECRET_NAME.search(pair[0])):
            out.append([pair[0], REDACTED])
        else:
            out.append(redact_request(pair))
    return out


def redact_argv(argv: Sequence[Any]) -> tuple[Any, ...]:
    """A command line as it may be stored and shown: every secret replaced by ***. What
    is not text (in a store another program wrote) is left for the record checks."""
    return tuple(redact_word(word) if isinstance(word, str) else word for word in argv)
