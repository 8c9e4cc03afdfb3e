"""`accelbench ab` on the command line: its options make an A/B request, bad input is one
line with its exit code before anything starts, the table or JSON and the gate's exit
code; the fake stacks of `ab_fakes` measure in this process. The real ones (this Python,
another interpreter, two PyTorch releases) are in the slow tier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from ab_fakes import Sides, factory
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, EXIT_USAGE
from accelbench.store import Store
from scripted_worker import run_cli

AB = ["ab", "--bench", "launch", "--device", "cpu", "--no-report", "--max-time", "0.01",
      "--max-rounds", "10"]


@pytest.fixture(autouse=True)
def fake_stacks(monkeypatch, store_path):
    from accelbench.runner import ab

    real = ab.run_ab

    def faked(valid, store, listener=None, argv=(), worker_factory=None, *rest):
        return real(valid, store, listener, argv, factory, *rest)

    Sides.reset()
    monkeypatch.setattr(ab, "run_ab", faked)
    yield
    Sides.reset()


def test_an_aa_prints_same_with_its_pairs_and_the_gate_passes(monkeypatch, capsys) -> None:
    assert run_cli(monkeypatch, *AB, "--fail-on-regression", "5") == 0
    out, err = capsys.readouterr()
    assert "same" in out and "no case regressed by 5% or more" in out
    assert "an A/A" in err and "round 1:" in err and "s left" in err
    assert "Stored in" in out and "(A) and" in out


def test_json_holds_each_case_and_the_gate(monkeypatch, capsys) -> None:
    Sides.speed = {"launch": 0.7}
    code = run_cli(monkeypatch, *AB, "--fail-on-regression", "10", "--json")
    data = json.loads(capsys.readouterr().out)
    assert code == EXIT_CASE_FAILED == data["exit_code"]
    (case,) = data["cases"]
    assert case["verdict"] == "slower" and case["pairs"] >= 3
    assert data["regressions"] == [case["label"]] and data["stopped"] == "done"
    with Store.open(create=False) as store:
        runs = {r.id: r for r in store.list_runs()}
    assert set(runs) == {data["run_a"], data["run_b"]}


def test_an_undecided_case_at_the_budget_makes_the_gate_exit_9(monkeypatch, capsys) -> None:
    Sides.sigma = 0.3
    code = run_cli(monkeypatch, *AB[:-2], "--max-rounds", "3", "--fail-on-regression", "5")
    out = capsys.readouterr().out
    assert code == EXIT_INCONCLUSIVE
    assert "inconclusive" in out and "raise --max-rounds or --budget" in out


def test_a_stored_sides_request_runs_the_ab_again(monkeypatch, capsys, tmp_path) -> None:
    assert run_cli(monkeypatch, *AB, "--b-env", "PYTORCH_X=1", "--json") == 0
    first = json.loads(capsys.readouterr().out)
    assert run_cli(monkeypatch, "show", first["run_b"], "--request") == 0
    path = tmp_path / "ab.json"
    path.write_text(capsys.readouterr().out)
    stored = RunRequest.from_json(path.read_text())
    assert stored.ab is not None and stored.ab.b.env == (("PYTORCH_X", "1"),)
    assert run_cli(monkeypatch, "ab", "--request", str(path), "--json") == 0
    again = json.loads(capsys.readouterr().out)
    assert again["id"] != first["id"]  # a new A/B of the same request
    assert [c["key"] for c in again["cases"]] == [c["key"] for c in first["cases"]]
    capsys.readouterr()
    assert run_cli(monkeypatch, "run", "--request", str(path)) == EXIT_USAGE
    assert "accelbench ab --request" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--repeat", "2"], "leave out --repeat"),
    (["--a", "/nonexistent/env"], "--a /nonexistent/env: no such Python interpreter"),
    (["--b-env", "NOVALUE"], "--b-env 'NOVALUE': expected NAME=VALUE"),
    (["--b-env", "1X=2"], "expected NAME=VALUE"),
    (["--max-rounds", "1"], "expected a whole number of at least 2"),
    (["--max-rounds", "201"], "expected a whole number of at most 200"),
    (["--alpha", "1"], "expected a probability"),
    (["--budget", "0"], "expected a finite number of seconds above 0"),
    (["--min-effect", "100"], "expected a percentage"),
])
def test_bad_input_is_one_line_and_nothing_is_stored(monkeypatch, capsys, store_path, args,
                                                     message) -> None:
    assert run_cli(monkeypatch, *AB, *args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not store_path.exists()


def test_a_folder_without_a_python_is_refused(monkeypatch, capsys, tmp_path) -> None:
    assert run_cli(monkeypatch, *AB, "--b", str(tmp_path)) == EXIT_USAGE
    assert "no bin/python in that folder" in capsys.readouterr().err


def test_a_run_request_is_not_an_ab(monkeypatch, capsys, tmp_path) -> None:
    path = tmp_path / "run.json"
    path.write_text(RunRequest(benches=("launch",)).to_json())
    assert run_cli(monkeypatch, "ab", "--request", str(path)) == EXIT_USAGE
    assert "not an A/B request" in capsys.readouterr().err


# -- real stacks ---------------------------------------------------------------------------

def _ab(store: Path, *args: str, python: str = sys.executable,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "accelbench", "ab", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_a_real_aa_on_this_python_stores_two_runs_and_a_report(tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    done = _ab(store, "--bench", "gemm", "-p", "shape=128", "--dtype", "fp32",
               "--device", "cpu", "--max-time", "0.1", "--max-rounds", "4",
               "--b-env", "PYTORCH_AB_SIDE=b", "--json")
    assert done.returncode in (0, EXIT_CASE_FAILED), done.stderr
    data = json.loads(done.stdout)
    (case,) = data["cases"]
    assert 2 <= case["pairs"] <= 4 and case["verdict"] in ("same", "inconclusive")
    assert Path(data["report"]).is_file()
    with Store.open(store, create=False) as opened:
        b = opened.load_run(data["run_b"])
        a = opened.load_run(data["run_a"])
    assert b.fingerprint["environment"].get("PYTORCH_AB_SIDE") == "b"
    assert "PYTORCH_AB_SIDE" not in a.fingerprint["environment"]
    assert len(b.measurements[0].details["pair_values"]) == case["pairs"]


@pytest.mark.slow
def test_an_interpreter_that_cannot_run_the_worker_is_refused_with_what_it_lacks(
        tmp_path) -> None:
    env = tmp_path / "bare"
    venv.create(env, with_pip=False)  # no PyTorch, none of accelbench's dependencies
    store = tmp_path / "results.sqlite"
    done = _ab(store, "--bench", "launch", "--device", "cpu", "--b", str(env))
    assert done.returncode == EXIT_USAGE, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "stack B" in line and "No module named" in line and "pip install accelbench" in line
    assert not store.exists() or not Store.open(store, create=False).list_runs()


@pytest.mark.slow
@pytest.mark.torch_api
def test_two_installed_pytorch_releases_are_ab_tested_side_by_side(tmp_path) -> None:
    """Set by scripts/test-floor.sh: the pinned PyTorch's interpreter, beside the floor's
    one these tests run on."""
    other = os.environ.get("ACCELBENCH_TEST_OTHER_STACK")
    if not other:
        pytest.skip("no other stack named (ACCELBENCH_TEST_OTHER_STACK)")
    store = tmp_path / "results.sqlite"
    done = _ab(store, "--a", sys.executable, "--b", other, "--bench", "gemm", "-p",
               "shape=256", "--dtype", "fp32", "--device", "cpu", "--max-time", "0.1",
               "--max-rounds", "4", "--json")
    assert done.returncode in (0, EXIT_CASE_FAILED), done.stderr
    data = json.loads(done.stdout)
    with Store.open(store, create=False) as opened:
        versions = {side: opened.load_run(data[f"run_{side}"]).fingerprint["torch"]["version"]
                    for side in ("a", "b")}
    import torch

    assert versions["a"] == torch.__version__ and versions["b"] != versions["a"]
    assert data["cases"][0]["pairs"] >= 2


def test_a_slower_case_says_how_to_explain_it(monkeypatch, capsys) -> None:
    Sides.speed = {"launch": 0.7}
    run_cli(monkeypatch, *AB)
    out = capsys.readouterr().out
    with Store.open(create=False) as store:
        b = next(r.id for r in store.list_runs() if r.request and r.request["ab"]["side"] == "b")
    assert f"Why it moved: accelbench explain {b} --case 'launch mode=eager threads=1'" in out
