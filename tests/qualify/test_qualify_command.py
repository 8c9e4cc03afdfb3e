"""`accelbench qualify`: the prologue's line and exit codes, the opt-in drain, a hung
check that fails with its code instead of hanging, and `--init`."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from qualify_hang import HANG_REGISTRY

from accelbench.analysis.checks import check_results
from accelbench.benchmarks.qualify import command
from accelbench.cli.main import main
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_NOT_RUN, EXIT_OK, EXIT_USAGE
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store

FAILED = [("ACCEL_ECC_DBE", "gpu3", "health check=gpu-ecc", "2 uncorrectable errors"),
          ("ACCEL_PCIE_WIDTH", "gpu5", "health check=gpu-pcie", "x8 of x16")]


def test_the_prologue_line_names_each_failure_by_code_and_subject() -> None:
    line = command.one_line_verdict(1, "gpu12", [], FAILED, 7.31)
    assert line.startswith("accelbench qualify level 1: FAIL on gpu12: "
                           "ACCEL_ECC_DBE gpu3, ACCEL_PCIE_WIDTH gpu5 (")
    assert line.endswith("; 7.3 s)") and "\n" not in line
    assert command.one_line_verdict(1, "gpu07", [], [], 6.9).startswith(
        "accelbench qualify level 1: PASS on gpu07 (0 checks: ")


def test_a_drain_reason_keeps_plain_characters_and_slurms_length() -> None:
    hostile = [("ACCEL_GPU_FAULT", 'gpu0"; scontrol delete', "health", "x")] * 40
    reason = command.drain_reason(hostile)
    assert reason.startswith("accelbench ACCEL_GPU_FAULT gpu0__ scontrol delete")
    assert len(reason) <= 200 and '"' not in reason and ";" not in reason
    # The same failure twice is said once.
    assert reason.count("ACCEL_GPU_FAULT") == 1


def _fake_scontrol(folder: Path, exit_code: int = 0) -> Path:
    said = folder / "argv.txt"
    script = folder / "scontrol"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {said}\n"
                      f"[ {exit_code} = 0 ] || echo 'Invalid node name specified' >&2\n"
                      f"exit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return said


def test_drain_runs_scontrol_with_the_codes(tmp_path, monkeypatch, capsys) -> None:
    said = _fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert command.drain("gpu12", FAILED)
    assert said.read_text().splitlines() == [
        "update", "NodeName=gpu12", "State=DRAIN",
        "Reason=accelbench ACCEL_ECC_DBE gpu3, ACCEL_PCIE_WIDTH gpu5"]
    assert "drained gpu12" in capsys.readouterr().err


def test_a_drain_that_cannot_run_or_is_refused_says_so(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not command.drain("gpu12", FAILED)
    assert "scontrol is not on PATH" in capsys.readouterr().err
    _fake_scontrol(tmp_path, exit_code=1)
    assert not command.drain("gpu12", FAILED)
    assert "Invalid node name specified" in capsys.readouterr().err


def test_the_host_is_slurms_name_for_it_when_plain(monkeypatch) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-node07")
    assert command._host() == "gpu-node07"
    monkeypatch.setenv("SLURMD_NODENAME", "bad name;")
    assert command._host() == "this-node"


def test_a_prologue_that_cannot_run_exits_10_with_one_line(tmp_path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    store = tmp_path / "results.sqlite"
    code = main(["qualify", "--prologue", "--device", "cuda", "--store", str(store)])
    assert code == EXIT_NOT_RUN
    out = capsys.readouterr()
    lines = out.out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench qualify level 1: NOT RUN on ")
    assert "could not run: device 'cuda' is not available" in out.err
    assert not store.exists()


@pytest.mark.parametrize(("argv", "fragment"), [
    (["qualify", "--prologue", "--level", "3"], "--prologue runs level 1: leave --level out"),
    (["qualify", "--check", "numerics"], "qualify runs a level's checks"),
    (["qualify", "--output", "x.yaml"], "--output and --force go with --init"),
    (["qualify", "--prologue", "--epilogue"], "not allowed with argument"),
    (["qualify", "--level", "5"], "--level: invalid choice: 5"),
])
def test_bad_qualify_input_is_one_line(argv, fragment, tmp_path, capsys) -> None:
    store = tmp_path / "results.sqlite"
    code = main([*argv, "--store", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    # In the prologue, input refused by the checks is "not run" too, said in one line.
    assert code in (EXIT_USAGE, EXIT_NOT_RUN)
    assert any(fragment in line for line in err), err
    assert not store.exists()


@pytest.mark.slow
def test_a_hung_check_fails_timed_out_with_its_code_and_the_run_goes_on(store_path) -> None:
    request = RunRequest(command="validate", benches=("gate",),
                         values={"figure": ("gemm-fp32", "memory-size"), "level": (2,)},
                         timing={"processes": 1})
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, HANG_REGISTRY), store, argv=["qualify"])
        stored = store.load_run(outcome.run_id)
    assert outcome.exit_code == EXIT_CASE_FAILED
    hung = [m for m in stored.measurements if m.case.param_dict["figure"] == "gemm-fp32"]
    assert hung and hung[0].status == "failed"
    assert hung[0].reason is not None and "timed out after 20 s" in hung[0].reason
    # Every figure was tried: the one after the hang ran in a fresh worker, and passed.
    assert [m.status for m in stored.measurements] == ["failed", "ok"], [
        m.reason for m in stored.measurements]
    failed = command.failures(stored.measurements)
    assert [(c, s) for c, s, _, _ in failed] == [("ACCEL_TIMEOUT", "gate figure=gemm-fp32 level=2")]
    codes = {r.name: r.codes for r in check_results(stored.measurements)}
    assert codes["gate figure=gemm-fp32 level=2"] == ("ACCEL_TIMEOUT",)
    assert codes["gate figure=memory-size level=2"] == ()


def test_init_writes_this_nodes_gates_and_never_replaces_a_file(tmp_path, capsys) -> None:
    from accelbench.benchmarks.qualify.gates import load_gates

    target = tmp_path / "site-gates.yaml"
    assert main(["qualify", "--init", "--device", "cpu", "-o", str(target)]) == EXIT_OK
    err = capsys.readouterr().err
    assert "gates written to" in err and str(target) in err
    written = load_gates(target)
    assert "cpu" in written and written["cpu"].gates
    assert all(g.origin.startswith("site file") for g in written["cpu"].gates)
    before = target.read_text()
    assert main(["qualify", "--init", "--device", "cpu", "-o", str(target)]) == EXIT_USAGE
    assert "exists: give --force" in capsys.readouterr().err
    assert target.read_text() == before
    assert main(["qualify", "--init", "--device", "cpu", "-o", "-"]) == EXIT_OK
    assert capsys.readouterr().out == before


@pytest.mark.slow
def test_the_prologue_judges_this_cpu_in_one_line(tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    result = subprocess.run(
        [sys.executable, "-m", "accelbench", "qualify", "--prologue", "--device", "cpu",
         "--store", str(store)], capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "ACCELBENCH_STORE": str(store)})
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    # This host's state decides the verdict; the line and the exit code agree.
    if result.returncode == EXIT_OK:
        assert lines[0].startswith("accelbench qualify level 1: PASS on ")
    else:
        assert result.returncode == EXIT_CASE_FAILED, result.stderr
        assert " FAIL on " in lines[0] and "ACCEL_" in lines[0]
    with Store.open(store, create=False) as opened:
        stored = opened.load_run("latest")
    figures = {m.case.param_dict.get("figure") for m in stored.measurements
               if m.case.benchmark == "gate"}
    # The CPU's level-1 gates: its memory, a short GEMM and the operator launch time.
    assert {"memory-size", "gemm-fp32", "launch"} <= figures
    assert all(m.details.get("gates_judged") for m in stored.measurements
               if m.case.benchmark == "gate" and m.status == "ok")


def test_the_prologue_line_says_when_the_gpu_model_has_no_gates() -> None:
    from accelbench.benchmarks.qualify.declaration import BENCHMARK
    from accelbench.core.measurement import Measurement

    params = BENCHMARK.resolve({"figure": "memory-size", "level": 1})
    skipped = Measurement(BENCHMARK.case(params, "cuda:0"), "skipped",
                          "not judged: no gates for 'NVIDIA GeForce RTX 4090': it is not a "
                          "GPU in the gates table; add it in a site gates file (--gates)")
    line = command.one_line_verdict(1, "ws1", [skipped], [], 5.0)
    assert line.startswith("accelbench qualify level 1: PASS on ws1 (")
    assert "no gates for 'NVIDIA GeForce RTX 4090': not judged against gates; 5.0 s)" in line


@pytest.mark.slow
def test_a_gate_this_cpu_cannot_meet_fails_the_prologue_with_its_code(tmp_path) -> None:
    """A failure never exits 0: a site gate no CPU meets fails the node, by name."""
    store, site = tmp_path / "results.sqlite", tmp_path / "site-gates.yaml"
    site.write_text("format: 1\nmodels:\n  - model: cpu\n    vendor: cpu\n"
                    "    sources: {site: 'a gate no CPU meets'}\n    gates:\n"
                    "      - {figure: gemm-fp32, min: 1000000, unit: TFLOP/s, level: 1,"
                    " source: site, basis: impossible}\n")
    result = subprocess.run(
        [sys.executable, "-m", "accelbench", "qualify", "--prologue", "--device", "cpu",
         "--gates", str(site), "--store", str(store)], capture_output=True, text=True,
        timeout=600, check=False)
    assert result.returncode == EXIT_CASE_FAILED, result.stdout + result.stderr
    (line,) = result.stdout.strip().splitlines()
    assert " FAIL on " in line and ": ACCEL_GEMM_BELOW_GATE cpu (" in line


def test_a_prologue_that_breaks_inside_is_not_run_not_failed(monkeypatch, capsys) -> None:
    def breaks(args):
        raise RuntimeError("the worker could not start\nsecond line")

    monkeypatch.setattr(command, "_qualify", breaks)
    assert main(["qualify", "--epilogue"]) == EXIT_NOT_RUN
    out = capsys.readouterr()
    assert out.out.startswith("accelbench qualify level 2: NOT RUN on ")
    assert out.err.strip() == ("accelbench qualify: could not run: unexpected RuntimeError: "
                               "the worker could not start")
