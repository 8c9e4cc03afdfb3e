"""`accelbench merge`: gather runs from other stores or JSON exports into one store.

Sources and the target are store files (SQLite), postgresql:// URLs or (sources only)
JSON exports, so runs go from SQLite to PostgreSQL and back. Every source is untrusted:
read within the caps of `core.untrusted`, and every run of it checked
(`store.record_schema`) before anything is written, so a merge that fails writes nothing,
and a merge that succeeds leaves a store every command can read."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.cli.options import add_json, path_arg, print_json

if TYPE_CHECKING:
    from accelbench.store import StoreLocation

NAME = "merge"
HELP = "copy the runs of other stores or JSON exports into one store (idempotent)"

_SQLITE_HEADER = b"SQLite format 3\x00"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", nargs="+", type=path_arg, metavar="SOURCE",
                        help="result stores (.sqlite files or postgresql:// URLs) or exports "
                        "(`accelbench export`, JSON)")
    parser.add_argument("--into", type=path_arg, metavar="STORE",
                        help="the store to merge into, a file or a postgresql:// URL "
                        "(default: $ACCELBENCH_STORE, else results.sqlite in the user data "
                        "directory)")
    add_json(parser)


def read_source(location: StoreLocation) -> list[Any]:
    """Every run of a store (a file or a URL) or a JSON export, checked (see the module
    docstring)."""
    from accelbench.report.readable import check_readable
    from accelbench.store.record_schema import check_runs

    runs = _store_runs(location) if location.path is None else _file_runs(location.path)
    name = str(location)  # a URL without its password
    check_runs(runs, name)
    for run in runs:
        check_readable(run, f"{name}: run {run.record.id}")
    return runs


def _file_runs(path: Path) -> list[Any]:
    """Every run of a store file or a JSON export, unchecked."""
    from accelbench.core.untrusted import MAX_EXPORT_BYTES, parse_json, read_bytes
    from accelbench.errors import StoreError
    from accelbench.store import load_json
    from accelbench.store.sqlite import check_regular_file

    # A FIFO would make the read below wait forever.
    if check_regular_file(path).st_size == 0:
        raise StoreError(f"{path} is empty: neither a result store nor a JSON export")
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head == _SQLITE_HEADER:
        return _store_runs(path)
    data = parse_json(read_bytes(path, "export", StoreError, MAX_EXPORT_BYTES), str(path),
                      StoreError, not_json=" is neither a result store nor a JSON export")
    return load_json(data, str(path))


def _store_runs(path: Any) -> list[Any]:
    """Every run of another store (a path or a StoreLocation), oldest first; what it
    holds may be anything."""
    from accelbench.core.untrusted import clip
    from accelbench.errors import StoreError
    from accelbench.store import Store

    with Store.open(path, create=False, upgrade_in_place=False) as source:
        try:
            return [source.load_run(r.id) for r in reversed(source.list_runs())]
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError,
                RecursionError) as exc:
            raise StoreError(f"{path}: cannot read its runs: {type(exc).__name__}: "
                             f"{clip(exc)}") from None


def run(args: argparse.Namespace) -> int:
    from accelbench.store import Store, default_store_location, parse_location

    target = parse_location(args.into) if args.into else default_store_location()
    sources = [parse_location(s) for s in args.sources]
    # All read before any write.
    loaded = [(source, read_source(source)) for source in sources]
    added = skipped = 0
    per_source = []
    new_file = target.path is not None and _is_missing(target.path)
    try:
        with Store.open(target, create=True) as store:
            # One transaction for every source: a merge is written whole or not at all.
            written = iter(store.import_runs([run for _, runs in loaded for run in runs]))
    except BaseException:
        if new_file and target.path is not None:  # a refused merge leaves no empty store
            _remove_store_file(target.path)
        raise
    for path, runs in loaded:
        new = sum(next(written) for _ in runs)
        per_source.append({"source": str(path), "runs": len(runs), "added": new})
        added += new
        skipped += len(runs) - new
    if args.json:
        print_json({"into": str(target), "added": added, "already_present": skipped,
                    "sources": per_source})
    else:
        print(f"Merged {added} run(s) into {target}; {skipped} already there.")
    return 0


def _is_missing(path: Path) -> bool:
    """Whether nothing is at `path` (a new store would be made there); a path the system
    refuses (too long, a file where a folder should be) is not missing: opening the store
    says what is wrong with it, and nothing is removed there after."""
    try:
        path.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _remove_store_file(path: Path) -> None:
    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
        with contextlib.suppress(OSError):
            (path.parent / name).unlink()
