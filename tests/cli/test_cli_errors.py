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
        (["run", "--max-time", "0"], "--max-time: expected a finite number of seconds above 0"),
        (["run", "--target-ci", "150"], "--target-ci"),
        (["run", "--max-time", "soon"], "got 'soon'"),
        (["nosuchcommand"], "invalid choice"),
        (["list", "--family", "nosuch"], "unknown family"),
        (["runs", "--limit", "0"], "--limit: expected a whole number of at least 1, got '0'"),
        (["run", "--telemetry-interval", "0"], "--telemetry-interval: expected a finite"),
        (["run", "--telemetry-interval", "nan"], "--telemetry-interval: expected a finite"),
        (["run", "--telemetry-source", "rapl9"], "unknown telemetry source 'rapl9'"),
        (["run", "--no-telemetry", "--telemetry-interval", "1"], "--no-telemetry leaves"),
    ],
)
def test_bad_arguments(argv, fragment, capsys, store_path):
    assert main(argv) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not store_path.exists(), "nothing may be created for a refused command"


_SECONDS = "expected a finite number of seconds above 0"
_PERCENT = "expected a percentage"
_COUNT = "expected a whole number of at least"
_NAME = "expected a name, got ''"
_NAMES = "expected a name or comma-separated names"
_PATH = "expected a path, got ''"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        # A NaN passes every `<= 0` check: a NaN timeout never times out.
        (["run", "--max-time", "nan"], f"--max-time: {_SECONDS} and at most 1e+07, got 'nan'"),
        (["run", "--max-time", "inf"], f"--max-time: {_SECONDS}"),
        (["run", "--max-time", "1e999"], f"--max-time: {_SECONDS}"),
        (["run", "--max-time", "-1"], f"--max-time: {_SECONDS}"),
        (["run", "--timeout", "nan"], f"--timeout: {_SECONDS}"),
        (["run", "--timeout", "1e300"], f"--timeout: {_SECONDS}"),
        (["run", "--wait-quiet", "NaN"], f"--wait-quiet: {_SECONDS}"),
        (["run", "--target-ci", "nan"], f"--target-ci: {_PERCENT} above 0 and below 100"),
        (["run", "--target-ci", "0"], f"--target-ci: {_PERCENT}"),
        (["run", "--threads", "2.5"], f"--threads: {_COUNT} 1, got '2.5'"),
        (["run", "--threads", "nan"], f"--threads: {_COUNT} 1"),
        (["run", "--nproc-per-node", "0"], f"--nproc-per-node: {_COUNT} 1"),
        (["run", "--bench", "memory", "-p", "size_mib=nan"], "size_mib='nan' is not a valid int"),
        (["compare", "a", "b", "--min-effect", "nan"], f"--min-effect: {_PERCENT}"),
        (["compare", "a", "b", "--alpha", "nan"], "--alpha: expected a probability"),
        (["compare", "a", "b", "--alpha", "1"], "--alpha: expected a probability"),
        (["compare", "a", "b", "--fail-on-regression", "inf"], "--fail-on-regression: "),
        (["history", "gemm", "--limit", "1"], f"--limit: {_COUNT} 2"),
        (["history", "gemm", "--min-effect=-inf"], f"--min-effect: {_PERCENT}"),
        (["runs", "--limit", "nan"], f"--limit: {_COUNT} 1"),
        (["runs", "--limit", str(2**63)], "--limit: expected a whole number of at most"),
        (["report", "--min-effect", "nan"], f"--min-effect: {_PERCENT}"),
        (["profile", "gemm", "--steps", "0"], f"--steps: {_COUNT} 1"),
        (["profile", "gemm", "--warmup", "-1"], f"--warmup: {_COUNT} 0"),
        (["profile", "gemm", "--wait", "nan"], f"--wait: {_COUNT} 0"),
        (["profile", "gemm", "--nproc-per-node", "0"], f"--nproc-per-node: {_COUNT} 1"),
        # An empty name is a mistake, not "everything" (or the default).
        (["run", "--bench", ""], f"--bench: {_NAMES}, got ''"),
        (["run", "--bench", "gemm,"], f"--bench: {_NAMES}, got 'gemm,'"),
        (["run", "--bench", "gemm", " "], f"--bench: {_NAMES}"),
        (["run", "--suite", ""], f"--suite: {_NAME}"),
        (["run", "--dtype", ""], f"--dtype: {_NAMES}"),
        (["run", "--dtype", "fp16,,bf16"], f"--dtype: {_NAMES}"),
        (["run", "--device", ""], f"--device: {_NAME}"),
        (["run", "--report", ""], f"--report: {_PATH}"),
        (["run", "--store", ""], f"--store: {_PATH}"),
        (["runs", "--store", " "], "--store: expected a path"),
        (["profile", ""], f"BENCH: {_NAME}"),
        (["profile", "gemm", "--dtype", ""], f"--dtype: {_NAME}"),
        (["generations", "--model", ""], f"--model: {_NAMES}"),
        (["generations", "--dtype", "fp16,"], f"--dtype: {_NAMES}"),
        (["generations", "--family", ""], f"--family: {_NAME}"),
        (["generations", "--chart", ""], f"--chart: {_PATH}"),
        (["compare", "a", "b", "--case", ""], f"--case: {_NAME}"),
        (["history", ""], f"CASE: {_NAME}"),
        (["history", "gemm", "--stack", ""], f"--stack: {_NAME}"),
        (["list", "--family", ""], f"--family: {_NAME}"),
        (["diagnose", "--baseline", ""], f"--baseline: {_NAME}"),
        (["diagnose", "--rules", ""], f"--rules: {_PATH}"),
        (["baseline", "-o", ""], f"--output: {_PATH}"),
        (["export", "-o", ""], f"--output: {_PATH}"),
        (["merge", "--into", "", "a.sqlite"], f"--into: {_PATH}"),
        (["merge", ""], f"SOURCE: {_PATH}"),
    ],
)
def test_values_that_are_not_numbers_or_names(argv, fragment, capsys, store_path):
    assert main(argv) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not store_path.exists(), "nothing may be created for a refused command"


# Every command that only reads the store (merge reads its sources the same way).
READ_COMMANDS = (["runs"], ["show"], ["export"], ["report"], ["compare", "latest", "latest"],
                 ["history", "gemm"], ["generations"], ["diagnose"],
                 ["baseline", "-o", "baseline.json"])


def test_missing_store_for_reading_commands(capsys, store_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in READ_COMMANDS:
        assert main(argv) == EXIT_STORE, argv
        assert "no result store" in _one_line_error(capsys)
    assert not store_path.parent.exists()
    assert not (tmp_path / "baseline.json").exists()


@pytest.mark.parametrize("content", [b"", None])
def test_read_commands_leave_an_empty_file_as_it_is(content, tmp_path, capsys, monkeypatch):
    import sqlite3

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "empty.sqlite"
    if content is None:  # a SQLite database without any table
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA user_version = 1")
        db.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes(), os.stat(path).st_mtime_ns
    for argv in (*READ_COMMANDS, ["merge", str(path), "--into", "merged.sqlite"]):
        assert main([*argv, "--store", str(path)] if argv[0] != "merge" else argv) == EXIT_STORE
        assert f"{path} is empty: " in _one_line_error(capsys)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]


def test_a_fifo_as_store_is_refused_at_once(tmp_path, capsys):
    import signal

    fifo = tmp_path / "results.sqlite"
    os.mkfifo(fifo)

    def expire(signum, frame):
        raise TimeoutError("the FIFO was opened: nothing writes to it")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    try:
        for argv in (["runs", "--store", str(fifo)],
                     ["run", "--bench", "launch", "--no-report", "--store", str(fifo)],
                     ["merge", str(fifo), "--into", str(tmp_path / "merged.sqlite")]):
            assert main(argv) == EXIT_STORE
            assert f"{fifo} is a FIFO, not a regular file" in _one_line_error(capsys)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


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


@pytest.mark.slow
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
            assert "cannot be written" in _one_line_error(capsys)
        finally:
            folder.chmod(0o700)
    # A file system that refuses what the permission bits allow (even to root).
    assert main([*argv, "--report", "/proc/accelbench-report.html"]) == EXIT_USAGE
    assert "cannot be written" in _one_line_error(capsys)
    # A name longer than the system takes (its existence cannot even be asked).
    assert main([*argv, "--report", str(tmp_path / ("r" * 5000))]) == EXIT_USAGE
    assert "cannot be written" in _one_line_error(capsys)
    assert not store_path.exists(), "nothing may be measured or stored"


def test_a_report_path_that_is_not_a_regular_file_is_refused_unopened(tmp_path, capsys,
                                                                       store_path):
    """Opening a FIFO with no reader blocks forever: it is refused from its file type."""
    import signal

    fifo = tmp_path / "report.html"
    os.mkfifo(fifo)

    def hung(*_):
        raise AssertionError("the FIFO was opened")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        assert main(["run", "--bench", "launch", "--report", str(fifo)]) == EXIT_USAGE
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert _one_line_error(capsys) == f"accelbench: error: --report {fifo}: is not a regular file"
    assert not store_path.exists(), "nothing may be measured or stored"


def _store_with_a_run(path) -> None:
    from accelbench.store import Store

    with Store.open(path) as store:
        store.begin_run(fingerprint={}, fingerprint_id="fp", generation_key="cpu/x86_64",
                        device="cpu", suite="quick", argv=["run"], host="h",
                        accelbench_version="0")


@pytest.mark.parametrize(
    ("command", "redirect"),
    [("runs", ">&-"), ("runs --json", ">&-"), ("show --json", ">&-"), ("export", ">&-"),
     ("list --json", ">&-"), ("runs", "1</dev/null"), ("runs --json", "1</dev/null")],
)
@pytest.mark.slow
def test_output_nobody_can_read_is_dropped_quietly(command, redirect, store_path):
    """stdout closed (`>&-`) or open for reading only: the command does its work and
    exits 0, as when the reader of a pipe went away."""
    _store_with_a_run(store_path)
    result = subprocess.run(
        ["bash", "-c", f'"$0" -m accelbench {command} {redirect}', sys.executable],
        capture_output=True, text=True, timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")


def test_errors_with_stderr_closed_keep_their_exit_code_and_stay_off_stdout(store_path):
    result = subprocess.run(
        ["bash", "-c", '"$0" -m accelbench runs --limit 0 2>&-', sys.executable],
        capture_output=True, text=True, timeout=120,
    )
    assert (result.returncode, result.stdout) == (EXIT_USAGE, "")


def test_a_store_another_program_wrote_fails_in_one_line(store_path, capsys, monkeypatch):
    """A shared store edited by hand or by another program may hold what no reader
    expects: the command fails in one line with its own exit code, no traceback."""
    import sqlite3

    from accelbench.cli.main import DEBUG_ENV
    from accelbench.errors import EXIT_INTERNAL

    _store_with_a_run(store_path)
    with sqlite3.connect(store_path) as conn:
        conn.execute("UPDATE fingerprints SET data = ?",
                     ('{"device": {"name": "x", "memory_bytes": "lots"}}',))
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert main(["show", "--env", "--store", str(store_path)]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("accelbench: error: unexpected ")
    monkeypatch.setenv(DEBUG_ENV, "1")
    with pytest.raises(TypeError):
        main(["show", "--env", "--store", str(store_path)])
