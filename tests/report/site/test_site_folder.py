"""The site's folder is the only place publishing writes or removes: a link inside it is
never followed, an old page is removed only while it is what publishing wrote, and a
publish stopped halfway (an error, SIGKILL) leaves a site the next publish finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from site_fleet import fill, fleet_runs

from accelbench.cli.main import main
from accelbench.errors import EXIT_USAGE
from accelbench.report.site import MANIFEST, publish
from accelbench.report.site import render as site_render
from accelbench.store import Store


def _stores(folder: Path) -> tuple[Path, Path]:
    """A store of 12 runs of two nodes, and one of 3 of its runs (none of its newest)."""
    runs = [r for r in fleet_runs() if r.record.host in ("n01", "n02")][:12]
    big, small = folder / "big.sqlite", folder / "small.sqlite"
    fill(big, runs)
    oldest = sorted(runs, key=lambda r: r.record.started_at)[:3]
    fill(small, oldest)
    return big, small


def _ids(store_path: Path) -> list[str]:
    with Store.open(store_path, create=False) as store:
        return [r.id for r in store.list_runs()]


def _pages(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("*.html")}


def _one_line(err: str, fragment: str) -> None:
    assert err.startswith("accelbench: error: ") and err.count("\n") == 1, err
    assert fragment in err, err


def test_a_link_inside_the_site_is_never_followed(tmp_path, capsys) -> None:
    big, _ = _stores(tmp_path)
    out = tmp_path / "site"
    assert main(["publish", "--store", str(big), "-o", str(out)]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.html").write_text("mine")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["pages"]["runs/keep.html"] = {"input": "0" * 64, "content": "0" * 64}
    (out / MANIFEST).write_text(json.dumps(manifest))
    for sub in ("runs", "cases"):
        kept = tmp_path / f"{sub}-moved"
        (out / sub).rename(kept)
        (out / sub).symlink_to(elsewhere)
        capsys.readouterr()
        assert main(["publish", "--store", str(big), "-o", str(out)]) == EXIT_USAGE
        _one_line(capsys.readouterr().err, "is a symbolic link")
        assert sorted(os.listdir(elsewhere)) == ["keep.html"]
        assert (elsewhere / "keep.html").read_text() == "mine"
        (out / sub).unlink()
        kept.rename(out / sub)
    # A page that is a link is replaced by the page, and what it pointed to is left alone.
    outside = tmp_path / "outside.html"
    outside.write_text("mine")
    (out / "fleet.html").unlink()
    (out / "fleet.html").symlink_to(outside)
    assert main(["publish", "--store", str(big), "-o", str(out)]) == 0
    assert outside.read_text() == "mine" and not (out / "fleet.html").is_symlink()


def test_an_old_page_is_removed_only_while_it_is_what_publishing_wrote(tmp_path,
                                                                       capsys) -> None:
    big, small = _stores(tmp_path)
    out = tmp_path / "site"
    with Store.open(big, create=False) as store:
        publish(store, out)
    gone = sorted(set(_ids(big)) - set(_ids(small)))
    edited = out / "runs" / f"{gone[0]}.html"
    edited.write_text(edited.read_text() + "<!-- my notes -->")
    # A name the manifest holds (a forged or an old one) that publishing never wrote.
    (out / "runs" / "keep.html").write_text("mine")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["pages"]["runs/keep.html"] = {"input": "1" * 64, "content": "2" * 64}
    (out / MANIFEST).write_text(json.dumps(manifest))

    assert main(["publish", "--store", str(small), "-o", str(out)]) == 0
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and f", {len(gone) - 1} removed; 2 old page(s) left" in line
    assert "runs/keep.html" in line and f"runs/{gone[0]}.html" in line
    assert (out / "runs" / "keep.html").read_text() == "mine"
    assert edited.read_text().endswith("<!-- my notes -->")
    assert {p.stem for p in (out / "runs").glob("*.html")} == {*_ids(small), "keep", gone[0]}
    # They are named once: the new manifest holds neither.
    assert main(["publish", "--store", str(small), "-o", str(out)]) == 0
    assert "left" not in capsys.readouterr().out


def test_a_publish_stopped_halfway_is_finished_by_the_next(tmp_path, monkeypatch) -> None:
    big, small = _stores(tmp_path)
    first = _ids(big)[0]  # the first run's report written
    assert first not in _ids(small)
    real = site_render.render_run
    calls = []

    def fail_second(*args: object, **kwargs: object) -> str:
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("stopped")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    out = tmp_path / "site"
    monkeypatch.setattr(site_render, "render_run", fail_second)
    with Store.open(big, create=False) as store, pytest.raises(RuntimeError):
        publish(store, out)
    monkeypatch.setattr(site_render, "render_run", real)
    assert (out / "runs" / f"{first}.html").is_file()

    with Store.open(small, create=False) as store:
        done = publish(store, out)
    assert done.removed == 1  # the page the stopped publish wrote, from its journal
    clean = tmp_path / "clean"
    with Store.open(small, create=False) as store:
        publish(store, clean)
    assert _pages(out) == _pages(clean)
    assert sorted(os.listdir(out)) == sorted(os.listdir(clean))  # no journal left


def test_a_folder_holding_only_a_file_being_written_is_no_folder_of_the_user(
        tmp_path) -> None:
    """A publish killed while it wrote the manifest of a new site leaves only that."""
    _, small = _stores(tmp_path)
    out = tmp_path / "site"
    out.mkdir()
    (out / ".publish-0123abcd.tmp").write_text("{")
    assert main(["publish", "--store", str(small), "-o", str(out)]) == 0


@pytest.mark.slow
def test_a_publish_killed_with_sigkill_is_finished_by_the_next(tmp_path, capsys) -> None:
    big, _ = _stores(tmp_path)
    out = tmp_path / "site"
    script = textwrap.dedent("""
        import os, signal, sys
        from accelbench.report.site import render
        real, calls = render.render_run, []
        def render_run(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        render.render_run = render_run
        from accelbench.cli.main import main
        sys.exit(main(sys.argv[1:]))
    """)
    killed = subprocess.run([sys.executable, "-c", script, "publish", "--store", str(big),
                             "-o", str(out)], capture_output=True, timeout=300, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(list((out / "runs").glob("*.html"))) == 2

    assert main(["publish", "--store", str(big), "-o", str(out)]) == 0
    line = capsys.readouterr().out
    assert line.startswith(f"Site {out}: ") and "removed" not in line
    assert {p.stem for p in (out / "runs").glob("*.html")} == set(_ids(big))
    assert main(["publish", "--store", str(big), "-o", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"Site {out}: 0 pages written")


def test_a_path_the_system_refuses_is_one_line(tmp_path, capsys) -> None:
    _, small = _stores(tmp_path)
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    for out, fragment in ((tmp_path / ("a" * 5000), "File name too long"),
                          (a_file / "site", "Not a directory")):
        capsys.readouterr()
        assert main(["publish", "--store", str(small), "-o", str(out)]) == EXIT_USAGE
        _one_line(capsys.readouterr().err, fragment)
    assert a_file.read_text() == "mine"
