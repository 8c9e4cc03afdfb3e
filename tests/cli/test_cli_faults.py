"""Odd input that once escaped as an unexpected error (exit 70) or a wrong exit code: each
is one line with its documented exit code, and nothing is created or changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_STORE, EXIT_USAGE, UserError
from accelbench.store import Store
from postgres import is_postgres, tables


def _one_line(err: str, fragment: str) -> None:
    assert err.startswith("accelbench: error: ") and err.count("\n") == 1, err
    assert fragment in err, err


def _store_with_runs(path: Path | str, runs: int = 1) -> None:
    with Store.open(path) as store:
        for i in range(runs):
            run_id = store.begin_run(fingerprint={"format_version": 1, "pad": "x" * 4000},
                                     fingerprint_id="fp", generation_key="CPU", device="cpu",
                                     suite="quick", argv=["run"], host=f"h{i}",
                                     accelbench_version="0")
            store.finish_run(run_id, "complete")


def _export_with(tmp_path: Path, mutate) -> Path:
    source = tmp_path / "src.sqlite"
    _store_with_runs(source)
    out = tmp_path / "export.json"
    assert main(["export", "--store", str(source), "-o", str(out)]) == 0
    text = out.read_text()
    out.write_text(mutate(text))
    return out


@pytest.mark.parametrize("where", ["host", "fingerprint key", "argv"])
def test_a_lone_surrogate_in_an_export_is_refused_and_creates_nothing(
        where: str, store_location: str, tmp_path: Path, capsys) -> None:
    def mutate(text: str) -> str:
        data = json.loads(text)
        run = data["runs"][0]
        if where == "host":
            run["run"]["host"] = "h\udc80"
        elif where == "fingerprint key":
            run["fingerprint"]["\ud800"] = 1
        else:
            run["run"]["argv"].append("\udfff")
        return json.dumps(data)  # ASCII: the surrogate as a \\udXXX escape

    export = _export_with(tmp_path, mutate)
    assert "\\udc80" in export.read_text() or "\\ud800" in export.read_text() \
        or "\\udfff" in export.read_text()
    before = tables(store_location) if is_postgres(store_location) else None
    capsys.readouterr()
    assert main(["merge", str(export), "--into", store_location]) == EXIT_STORE
    _one_line(capsys.readouterr().err, "not Unicode (a lone surrogate")
    if is_postgres(store_location):
        assert tables(store_location) == before == []  # the database is left empty
    else:
        assert not Path(store_location).exists()  # no empty store left behind


@pytest.mark.slow
def test_a_merge_refused_by_the_target_leaves_no_new_file(tmp_path: Path, capsys) -> None:
    """A new target is removed again when the merge into it fails (here: a fingerprint
    id bound to another stack in one of two sources)."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _store_with_runs(a)
    with Store.open(b) as store:
        store.begin_run(fingerprint={"format_version": 1, "other": True}, fingerprint_id="fp",
                        generation_key="CPU", device="cpu", suite=None, argv=["run"],
                        host="x", accelbench_version="0")
    target = tmp_path / "new" / "t.sqlite"
    assert main(["merge", str(a), str(b), "--into", str(target)]) == EXIT_STORE
    _one_line(capsys.readouterr().err, "fingerprint")
    assert not target.exists() and not Path(f"{target}-wal").exists()


def test_a_truncated_store_file_is_a_damaged_store(tmp_path: Path, capsys) -> None:
    path = tmp_path / "r.sqlite"
    _store_with_runs(path, runs=30)
    data = path.read_bytes()
    assert len(data) > 8192
    path.write_bytes(data[: len(data) // 2])
    before = path.read_bytes()
    for argv in (["show", "latest"], ["runs"], ["export"], ["report", "latest", "-o", "-"]):
        assert main([*argv, "--store", str(path)]) == EXIT_STORE
        _one_line(capsys.readouterr().err, "is damaged (database disk image is malformed)")
    assert path.read_bytes() == before


@pytest.mark.slow
@pytest.mark.parametrize("command", ["runs", "runs --json", "show latest", "export"])
def test_a_reader_that_goes_away_is_not_an_error(command: str, store_path: Path) -> None:
    """`accelbench runs | head -0`: the pipe closes before anything is read."""
    _store_with_runs(store_path, runs=200)
    done = subprocess.run(["bash", "-c", f'"$0" -m accelbench {command} | head -c 0',
                           sys.executable], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.stderr == ""
    status = subprocess.run(["bash", "-c", f'"$0" -m accelbench {command} | head -c 0; '
                             'echo "${PIPESTATUS[0]}"', sys.executable],
                            capture_output=True, text=True, timeout=120, check=False)
    assert status.stdout.strip() == "0"


@pytest.mark.parametrize("text", ["sqlite:///x.db", "sqlite:x.db", "file:///tmp/x"])
def test_a_refused_url_is_echoed_as_written(text: str, capsys, tmp_path: Path,
                                            monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "--store", text]) == EXIT_USAGE
    _one_line(capsys.readouterr().err, f"store {text!r}:")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("env", "fragment"), [
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc': torchrun sets it to a whole number"),
    ({"WORLD_SIZE": "²"}, "WORLD_SIZE='²'"),
    ({"WORLD_SIZE": "0"}, "of at least 1"),
    ({"WORLD_SIZE": "2", "RANK": "-1"}, "RANK='-1'"),
    ({"WORLD_SIZE": "2", "RANK": "5"}, "do not fit WORLD_SIZE=2"),
])
def test_a_broken_torchrun_environment_is_bad_input(env: dict[str, str], fragment: str,
                                                    monkeypatch, capsys,
                                                    store_path: Path) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["isolate"]) == EXIT_USAGE
    _one_line(capsys.readouterr().err, fragment)
    assert not store_path.exists()


def test_every_torchrun_variable_is_read_as_a_number_or_refused() -> None:
    """What `run` and `profile` under torchrun read when they join the job."""
    from accelbench.runner.distributed import info_from_env

    env = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    info = info_from_env("gloo", env)
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (1, 4, 1, 2)
    for name, value in (("LOCAL_RANK", "x"), ("LOCAL_WORLD_SIZE", "2.0"), ("RANK", " ")):
        with pytest.raises(UserError, match=f"{name}='") as e:
            info_from_env("gloo", {**env, name: value})
        assert e.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize(("argv", "fragment"), [
    (["run", "--device", "cuda:²"], "invalid device index in 'cuda:²'"),
    (["run", "--device", "cuda:٣"], "invalid device index"),
    (["run", "--bench", "gemm", "-p", "shape=bert-base.qkv@²"], "tokens after '@'"),
    (["run", "--bench", "conv", "-p", "shape=n²"], "conv"),
    (["slurm", "status", "²"], "expected a Slurm job id"),
    (["slurm", "status", "12_³"], "expected a Slurm job id"),
    (["runs", "--limit", "²"], "expected a whole number"),
])
def test_a_digit_that_is_not_ascii_is_no_number(argv: list[str], fragment: str, capsys,
                                                store_path: Path) -> None:
    """str.isdigit() takes '²' (and int() refuses it) and int() reads '٣' as 3: a number
    from the user is ASCII digits, or bad input."""
    assert main(argv) == EXIT_USAGE
    _one_line(capsys.readouterr().err, fragment)
    assert not store_path.exists()


def test_a_path_the_system_refuses_is_a_store_error(tmp_path: Path, capsys) -> None:
    """A store path too long for the system, or under a file: one line, exit 3, and the
    source and the file in the way left as they were."""
    source = tmp_path / "src.sqlite"
    _store_with_runs(source)
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    for target, fragment in ((tmp_path / ("a" * 5000), "File name too long"),
                             (a_file / "into.sqlite", "is not a folder")):
        assert main(["merge", str(source), "--into", str(target)]) == EXIT_STORE
        _one_line(capsys.readouterr().err, fragment)
        assert main(["runs", "--store", str(target)]) == EXIT_STORE
        _one_line(capsys.readouterr().err, fragment)
    assert a_file.read_text() == "mine"
    assert main(["runs", "--store", str(source)]) == 0
