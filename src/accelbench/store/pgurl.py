"""A PostgreSQL connection URL read as libpq reads it, with its secrets held apart.

libpq's grammar (fe-connect.c, `conninfo_uri_parse_options`) is not RFC 3986: after
`postgresql://` the user part runs to the first `@` that comes before any `/`, its
password from the first `:` to that `@`, so a password may hold `#`, `?`, `:`, `&` and
`=` as they are (only `@` and `/` need %40 and %2F); `#` is never a fragment; each
parameter's key and value are percent-decoded (`pass%77ord=` is `password=`). A reader
that splits such a URL with `urllib` sees `pw#Hash9` as a fragment and prints the
password. So this module parses exactly as libpq does (tests hold it to libpq's own
parser), and the result is a value whose secrets cannot be printed by accident:

- `shown`: the URL as the user wrote it, each secret replaced by `***`: for messages,
  stored command lines, reports, everything a person or a file sees;
- `bare`: the URL with its secrets left out altogether: what a batch job is handed, the
  password going to it the way PostgreSQL clients expect (PGPASSWORD, ~/.pgpass);
- `secrets`: `Secret` values, whose str() and repr() are `***`; only the driver's
  connection call reveals them.

Values that libpq would take and only refuse when connecting (`port=abc`,
`sslmode=bogus`, `connect_timeout=soon`) are refused here, before anything connects: they
are bad input, not an unreachable server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

REDACTED = "***"
SCHEMES = ("postgresql", "postgres")
# The keywords whose values are secrets: never shown, stored or handed on in text.
SECRET_KEYWORDS = frozenset({"password", "sslpassword", "oauth_client_secret"})

# Values libpq checks only when it connects, checked here first. Enumerations as
# PostgreSQL 18 documents them (libpq, "Parameter Key Words").
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby",
                             "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
    "sslcertmode": ("disable", "allow", "require"),
}
# Whole seconds (or milliseconds for tcp_user_timeout), and 0/1 for keepalives.
_COUNTS = ("keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout")
_INTEGER = re.compile(r"^\s*[+-]?[0-9]+\s*$")


class URLError(ValueError):
    """The text is not a PostgreSQL URL libpq would connect with; the message never
    holds a secret of it."""


@dataclass(frozen=True)
class Secret:
    """A secret value: it prints as *** however it is formatted."""

    _value: str = field(repr=False)

    def reveal(self) -> str:
        """The value itself: for the database driver, and nothing else."""
        return self._value

    def __str__(self) -> str:
        return REDACTED

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __format__(self, spec: str) -> str:
        return REDACTED


@dataclass(frozen=True)
class PostgresURL:
    """A parsed URL: what it connects with, and how it may be shown."""

    shown: str  # as written, secrets as ***
    bare: str  # as written, secrets left out
    params: tuple[tuple[str, str], ...]  # libpq keyword -> decoded value, no secrets
    secrets: tuple[tuple[str, Secret], ...]  # keyword -> secret, as libpq takes it
    # The URL itself, for libpq to parse when it connects (scheme in lower case, which
    # is the only case libpq knows).
    conninfo: Secret
    # The secrets as they stand in the text (percent-encoded or not): what a message
    # quoting the text back, a driver's say, may hold.
    _spelled: tuple[Secret, ...] = ()

    def __str__(self) -> str:
        return self.shown

    @property
    def keywords(self) -> dict[str, str]:
        return dict(self.params)

    def secret_texts(self) -> tuple[str, ...]:
        """Each secret as decoded and as written: what no message may hold."""
        texts = [s.reveal() for _, s in self.secrets] + [s.reveal() for s in self._spelled]
        return tuple(dict.fromkeys(t for t in texts if t))

    @property
    def password(self) -> Secret | None:
        return dict(self.secrets).get("password")


def is_postgres_url(text: str) -> bool:
    """Whether `text` starts with postgresql:// or postgres:// (in any case)."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def parse_url(text: str) -> PostgresURL:
    """`text` (postgresql:// or postgres://, in any case) as libpq parses it, its values
    checked; a URLError names what is wrong without quoting a secret."""
    scheme, sep, _ = text.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise URLError("not a postgresql:// URL")
    if "\x00" in text:  # libpq would read the text only up to it
        raise URLError("the URL holds a NUL character")
    start = len(scheme) + 3
    pieces = _Pieces(text)
    values: dict[str, str] = {}

    # The user part: up to the first '@' that comes before any '/'.
    at = _first_of(text, "@/", start)
    p = start
    if at < len(text) and text[at] == "@":
        colon = _first_of(text, ":@", start)
        if colon > start:
            values["user"] = _decode(text[start:colon], "the user name")
        if text[colon] == ":" and at > colon + 1:
            values["password"] = _decode(text[colon + 1:at], "the password")
            pieces.secret(colon + 1, at, drop=(colon, at))
        p = at + 1

    # Hosts, each with an optional port, separated by commas.
    hosts: list[str] = []
    ports: list[str] = []
    while True:
        if p < len(text) and text[p] == "[":
            close = text.find("]", p + 1)
            if close < 0:
                raise URLError("an IPv6 host address has no closing ']'")
            if close == p + 1:
                raise URLError("an IPv6 host address is empty")
            hosts.append(text[p + 1:close])
            p = close + 1
            if p < len(text) and text[p] not in ":/?,":
                raise URLError(f"unexpected {text[p]!r} after an IPv6 host address "
                               "(expected ':' or '/')")
        else:
            end = _first_of(text, ":/?,", p)
            hosts.append(text[p:end])
            p = end
        port = ""
        if p < len(text) and text[p] == ":":
            end = _first_of(text, "/?,", p + 1)
            port = text[p + 1:end]
            p = end
        ports.append(port)
        if p < len(text) and text[p] == ",":
            p += 1
            continue
        break
    # As libpq: stored when the comma-joined text is not empty (",": two empty hosts).
    if ",".join(hosts):
        values["host"] = _decode(",".join(hosts), "the host")
    if ",".join(ports):
        values["port"] = _decode(",".join(ports), "the port")

    # The database name, then the parameters.
    if p < len(text) and text[p] == "/":
        end = _first_of(text, "?", p + 1)
        if end > p + 1:
            values["dbname"] = _decode(text[p + 1:end], "the database name")
        p = end
    if p < len(text):  # text[p] == "?"
        p += 1
        while p < len(text):
            end = _first_of(text, "&", p)
            _parameter(text, p, end, values, pieces)
            p = end + 1

    for keyword, value in values.items():
        if not _is_secret(keyword):
            _check_value(keyword, value)
    secrets = tuple((k, Secret(v)) for k, v in values.items() if _is_secret(k))
    params = tuple((k, v) for k, v in values.items() if not _is_secret(k))
    conninfo = "postgresql" + text[len(scheme):] if scheme != "postgresql" else text
    return PostgresURL(shown=pieces.render(REDACTED), bare=pieces.render(None),
                       params=params, secrets=secrets, conninfo=Secret(conninfo),
                       _spelled=pieces.spelled())


def redact_loosely(text: str) -> str:
    """A URL that could not be parsed (or of another scheme), shown with whatever could
    be a secret hidden: from the first ':' of its user part to its last '@', and the
    value of every parameter whose name could be a password's (or is percent-encoded)."""
    scheme, sep, rest = text.partition("://")
    if sep and "@" in rest:
        head, tail = rest.rsplit("@", 1)
        if ":" in head:
            rest = f"{head.split(':', 1)[0]}:{REDACTED}@{tail}"
    shown = f"{scheme}{sep}{rest}" if sep else text
    return _LOOSE_SECRET.sub(rf"\1{REDACTED}", shown)


_LOOSE_SECRET = re.compile(r"(?i)((?:^|[?&\s])[^=&\s]*(?:pass|secret|token|%)[^=&\s]*=)[^&\s]*")


class _Pieces:
    """The text with the spans of its secrets marked, to render it with or without them."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._spans: list[tuple[int, int, int, int]] = []  # value start, end; drop start, end

    def secret(self, start: int, end: int, drop: tuple[int, int]) -> None:
        """The secret's value is text[start:end]; leaving it out drops text[drop]."""
        self._spans.append((start, end, *drop))

    def spelled(self) -> tuple[Secret, ...]:
        return tuple(Secret(self._text[start:end]) for start, end, _, _ in self._spans)

    def render(self, mask: str | None) -> str:
        out, p = [], 0
        for start, end, drop_start, drop_end in sorted(self._spans):
            if mask is None:
                out.append(self._text[p:drop_start])
                p = drop_end
            else:
                out.append(self._text[p:start] + mask)
                p = end
        out.append(self._text[p:])
        return "".join(out)


def _is_secret(keyword: str) -> bool:
    # libpq's keywords are case-sensitive; any spelling of one is kept secret all the same.
    return keyword.lower() in SECRET_KEYWORDS


def _first_of(text: str, chars: str, start: int) -> int:
    """The index of the first of `chars` at or after `start`, else len(text)."""
    hits = [i for i in (text.find(c, start) for c in chars) if i >= 0]
    return min(hits) if hits else len(text)


def _parameter(text: str, start: int, end: int, values: dict[str, str],
               pieces: _Pieces) -> None:
    """One `key=value` of the query, stored in `values` under libpq's keyword."""
    pair = text[start:end]
    key_text, sep, value_text = pair.partition("=")
    if not sep:
        # libpq's words; the text is not quoted, for it could be a secret.
        raise URLError("a URL parameter has no '=' (missing key/value separator)")
    if "=" in value_text:
        raise URLError("a URL parameter has more than one '=' (write '=' in a value as %3D)")
    key = _decode(key_text, "a parameter name")
    if _is_secret(key):
        # Left out with one separator beside it: "?a=1&password=x" -> "?a=1"; the '&'
        # after it, else the '&' before it, or the '?' of the only parameter.
        drop = (start, end + 1) if text[end:end + 1] == "&" else (start - 1, end)
        pieces.secret(start + len(key_text) + 1, end, drop=drop)
        value = _decode(value_text, "a secret parameter")
    else:
        value = _decode(value_text, f"parameter {key}")
    if key == "ssl":  # libpq's one alias: ssl=true means sslmode=require
        if value != "true":
            raise URLError(f"ssl={value!r}: the only value is true (sslmode=require)")
        key, value = "sslmode", "require"
    values[key] = value


def _decode(text: str, what: str) -> str:
    """libpq's percent-decoding: spaces around a value are dropped and a space inside it
    is refused (libpq 17 and later), every % needs two hex digits, and %00 is refused."""
    text = text.strip(" ")
    if " " in text:
        raise URLError(f"{what} holds a space: write it as %20")
    if "%" not in text:
        return text
    out = bytearray()
    i = 0
    raw = text.encode("utf-8")
    while i < len(raw):
        if raw[i] == 0x25:  # '%'
            digits = raw[i + 1:i + 3]
            if len(digits) < 2 or not all(chr(d) in "0123456789abcdefABCDEF" for d in digits):
                raise URLError(f"{what} holds an invalid percent-encoded token")
            byte = int(digits, 16)
            if byte == 0:
                raise URLError(f"{what} holds %00, which is forbidden")
            out.append(byte)
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _check_value(keyword: str, value: str) -> None:
    """The values libpq would refuse only when connecting, refused now (URLError)."""
    if keyword == "port":
        for port in value.split(","):
            if port and not (_is_int(port) and 1 <= int(port) <= 65535):
                raise URLError(f"port {port!r} is not a port number (1-65535)")
    elif keyword == "connect_timeout":
        if not _is_int(value):
            raise URLError(f"connect_timeout={value!r} is not a whole number of seconds")
        if int(value) <= 0:
            raise URLError(f"connect_timeout={value}: libpq would wait forever for a server "
                           "that does not answer; give seconds (accelbench's default is 10)")
    elif keyword == "keepalives":
        if value.strip() not in ("0", "1"):
            raise URLError(f"keepalives={value!r}: expected 0 or 1")
    elif keyword in _COUNTS:
        if not _is_int(value) or int(value) < 0:
            raise URLError(f"{keyword}={value!r} is not a whole number of at least 0")
    elif keyword in _CHOICES and value not in _CHOICES[keyword]:
        raise URLError(f"{keyword}={value!r} is not one of {', '.join(_CHOICES[keyword])}")


def _is_int(text: str) -> bool:
    return bool(_INTEGER.match(text))
