"""Where a result store is: a file (SQLite) or a PostgreSQL database, as a person types it.

`--store` and $ACCELBENCH_STORE take a path (SQLite, the embedded default) or a
libpq URL, `postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]`
(or `postgres://`; `?host=/run/postgresql` for a unix socket, `sslmode=`, ... as libpq
reads them). Anything else that looks like a URL (`mysql://...`, `http://...`,
`postgresql:/db`, which a path would silently turn into a folder named `postgresql:`)
is refused; a file whose name holds a colon is given as `./NAME`.

A password in a URL is never shown: `str(location)` is the URL with it redacted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from accelbench.errors import UserError

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
POSTGRES_SCHEMES = ("postgresql", "postgres")
REDACTED = "***"

# A URL scheme and its colon: two characters at least, so that nothing is read as a
# scheme that is only a short name, and never the start of an ordinary relative path.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")


@dataclass(frozen=True)
class StoreLocation:
    """A store's place: `path` for SQLite, `url` (as given, password and all) for
    PostgreSQL."""

    kind: str
    path: Path | None = None
    url: str | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        return redact(self.url or "")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The password of the URL, as given and decoded: what no message may hold."""
        password = _password(self.url) if self.url else None
        if not password:
            return ()
        return tuple(dict.fromkeys((password, quote(password, safe=""), unquote(password))))

    def scrub(self, text: str) -> str:
        """`text` (a driver's message) with the password of this location redacted."""
        for secret in self.secrets:
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
    """The store `text` names; a URL of a scheme accelbench cannot store into is a
    usage error (one line, exit 2)."""
    if not isinstance(text, str):
        return StoreLocation(SQLITE, path=Path(text).expanduser())
    match = _SCHEME.match(text)
    if match is None:
        return StoreLocation(SQLITE, path=Path(text).expanduser())
    scheme = match.group(1).lower()
    if scheme in POSTGRES_SCHEMES and text[match.end():].startswith("//"):
        return StoreLocation(POSTGRESQL, url=text)
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


def redact(url: str) -> str:
    """The URL with any password (in its user part or a `password=` parameter) replaced
    by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r":[^:@/]*@", f":{REDACTED}@", url)
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{REDACTED}@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key == "password" for key, _ in pairs):
            query = urlencode([(k, REDACTED if k == "password" else v) for k, v in pairs],
                              safe="/*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _password(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        return userinfo.split(":", 1)[1]
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "password":
            return value
    return None
