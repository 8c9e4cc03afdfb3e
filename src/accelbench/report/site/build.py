"""Writing the site into a folder, again and again: only the pages whose content changed.

The folder keeps a manifest (`.accelbench-site.json`): each page it wrote, the hash of
what the page was made from and the hash of its content. Publishing again renders a
page only when what it is made from changed (a run's report: its id, status, number of
measurements and the accelbench version, so that the reports of thousands of finished
runs are not rendered again), writes it only when its content changed, and removes the
pages of runs, cases and GPUs the store no longer holds.

Nothing outside the folder is ever written or removed, and nothing of the user's in it:
- every file is reached from the folder's own descriptor without following a symbolic
  link, and a `runs/`, `cases/` or `gpus/` that is a link (or no folder) is refused;
- a page is removed only when its content is still what publishing wrote (its hash in
  the manifest); one changed since, or a name the manifest should not hold, is left
  alone and reported;
- the manifest is read as untrusted: one that cannot be read as written means a full
  rebuild, and only names that are pages of a site (index.html, runs/ID.html, ...) count;
- a folder that is neither empty nor a site is refused.

A publish that is stopped halfway (killed, out of space) leaves a site the next one
finishes: the manifest is written first, marked as not complete, and each page written
is then recorded, with its hashes, in a journal beside it (`.accelbench-site.journal`,
a JSON line per page) that the next publish reads; the complete manifest is written
last and the journal removed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import IO, Any, BinaryIO

from accelbench.core.measurement import Measurement
from accelbench.errors import UserError
from accelbench.report.site.model import run_href
from accelbench.report.site.pages import DEFAULT_THRESHOLD, site_pages
from accelbench.store import RunRecord, Store, StoredExplanation, StoredRun
from accelbench.version import __version__

MANIFEST = ".accelbench-site.json"
JOURNAL = ".accelbench-site.journal"
FORMAT = "accelbench-site"
# Manifest format history:
#   1: {"format", "format_version", "accelbench_version",
#       "pages": {PATH: {"input": SHA256, "content": SHA256}}}
#   2: adds "complete": false while a publish is under way; the pages it wrote are then
#      in the journal, a line {"page": PATH, "input": SHA256, "content": SHA256} each
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_MANIFEST_BYTES = 64 << 20
_TEMPORARY = re.compile(r"^\.publish-[0-9a-z_]+\.tmp$")  # a file being written
# What a page of a site is called: only such files are ever removed.
_PAGE = re.compile(r"^(?:[a-z]+\.html|runs/[A-Za-z0-9][A-Za-z0-9._-]*\.html"
                   r"|cases/[A-Za-z0-9][A-Za-z0-9._-]*\.html"
                   r"|gpus/[A-Za-z0-9][A-Za-z0-9._-]*\.html)$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_SUBFOLDERS = ("runs", "cases", "gpus")
_SHOWN = 3  # names of pages left alone that the summary shows


@dataclass(frozen=True)
class Published:
    folder: Path
    written: int
    unchanged: int
    removed: int
    rebuilt: bool  # the manifest was missing or could not be read
    kept: tuple[str, ...] = ()  # old pages not removed: changed since they were written

    def summary(self) -> str:
        removed = f", {self.removed} removed" if self.removed else ""
        kept = ""
        if self.kept:
            names = ", ".join(self.kept[:_SHOWN]) + (", ..." if len(self.kept) > _SHOWN else "")
            kept = (f"; {len(self.kept)} old page(s) left as they are, changed since "
                    f"publishing wrote them: {names}")
        return f"{self.written} pages written, {self.unchanged} unchanged{removed}{kept}"


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
    with _Folder(out) as site:
        old = read_manifest(out, site)
        records = store.list_runs()
        runs = load_runs(store, records)
        digest = templates_digest()
        # Written first: a publish stopped from here on leaves a site the next finishes.
        write_manifest(out, old or {}, complete=False, site=site)
        with site.journal() as journal:
            writer = _Writer(site, old or {}, journal)
            explained = store.explanations()
            for page in site_pages(runs, store.name, threshold, explained,
                                   gpus=store.gpus(), run_gpus=store.run_gpus()):
                made_from = _hash(f"{digest}\n{page!r}")
                writer.page(page.path, made_from, functools.partial(render_page, page))
            for record in records:
                made_from = _hash(f"{__version__}\n{record.id}\n{record.status}\n"
                                  f"{record.n_ok + record.n_failed + record.n_skipped}\n"
                                  f"{_explained(explained, record.id)}")
                writer.page(run_href(record.id), made_from,
                            functools.partial(_run_page, store, record))
            removed, kept = writer.remove_others()
            write_manifest(out, writer.entries, site=site)
        site.remove(JOURNAL)
    return Published(out, writer.written, writer.unchanged, removed, old is None, kept)


def _explained(explanations: Sequence[StoredExplanation], run_id: str) -> list[int]:
    """The explanations a run's page shows: a new one makes the page be written again."""
    return [e.id for e in explanations if run_id in (e.run_a, e.run_b)]


def _run_page(store: Store, record: RunRecord) -> str:
    from accelbench.report.site.render import render_run

    return render_run(store.load_run(record.id), store.found_for_run(record.id))


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
    mix the site into them, or (removing its old pages) delete them. A path the system
    refuses (too long, a file where a folder should be) is refused here too."""
    try:
        info = out.stat()
    except (FileNotFoundError, NotADirectoryError) as exc:
        if isinstance(exc, NotADirectoryError) or out.is_symlink():
            raise UserError(f"cannot write the site into {out}: "
                            f"{exc.strerror or exc}") from None
        return
    except OSError as exc:
        raise UserError(f"cannot use {out} as the site's folder: {exc.strerror or exc}"
                        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise UserError(f"{out} is not a folder: give -o a new or empty folder, or a site "
                        "published before")
    try:
        names = [n for n in os.listdir(out) if not _TEMPORARY.match(n)]
    except OSError as exc:
        raise UserError(f"cannot read the folder {out}: {exc.strerror or exc}") from None
    if names and MANIFEST not in names:
        raise UserError(f"{out} is not empty and holds no accelbench site (no {MANIFEST}): "
                        "give -o a new or empty folder, or a site published before")


class _Folder:
    """The site's folder, opened once. Every file in it is reached from the folder's
    descriptor and never through a symbolic link (O_NOFOLLOW, *at() calls), so that a
    link put inside the site cannot send a write or a removal outside it. The folder
    itself may be a link: it is what the user named."""

    def __init__(self, out: Path) -> None:
        self.out = out
        try:
            out.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise UserError(f"cannot write the site into {out}: {exc.strerror or exc}"
                            ) from None
        self._dirs: dict[str, int] = {"": self._fd}
        try:
            for sub in _SUBFOLDERS:  # refused before anything is written
                self._dir(sub, create=False)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> _Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs = {}

    def _dir(self, sub: str, *, create: bool) -> int | None:
        """The descriptor of the subfolder `sub` ("" is the site's folder), None where it
        is missing and not to be created."""
        if sub in self._dirs:
            return self._dirs[sub]
        path = self.out / sub
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(sub, 0o755, dir_fd=self._fd)
            fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self._fd)
        except FileNotFoundError:
            if create:
                raise UserError(f"cannot write the site into {self.out}: it was removed "
                                "while publishing") from None
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UserError(f"{path} is a symbolic link or not a folder: publish writes "
                                f"only inside {self.out}; remove it, or give -o another "
                                "folder") from None
            raise UserError(f"cannot use {path}: {exc.strerror or exc}") from None
        self._dirs[sub] = fd
        return fd

    def _place(self, name: str, *, create: bool = False) -> tuple[int | None, str]:
        sub, _, base = name.rpartition("/")
        return self._dir(sub, create=create), base

    def write(self, name: str, data: bytes) -> None:
        """Write the file `name` whole or not at all (a reader never sees half a page):
        written beside it, then moved into place (replacing a link, never following it)."""
        path = self.out / name
        temporary: str | None = None
        try:
            folder, base = self._place(name, create=True)
            assert folder is not None
            name_then = f".publish-{secrets.token_hex(8)}.tmp"
            fd = os.open(name_then, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o644, dir_fd=folder)
            temporary = name_then
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), 0o644)
                handle.write(data)
            os.replace(temporary, base, src_dir_fd=folder, dst_dir_fd=folder)
            temporary = None
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)

    def is_file(self, name: str) -> bool:
        """Whether `name` is a regular file (not a link to one)."""
        try:
            folder, base = self._place(name)
            return folder is not None and stat.S_ISREG(
                os.stat(base, dir_fd=folder, follow_symlinks=False).st_mode)
        except (OSError, UserError):
            return False

    def read(self, name: str, limit: int) -> bytes | None:
        """The content of the regular file `name` (never through a link, never a FIFO),
        None where there is none or it is larger than `limit` bytes."""
        with self._regular(name) as handle:
            if handle is None:
                return None
            data = handle.read(limit + 1)
        return data if len(data) <= limit else None

    def content_hash(self, name: str) -> str | None:
        """The hash of the regular file `name`'s content, None where there is none."""
        digest = sha256()
        with self._regular(name) as handle:
            if handle is None:
                return None
            for chunk in iter(functools.partial(handle.read, 1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()

    @contextlib.contextmanager
    def _regular(self, name: str) -> Iterator[BinaryIO | None]:
        """The regular file `name`, open for reading (never through a link, never a
        FIFO); None where there is none."""
        try:
            folder, base = self._place(name)
            fd = None if folder is None else os.open(
                base, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except (OSError, UserError):
            fd = None
        if fd is None:
            yield None
            return
        with os.fdopen(fd, "rb") as handle:
            yield handle if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) else None

    def remove(self, name: str) -> None:
        path = self.out / name
        folder, base = self._place(name)
        if folder is None:
            return
        try:
            os.unlink(base, dir_fd=folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise UserError(f"cannot remove {path}: {exc.strerror or exc}") from None

    def journal(self) -> _Journal:
        try:
            fd = os.open(JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                         | os.O_NOFOLLOW, 0o644, dir_fd=self._fd)
        except OSError as exc:
            raise UserError(f"cannot write {self.out / JOURNAL}: {exc.strerror or exc}"
                            ) from None
        return _Journal(os.fdopen(fd, "w", encoding="utf-8"), self.out / JOURNAL)


class _Journal:
    """The pages a publish under way has written, a line each, as they are written."""

    def __init__(self, handle: IO[str], path: Path) -> None:
        self._handle = handle
        self._path = path

    def __enter__(self) -> _Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def record(self, name: str, entry: Entry) -> None:
        try:
            self._handle.write(json.dumps({"page": name, "input": entry.input,
                                           "content": entry.content}) + "\n")
            self._handle.flush()  # in the kernel: a killed process loses nothing
        except OSError as exc:
            raise UserError(f"cannot write {self._path}: {exc.strerror or exc}") from None


def read_manifest(out: Path, site: _Folder | None = None) -> dict[str, Entry] | None:
    """The pages the manifest names (with those the journal of a publish that did not
    finish adds), or None where there is none or it cannot be read as this accelbench
    writes it (the site is then built again in full)."""
    if site is None:
        with _Folder(out) as opened:
            return read_manifest(out, opened)
    from accelbench.core.untrusted import parse_json

    text = site.read(MANIFEST, _MANIFEST_BYTES)
    if text is None:
        return None
    try:
        data = parse_json(text, "site manifest")
    except UserError:
        return None
    if not (isinstance(data, dict) and data.get("format") == FORMAT
            and data.get("format_version") in _READABLE_VERSIONS
            and isinstance(data.get("pages"), dict)
            and isinstance(data.get("complete", True), bool)):
        return None
    pages: dict[str, Entry] = {}
    for name, entry in data["pages"].items():
        parsed = _entry(name, entry)
        if parsed is None:
            return None
        pages[name] = parsed
    if not data.get("complete", True):
        pages.update(_journal_entries(site.read(JOURNAL, _MANIFEST_BYTES) or b""))
    return pages


def _entry(name: Any, entry: Any) -> Entry | None:
    """A page of the manifest, or None where it is not one this accelbench writes: a
    name with `..`, an absolute path, anything but a page of a site."""
    if not (isinstance(name, str) and _PAGE.match(name) and isinstance(entry, dict)
            and all(isinstance(entry.get(k), str) and _HASH.match(entry[k])
                    for k in ("input", "content"))):
        return None
    return Entry(entry["input"], entry["content"])


def _journal_entries(data: bytes) -> Iterable[tuple[str, Entry]]:
    """The pages the journal records; a line that cannot be read (the last one, cut by a
    kill) is passed over."""
    for line in data.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            name = item.get("page")
            entry = _entry(name, item)
            if isinstance(name, str) and entry is not None:
                yield name, entry


def write_manifest(out: Path, entries: dict[str, Entry], *, complete: bool = True,
                   site: _Folder | None = None) -> None:
    data: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "accelbench_version": __version__,
        "complete": complete,
        "pages": {name: {"input": e.input, "content": e.content}
                  for name, e in sorted(entries.items())},
    }
    text = (json.dumps(data, indent=1) + "\n").encode("utf-8")
    if site is None:
        with _Folder(out) as opened:
            opened.write(MANIFEST, text)
    else:
        site.write(MANIFEST, text)


class _Writer:
    """Renders and writes the pages that changed, and counts."""

    def __init__(self, site: _Folder, old: dict[str, Entry], journal: _Journal) -> None:
        self.site = site
        self.old = old
        self.journal = journal
        self.entries: dict[str, Entry] = {}
        self.written = 0
        self.unchanged = 0

    def page(self, name: str, made_from: str, render: Callable[[], str]) -> None:
        if name in self.entries:  # two run ids that differ only where a file name cannot
            raise UserError(f"two pages of the site would be {name}: the store holds run "
                            "ids that a file name cannot tell apart")
        held = self.old.get(name)
        present = self.site.is_file(name)
        if held is not None and held.input == made_from and present:
            self.entries[name] = held
            self.unchanged += 1
            return
        data = render().encode("utf-8", "surrogatepass")
        entry = Entry(made_from, sha256(data).hexdigest())
        self.entries[name] = entry
        if held is not None and held.content == entry.content and present:
            self.unchanged += 1
            return
        self.site.write(name, data)
        self.journal.record(name, entry)
        self.written += 1

    def remove_others(self) -> tuple[int, tuple[str, ...]]:
        """Remove the pages the old manifest names that this site has no more, where
        each is still what publishing wrote; the number removed, and the names of those
        left alone as changed since."""
        removed = 0
        kept: list[str] = []
        for name in sorted(set(self.old) - set(self.entries)):
            if not _PAGE.match(name):
                continue
            found = self.site.content_hash(name)
            if found is None:
                continue  # gone, or not a file (a link, a folder): nothing of ours
            if found != self.old[name].content:
                kept.append(name)
                continue
            self.site.remove(name)
            removed += 1
        return removed, tuple(kept)


def _hash(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
