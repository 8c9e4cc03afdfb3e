"""Publishing again: only the pages that changed are written, runs' reports are not
rendered again, pages of what left the store are removed, a manifest that cannot be read
means a full rebuild; a folder that is not a site is refused; the site is served on the
loopback only; a PostgreSQL password never reaches a page or the output."""

from __future__ import annotations

import os
import threading
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

from site_fleet import DAY, fill, fleet_runs

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.errors import EXIT_USAGE
from accelbench.report.site import MANIFEST, publish
from accelbench.report.site import render as site_render
from accelbench.store import Store, StoredRun


def _inodes(site: Path) -> dict[str, int]:
    """Each page and its inode: a page written again (a new file moved into place) gets a
    new one."""
    return {p.relative_to(site).as_posix(): p.stat().st_ino for p in site.rglob("*.html")}


def _later_run(run: StoredRun, n: int) -> StoredRun:
    record = run.record
    started = record.started_at + n * DAY
    measurements = tuple(replace(m, started_at=started) for m in run.measurements)
    return replace(run, record=replace(record, id=f"{record.id[:-4]}{n:04x}",
                                       started_at=started, finished_at=started + 60),
                   measurements=measurements)


def test_publishing_again_writes_only_what_changed(tmp_path, monkeypatch) -> None:
    runs = [r for r in fleet_runs() if r.record.host in ("n01", "n02", "n06")]
    store_path = tmp_path / "results.sqlite"
    fill(store_path, runs)
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        first = publish(store, out)
    before = _inodes(out)
    assert first.written == len(before) and first.unchanged == 0 and not first.removed

    # Nothing new: nothing written, no run's report rendered.
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("a finished run's report was rendered again")

    monkeypatch.setattr(site_render, "render_run", refuse)
    with Store.open(store_path, create=False) as store:
        again = publish(store, out)
    assert (again.written, again.unchanged) == (0, len(before))
    assert _inodes(out) == before

    # One more run of n06: its report is rendered, no other run's is.
    newest_n06 = max((r for r in runs if r.record.host == "n06"),
                     key=lambda r: r.record.started_at)
    added = _later_run(newest_n06, 1)
    fill(store_path, [added])
    rendered: list[str] = []

    def render(run: StoredRun, profiles: object = ()) -> str:
        rendered.append(run.record.id)
        return "<html><body>report</body></html>"

    monkeypatch.setattr(site_render, "render_run", render)
    with Store.open(store_path, create=False) as store:
        third = publish(store, out)
    assert rendered == [added.record.id]
    after = _inodes(out)
    changed = {name for name in after if before.get(name) != after[name]}
    assert third.written == len(changed) and third.unchanged == len(after) - len(changed)
    assert f"runs/{added.record.id}.html" in changed and "index.html" in changed
    assert not {n for n in changed if n.startswith("runs/")} - {f"runs/{added.record.id}.html"}
    assert len(changed) < len(after) // 4


def test_pages_of_runs_and_cases_no_longer_in_the_store_are_removed(tmp_path) -> None:
    runs = fleet_runs()
    big, small = tmp_path / "big.sqlite", tmp_path / "small.sqlite"
    fill(big, [r for r in runs if r.record.host in ("n01", "n02")][:30])
    fill(small, [r for r in runs if r.record.host == "n01"][:5])
    out = tmp_path / "site"
    with Store.open(big, create=False) as store:
        publish(store, out)
    (out / "notes.txt").write_text("mine")  # a file of the user's, not a page
    (out / "runs" / "mine.html").write_text("mine")
    with Store.open(small, create=False) as store:
        done = publish(store, out)
        ids = {r.id for r in store.list_runs()}
    launch = Case.make("launch", "l1", "micro", {"mode": "eager"}, "cuda:0")  # in run 28
    assert not (out / "cases" / f"{launch.key}.html").exists()
    assert done.removed == 30 - 5 + 1
    assert {p.stem for p in (out / "runs").glob("*.html")} == ids | {"mine"}
    assert (out / "notes.txt").read_text() == "mine"


def _small_store(folder: Path) -> Path:
    """Four runs of one node: a quick site to publish."""
    path = folder / "small.sqlite"
    fill(path, [r for r in fleet_runs() if r.record.host == "n01"][:4])
    return path


MANIFESTS = (b"{not json", b"\xff\xfe", b"[]",
             b'{"format": "accelbench-site", "format_version": 1, "pages": {"../x.html": {}}}',
             b'{"format": "accelbench-site", "format_version": 2, "pages": {"/x.html": {}}}',
             b'{"format": "accelbench-site", "format_version": 2, "complete": 0, "pages": {}}')


def test_a_manifest_that_cannot_be_read_means_a_full_rebuild(tmp_path) -> None:
    out = tmp_path / "site"
    with Store.open(_small_store(tmp_path), create=False) as store:
        first = publish(store, out)
        for manifest in MANIFESTS:
            (out / MANIFEST).write_bytes(manifest)
            again = publish(store, out)
            assert again.rebuilt and again.written == first.written and not again.unchanged
            assert publish(store, out).written == 0  # the manifest was written anew


def test_the_command_says_what_it_wrote_on_one_line(tmp_path, capsys) -> None:
    store_path = _small_store(tmp_path)
    out = tmp_path / "site"
    assert main(["publish", "--store", str(store_path), "-o", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()
    assert len(first) == 1 and first[0].endswith(" pages written, 0 unchanged")
    pages = len(list(out.rglob("*.html")))
    assert first[0] == f"Site {out}: {pages} pages written, 0 unchanged"
    assert main(["publish", "--store", str(store_path), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"Site {out}: 0 pages written, {pages} unchanged\n"
    # By default the site goes beside the store.
    assert main(["publish", "--store", str(store_path)]) == 0
    assert capsys.readouterr().out.startswith(f"Site {tmp_path / 'site'}: 0 pages written")


def test_a_folder_that_is_not_a_site_is_refused(tmp_path, capsys) -> None:
    store_path = _small_store(tmp_path)
    a_file = tmp_path / "file.html"
    a_file.write_text("mine")
    full = tmp_path / "docs"
    full.mkdir()
    (full / "index.html").write_text("mine")
    for target, message in ((a_file, "is not a folder"),
                            (full, "is not empty and holds no accelbench site")):
        assert main(["publish", "--store", str(store_path), "-o", str(target)]) == EXIT_USAGE
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0]
    assert a_file.read_text() == "mine" and (full / "index.html").read_text() == "mine"
    assert sorted(os.listdir(full)) == ["index.html"]
    assert main(["publish", "--store", str(store_path), "--port", "0"]) == EXIT_USAGE
    assert "--port" in capsys.readouterr().err
    assert main(["publish", "--store", str(tmp_path / "none.sqlite")]) == 3


def test_an_empty_store_makes_a_site_that_says_no_runs_yet(tmp_path) -> None:
    store_path = tmp_path / "empty.sqlite"
    Store.open(store_path).close()
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        done = publish(store, out)
    index = (out / "index.html").read_text()
    assert "No runs yet" in index and done.written == 7  # the seven site pages
    assert "No runs yet" in (out / "fleet.html").read_text()
    assert "No GPU identities stored yet" in (out / "gpus.html").read_text()


def test_the_site_is_served_on_the_loopback(tmp_path) -> None:
    from accelbench.report.site.serve import LOOPBACK, site_server, url_of

    store_path = tmp_path / "empty.sqlite"
    Store.open(store_path).close()
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        publish(store, out)
    with site_server(out, 0) as server:
        assert server.server_address[0] == LOOPBACK
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            with urllib.request.urlopen(url_of(server) + "index.html", timeout=10) as reply:
                body = reply.read().decode()
        finally:
            server.shutdown()
            thread.join(10)
    assert "No runs yet" in body


def test_a_postgresql_password_never_reaches_the_site(pg_cluster, tmp_path, capsys) -> None:
    import _pgcluster
    from postgres import new_database

    database = new_database(pg_cluster, owner=_pgcluster.PASSWORD_ROLE)
    url = pg_cluster.url(database, _pgcluster.PASSWORD_ROLE, _pgcluster.PASSWORD)
    fill(url, [r for r in fleet_runs() if r.record.host == "n01"][:4])
    out = tmp_path / "site"
    assert main(["publish", "--store", url, "-o", str(out)]) == 0
    printed = "".join(capsys.readouterr())
    secrets = (_pgcluster.PASSWORD, urllib.parse.quote(_pgcluster.PASSWORD, safe=""))
    for text in [printed, *(p.read_text() for p in out.rglob("*") if p.is_file())]:
        assert not any(s in text for s in secrets)
    assert "***" in (out / "index.html").read_text()
