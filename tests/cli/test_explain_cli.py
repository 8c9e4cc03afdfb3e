"""`accelbench explain` for real: a planted regression in oneDNN, which only the
convolutions use, named by the profiles of both sides; two PyTorch releases installed side
by side; and bad input, one line with its exit code before anything is profiled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_STORE, EXIT_USAGE
from accelbench.store import Store
from scripted_worker import run_cli

# A small network whose time is in its convolutions (oneDNN) and its pooling (ATen),
# measured in one process: explain profiles it afresh, the run only names the case and
# its stack.
RESNET = RunRequest(benches=("infer",), overrides={"model": ("resnet-tiny",), "batch": ("1",)},
                    device="cpu", timing={"processes": 1, "max_time": 0.2}, repeat=1,
                    no_report=True)
GEMM = ["--bench", "gemm", "-p", "shape=128", "--dtype", "fp32", "--device", "cpu",
        "--max-time", "0.1", "--repeat", "1", "--no-report"]


def _accelbench(store: Path, *args: str, python: str = sys.executable,
                env: dict[str, str] | None = None, timeout: float = 900
                ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "accelbench", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _run_id(store: Path) -> str:
    with Store.open(store, create=False) as opened:
        return opened.list_runs()[0].id


@pytest.mark.slow
def test_a_planted_regression_in_the_convolutions_is_named(tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    request = tmp_path / "request.json"
    request.write_text(RESNET.to_json(), encoding="utf-8")
    first = _accelbench(store, "run", "--request", str(request))
    assert first.returncode == 0, first.stderr
    before = _run_id(store)
    # oneDNN kept to SSE4.1: its convolutions several times slower, ATen's pooling as it was.
    slowed = _accelbench(store, "run", "--request", str(request),
                         env={"ONEDNN_MAX_CPU_ISA": "SSE41"})
    assert slowed.returncode == 0, slowed.stderr
    after = _run_id(store)
    # Two profiles a side, in ABBA order: a burst of load beside the test (a CI machine's
    # other tests) falls on both sides alike rather than on one profile.
    done = _accelbench(store, "explain", before, after, "--rounds", "2", "--steps", "2",
                       "--warmup", "1", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # The operator that slowed most in B is the convolution.
    slowed_in_b = [o for o in found["operators"] if o["delta_s_per_step"] > 0]
    assert slowed_in_b and slowed_in_b[0]["name"] == "aten::mkldnn_convolution", \
        found["summary"]
    assert [d["key"] for d in found["stack"]] == ["environment.ONEDNN_MAX_CPU_ISA"], \
        found["stack"]
    assert "ONEDNN_MAX_CPU_ISA=SSE41" in found["repro"]["b"]["run"]
    assert "ONEDNN_MAX_CPU_ISA" not in found["repro"]["a"]["run"]
    conv = [s for s in found["shapes"] if s["name"] == "aten::mkldnn_convolution"]
    assert conv and conv[0]["types"].startswith("float")
    with Store.open(store, create=False) as opened:
        (stored,) = opened.explanations([after])
        assert stored.findings["operators"][0]["name"] == found["operators"][0]["name"]
        profiles = [r for r in opened.list_runs() if r.suite == "profile"]
    assert len(profiles) == 4  # two profiles of each side, each stored as a run
    shown = _accelbench(store, "show", after)
    assert "Why a case moved" in shown.stdout and "aten::mkldnn_convolution" in shown.stdout


@pytest.mark.slow
@pytest.mark.torch_api
def test_two_installed_pytorch_releases_are_explained(tmp_path) -> None:
    """Set by scripts/test-floor.sh: the pinned PyTorch's interpreter, beside the floor's
    one these tests run on."""
    other = os.environ.get("ACCELBENCH_TEST_OTHER_STACK")
    if not other:
        pytest.skip("no other stack named (ACCELBENCH_TEST_OTHER_STACK)")
    store = tmp_path / "results.sqlite"
    made = _accelbench(store, "run", *GEMM)
    assert made.returncode == 0, made.stderr
    first = _run_id(store)
    made = _accelbench(store, "run", *GEMM, python=other)
    assert made.returncode == 0, made.stderr
    second = _run_id(store)
    # This interpreter does not hold the second run's PyTorch: refused before profiling.
    refused = _accelbench(store, "explain", first, second)
    assert refused.returncode == EXIT_USAGE and "give --b" in refused.stderr
    done = _accelbench(store, "explain", first, second, "--b", other, "--rounds", "1",
                       "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    torch = {d["key"]: d for d in found["stack"]}["torch.version"]
    import torch as this

    assert torch["a"] == this.__version__ and torch["b"] != torch["a"]
    assert any(o["name"] == "aten::mm" for o in found["operators"])
    assert other in found["repro"]["b"]["run"]


def test_bad_input_is_one_line_before_anything_runs(monkeypatch, capsys, tmp_path) -> None:
    missing = tmp_path / "none.sqlite"
    assert run_cli(monkeypatch, "explain", "a", "b", "--store", str(missing)) == EXIT_STORE
    assert not missing.exists()
    assert run_cli(monkeypatch, "explain", "a", "--rounds", "0") == EXIT_USAGE
    assert run_cli(monkeypatch, "explain", "a", "b", "--a-env", "NOPE") == EXIT_USAGE
    assert "expected NAME=VALUE" in capsys.readouterr().err
    assert run_cli(monkeypatch, "explain", "a", "b", "--b", str(tmp_path)) == EXIT_USAGE
    assert "no bin/python in that folder" in capsys.readouterr().err


def test_each_profile_says_the_time_left_at_the_pace_so_far(monkeypatch, capsys) -> None:
    from accelbench.cli import explain_cmd

    clock = iter([100.0, 110.0, 130.0])
    monkeypatch.setattr("accelbench.cli.explain_cmd.time.monotonic", lambda: next(clock))
    progress = explain_cmd._Progress()
    for side, number in (("a", 1), ("b", 1), ("b", 2)):
        progress.profiling(side, number, 2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith("side A (1 of 2)")
    assert lines[1].endswith("(1 of 2; ~30 s left)")  # 10 s each, 3 to go
    assert lines[2].endswith("(2 of 2; ~30 s left)")  # 15 s each, 2 to go
