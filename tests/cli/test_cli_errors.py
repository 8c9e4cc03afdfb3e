"""Bad input: one line on stderr, a distinct exit code, no traceback, the store untouched."""

import os
import subprocess
import sys

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_DEVICE, EXIT_STORE, EXIT_USAGE


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("accelbench: error: ")
    assert "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "--bench", "nosuch"], "unknown benchmark 'nosuch'"),
        (["run", "--suite", "enormous"], "unknown suite 'enormous'"),
        (["run", "--dtype", "fp128"], "unknown dtype 'fp128'"),
        (["run", "--device", "tpu"], "unknown device 'tpu'"),
        (["run", "--device", "rocm"], "ROCm GPUs are 'cuda' devices"),
        (["run", "--device", "cuda:x"], "invalid device index"),
        (["run", "--bench", "gemm", "-p", "shape=12x"], "shape"),
        (["run", "--bench", "gemm", "-p", "shape"], "--param expects NAME=VALUE"),
        (["run", "--bench", "memory", "-p", "size_mib=-4"], "below 1"),
        (["run", "--bench", "gemm", "-p", "nosuch=1"], "no selected benchmark has a parameter"),
        (["run", "--max-time", "0"], "--max-time must be positive"),
        (["run", "--target-ci", "150"], "--target-ci"),
        (["run", "--max-time", "soon"], "invalid float value"),
        (["nosuchcommand"], "invalid choice"),
        (["list", "--family", "nosuch"], "unknown family"),
        (["runs", "--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_bad_arguments(argv, fragment, capsys, store_path):
    assert main(argv) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not store_path.exists(), "nothing may be created for a refused command"


def test_missing_store_for_reading_commands(capsys, store_path):
    for argv in (["runs"], ["show"], ["export"], ["report"]):
        assert main(argv) == EXIT_STORE
        assert "no result store" in _one_line_error(capsys)
    assert not store_path.exists()


@pytest.mark.parametrize(
    "content",
    [b"these are my notes, not a database\n", bytes(range(256)) * 64],
)
def test_foreign_store_file_is_refused_and_untouched(content, tmp_path, capsys):
    path = tmp_path / "notes.sqlite"
    path.write_bytes(content)
    before = os.stat(path).st_mtime_ns
    for argv in (["runs", "--store", str(path)],
                 ["run", "--bench", "launch", "--store", str(path)]):
        assert main(argv) == EXIT_STORE
        assert str(path) in _one_line_error(capsys)
    assert path.read_bytes() == content
    assert os.stat(path).st_mtime_ns == before


def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path, capsys):
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("create table invoices (id integer primary key, total real)")
        db.execute("insert into invoices values (1, 9.5)")
    db.close()
    content = path.read_bytes()
    assert main(["runs", "--store", str(path)]) == EXIT_STORE
    _one_line_error(capsys)
    assert path.read_bytes() == content


def test_unknown_run_id(capsys, store_path):
    from accelbench.store import Store

    Store.open(store_path).close()
    assert main(["show", "nosuchrun"]) == EXIT_USAGE
    assert "nosuchrun" in _one_line_error(capsys)


def test_unavailable_device_has_its_own_exit_code(capsys, store_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["run", "--bench", "launch", "--device", "cuda"]) == EXIT_DEVICE
    assert "cuda" in _one_line_error(capsys)


def test_console_script_reports_errors_without_traceback(store_path):
    result = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--bench", "nosuch"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == EXIT_USAGE
    assert result.stderr.strip().startswith("accelbench: error: unknown benchmark")
    assert "Traceback" not in result.stderr


def test_an_unwritable_report_is_refused_before_anything_is_measured(tmp_path, capsys,
                                                                      store_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    argv = ["run", "--bench", "launch"]
    assert main([*argv, "--report", str(folder)]) == EXIT_USAGE
    assert "is a folder" in _one_line_error(capsys)
    in_a_file = tmp_path / "a-file"
    in_a_file.write_text("")
    assert main([*argv, "--report", str(in_a_file / "run.html")]) == EXIT_USAGE
    assert "is not a folder" in _one_line_error(capsys)
    if os.geteuid() != 0:  # root writes anywhere
        folder.chmod(0o500)
        try:
            assert main([*argv, "--report", str(folder / "new" / "run.md")]) == EXIT_USAGE
            assert "not writable" in _one_line_error(capsys)
        finally:
            folder.chmod(0o700)
    assert not store_path.exists(), "nothing may be measured or stored"
