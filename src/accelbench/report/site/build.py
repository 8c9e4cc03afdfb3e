"""Writing the site into a folder, again and again: only the pages whose content changed.

The folder keeps a manifest (`.accelbench-site.json`): each page it wrote, the hash of
what the page was made from and the hash of its content. Publishing again renders a
page only when what it is made from changed (a run's report: its id, status, number of
measurements and the accelbench version, so that the reports of thousands of finished
runs are not rendered again), writes it only when its content changed, and removes the
pages of runs and cases the store no longer holds. The manifest is read as untrusted: one
that cannot be read as written means a full rebuild, and only the files it names that
are pages of a site (index.html, runs/ID.html, ...) are ever removed. A folder that is
neither empty nor a site is refused: publishing never deletes a user's files.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any

from accelbench.core.measurement import Measurement
from accelbench.errors import UserError
from accelbench.report.site.model import run_href
from accelbench.report.site.pages import DEFAULT_THRESHOLD, site_pages
from accelbench.store import RunRecord, Store, StoredRun
from accelbench.version import __version__

MANIFEST = ".accelbench-site.json"
FORMAT = "accelbench-site"
# Manifest format history:
#   1: {"format", "format_version", "accelbench_version",
#       "pages": {PATH: {"input": SHA256, "content": SHA256}}}
FORMAT_VERSION = 1
_MANIFEST_BYTES = 64 << 20
# What a page of a site is called: only such files are ever removed.
_PAGE = re.compile(r"^(?:[a-z]+\.html|runs/[A-Za-z0-9][A-Za-z0-9._-]*\.html"
                   r"|cases/[A-Za-z0-9][A-Za-z0-9._-]*\.html)$")
_HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Published:
    folder: Path
    written: int
    unchanged: int
    removed: int
    rebuilt: bool  # the manifest was missing or could not be read

    def summary(self) -> str:
        removed = f", {self.removed} removed" if self.removed else ""
        return f"{self.written} pages written, {self.unchanged} unchanged{removed}"


@dataclass(frozen=True)
class Entry:
    input: str
    content: str


def publish(store: Store, folder: str | Path, *,
            threshold: float = DEFAULT_THRESHOLD) -> Published:
    """Write the site of every run in `store` into `folder` (created if missing)."""
    from accelbench.report.site.render import render_page, templates_digest

    out = Path(folder)
    check_folder(out)
    old = read_manifest(out)
    records = store.list_runs()
    runs = load_runs(store, records)
    digest = templates_digest()
    writer = _Writer(out, old or {})

    for page in site_pages(runs, store.name, threshold):
        made_from = _hash(f"{digest}\n{page!r}")
        writer.page(page.path, made_from, functools.partial(render_page, page))
    for record in records:
        made_from = _hash(f"{__version__}\n{record.id}\n{record.status}\n"
                          f"{record.n_ok + record.n_failed + record.n_skipped}")
        writer.page(run_href(record.id), made_from, functools.partial(_run_page, store, record))
    removed = writer.remove_others()
    write_manifest(out, writer.entries)
    return Published(out, writer.written, writer.unchanged, removed, old is None)


def _run_page(store: Store, record: RunRecord) -> str:
    from accelbench.report.site.render import render_run

    return render_run(store.load_run(record.id), store.profiles_for_run(record.id))


def load_runs(store: Store, records: list[RunRecord]) -> list[StoredRun]:
    """Every run of `records` with its measurements (no fingerprint: the pages of the
    site need none but the runs' own reports, which load theirs), read case by case
    rather than run by run: a few queries for the whole store."""
    keys = [m.case.key for m in store.case_examples()]
    by_run: dict[str, list[Measurement]] = {r.id: [] for r in records}
    for record, m in store.measurements_for_cases(keys):
        by_run.setdefault(record.id, []).append(m)
    return [StoredRun(r, {}, tuple(by_run[r.id])) for r in records]


# -- the folder ----------------------------------------------------------------------------


def check_folder(out: Path) -> None:
    """Refuse a folder that is a file, or that holds files and no site: publishing would
    mix the site into them, or (removing its old pages) delete them."""
    if not (out.exists() or out.is_symlink()):
        return
    if not out.is_dir():
        raise UserError(f"{out} is not a folder: give -o a new or empty folder, or a site "
                        "published before")
    if (out / MANIFEST).exists() or (out / MANIFEST).is_symlink():
        return
    try:
        holds = next(out.iterdir(), None) is not None
    except OSError as exc:
        raise UserError(f"cannot read the folder {out}: {exc.strerror}") from None
    if holds:
        raise UserError(f"{out} is not empty and holds no accelbench site (no {MANIFEST}): "
                        "give -o a new or empty folder, or a site published before")


def read_manifest(out: Path) -> dict[str, Entry] | None:
    """The pages the manifest names, or None where there is none or it cannot be read
    as this accelbench writes it (the site is then built again in full)."""
    from accelbench.core.untrusted import parse_json, read_text

    path = out / MANIFEST
    if not path.exists():
        return None
    try:
        data = parse_json(read_text(path, "site manifest", max_bytes=_MANIFEST_BYTES),
                          "site manifest")
    except UserError:
        return None
    if not (isinstance(data, dict) and data.get("format") == FORMAT
            and data.get("format_version") == FORMAT_VERSION
            and isinstance(data.get("pages"), dict)):
        return None
    pages: dict[str, Entry] = {}
    for name, entry in data["pages"].items():
        if not (isinstance(name, str) and _PAGE.match(name) and isinstance(entry, dict)
                and all(isinstance(entry.get(k), str) and _HASH.match(entry[k])
                        for k in ("input", "content"))):
            return None
        pages[name] = Entry(entry["input"], entry["content"])
    return pages


def write_manifest(out: Path, entries: dict[str, Entry]) -> None:
    data: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "accelbench_version": __version__,
        "pages": {name: {"input": e.input, "content": e.content}
                  for name, e in sorted(entries.items())},
    }
    _write(out, MANIFEST, json.dumps(data, indent=1) + "\n")


class _Writer:
    """Renders and writes the pages that changed, and counts."""

    def __init__(self, out: Path, old: dict[str, Entry]) -> None:
        self.out = out
        self.old = old
        self.entries: dict[str, Entry] = {}
        self.written = 0
        self.unchanged = 0

    def page(self, name: str, made_from: str, render: Callable[[], str]) -> None:
        if name in self.entries:  # two run ids that differ only where a file name cannot
            raise UserError(f"two pages of the site would be {name}: the store holds run "
                            "ids that a file name cannot tell apart")
        held = self.old.get(name)
        present = (self.out / name).is_file()
        if held is not None and held.input == made_from and present:
            self.entries[name] = held
            self.unchanged += 1
            return
        text = render()
        content = _hash(text)
        self.entries[name] = Entry(made_from, content)
        if held is not None and held.content == content and present:
            self.unchanged += 1
            return
        _write(self.out, name, text)
        self.written += 1

    def remove_others(self) -> int:
        """Remove the pages the old manifest names that this site has no more."""
        removed = 0
        for name in sorted(set(self.old) - set(self.entries)):
            path = self.out / name
            if _PAGE.match(name) and path.is_file() and not path.is_symlink():
                try:
                    path.unlink()
                except OSError as exc:
                    raise UserError(f"cannot remove the old page {path}: {exc.strerror}"
                                    ) from None
                removed += 1
        return removed


def _write(out: Path, name: str, text: str) -> None:
    """Write a file of the site whole or not at all (a reader never sees half a page)."""
    path = out / name
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".publish-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogatepass"))
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)


def _hash(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
