"""Reading files a user hands in (rule files, baseline files, JSON exports) as untrusted.

Such a file may be a mistake or an attack: a "billion laughs" of YAML aliases that
expands to gigabytes, thousands of levels of nesting that exhaust the interpreter's
stack, or simply a file far larger than any real one. Every reader here checks, before
the data is used:

  - its size in bytes (`max_bytes`), read no further than one byte past the cap;
  - its nesting depth (`max_depth`);
  - its number of nodes counted with YAML aliases expanded (`max_nodes`): the walk is
    iterative and stops at the cap, so its cost is linear in the cap, whatever the
    aliases would expand to;
  - that its text is Unicode: JSON's `\\udc80` escapes a lone surrogate, which no store,
    terminal or file can write.

A YAML file is checked on its parse events, before any node is composed (the composer
recurses and merge keys copy mappings), and the loaded value is walked once more, like
JSON, so that both formats obey the same caps. Every problem is one line of the given
error class (a UserError: usage for hand-written files, the store's for exports), and no
message ever quotes a whole user value: `short` cuts it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from accelbench.errors import UserError

MAX_BYTES = 16 * 2**20  # rule and baseline files: far above any real one
MAX_EXPORT_BYTES = 1 << 30  # a JSON export of a large store
MAX_DEPTH = 64  # a record nests about 8 levels deep
MAX_NODES = 4_000_000  # values and keys, aliases expanded
SHORT = 60  # characters of a user value a message quotes


def is_decimal(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits: str.isdigit() also takes '²',
    which int() refuses, and int() reads '٣' and '３' as 3."""
    return text.isascii() and text.isdigit()


def short(value: object, limit: int = SHORT) -> str:
    """repr(value), cut to about `limit` characters, for messages. Containers are not
    repr'd whole: only their kind and size, so that a huge value costs nothing."""
    if isinstance(value, dict):
        return f"an object of {len(value)} field(s)"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit]
        return repr(value)[:-1] + "..." + repr(value)[-1]
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def read_bytes(path: str | Path, what: str, error: type[UserError] = UserError,
               max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of `path`, refused when over `max_bytes` (read no further than that) or
    when it is not a regular file (a FIFO would block the read forever)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise error(f"{what} {path} is not a regular file")
        with Path(path).open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise error(f"{what} {path} is larger than {max_bytes} bytes")
    return data


def read_text(path: str | Path, what: str, error: type[UserError] = UserError,
              max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of `path`, with the size cap of `read_bytes`."""
    try:
        return read_bytes(path, what, error, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"cannot read {what} {path}: not UTF-8 text") from None


def parse_json(text: str | bytes, where: str, error: type[UserError] = UserError,
               max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES, *,
               not_json: str = ": not JSON") -> Any:
    """JSON text as data, within the caps; `where` starts every message, `not_json`
    follows it when the text is not JSON."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise error(f"{where}: nested too deeply (at most {max_depth} levels)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f"{where}{not_json}: {clip(exc)}") from None
    check_shape(data, where, error, max_depth, max_nodes)
    return data


def parse_yaml(text: str, where: str, error: type[UserError] = UserError,
               max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """YAML text as data (safe types only: nothing is ever constructed from a tag),
    within the caps; `where` starts every message."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_events(yaml.parse(text, Loader=loader), where, error, max_depth, max_nodes)
        data = yaml.load(text, Loader=loader)  # a safe loader: no tag constructs objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or clip(exc)
        raise error(f"{where}: invalid YAML{at}: {clip(problem)}") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply (at most {max_depth} levels)") from None
    check_shape(data, where, error, max_depth, max_nodes)
    return data


def check_shape(data: Any, where: str, error: type[UserError] = UserError,
                max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Refuse data nested deeper than `max_depth` or with more than `max_nodes` values and
    keys, shared values counted each time they are reached. Iterative, and it stops at
    the first cap reached, so a shared or cyclic structure costs at most `max_nodes`
    steps."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise error(f"{where}: more than {max_nodes} values")
        if isinstance(value, str):
            if not value.isascii() and not _is_unicode(value):
                raise error(f"{where}: holds text that is not Unicode (a lone surrogate, "
                            f"as JSON's \\udXXX escapes allow): {short(value)}")
            continue
        if isinstance(value, dict):
            children: Iterator[Any] = (x for kv in value.items() for x in kv)
        elif isinstance(value, list):
            children = iter(value)
        else:
            continue
        if depth >= max_depth and value:
            raise error(f"{where}: nested too deeply (at most {max_depth} levels)")
        stack.extend((child, depth + 1) for child in children)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_events(events: Iterator[Any], where: str, error: type[UserError], max_depth: int,
                  max_nodes: int) -> None:
    """The caps of `check_shape` on YAML parse events, before any node exists: each
    anchored collection's size (aliases inside it expanded) is kept, an alias adds it, and
    an alias to a collection still open (a cycle) is refused."""
    import yaml

    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, depth below it)
    open_: list[list[Any]] = [[None, 0, 0]]  # [anchor, nodes, depth below] per collection
    total = 0
    for event in events:
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(open_) > max_depth:
                raise error(f"{where}: nested too deeply (at most {max_depth} levels)")
            open_.append([event.anchor, 1, 1])
            total += 1
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, nodes, below = open_.pop()
            if anchor is not None:
                sizes[anchor] = (nodes, below)
            _add(open_[-1], nodes, below)
        elif isinstance(event, yaml.ScalarEvent):
            total += 1
            _add(open_[-1], 1, 0)
            if event.anchor is not None:
                sizes[event.anchor] = (1, 0)
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                raise error(f"{where}: alias *{short(event.anchor)[1:-1]} refers to a value "
                            "that contains it, or to no value")
            nodes, below = sizes[event.anchor]
            total += nodes
            _add(open_[-1], nodes, below)
            if len(open_) - 1 + below > max_depth:
                raise error(f"{where}: nested too deeply (at most {max_depth} levels)")
        if total > max_nodes:
            raise error(f"{where}: more than {max_nodes} values (YAML aliases expanded)")


def _add(parent: list[Any], nodes: int, below: int) -> None:
    parent[1] += nodes
    parent[2] = max(parent[2], below + 1)


def clip(exc: BaseException | str, limit: int = 200) -> str:
    """The first line of a message (or of an exception's), cut to `limit` characters:
    library messages may quote a whole user value."""
    text = str(exc)
    text = text.splitlines()[0] if text.strip() else type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."
