"""`accelbench tune` as a user runs it: refused in one line on the CPU (for real), bad
options as usage errors, and its output on a faked ROCm GPU (tests/tune_fakes.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.runner import tune as steps
from tune_fakes import VALIDATORS, FakeGpu, FakeTuner, rocm

CPU_LINE = ("accelbench: error: tune: TunableOp tunes GEMMs on ROCm and CUDA GPUs; nothing "
            "to tune on the cpu")


def accelbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelbench", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def test_on_the_cpu_it_says_so_in_one_line_and_stores_nothing(tmp_path):
    done = accelbench("tune", "--bench", "gemm", "--device", "cpu", "--store", "X.sqlite",
                      cwd=tmp_path)
    assert done.returncode == 4
    assert done.stderr.splitlines() == [CPU_LINE]
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_on_a_machine_without_a_gpu_the_stack_says_so(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    done = accelbench("tune", "--bench", "gemm", "--store", "X.sqlite", cwd=tmp_path)
    assert done.returncode == 4
    assert done.stderr.splitlines() == [
        CPU_LINE + " (this PyTorch sees no ROCm or CUDA GPU)"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--no-ab", "--budget", "5"], "--no-ab runs no A/B: leave out --budget"),
    (["--no-ab", "--report", "r.html"], "--no-ab runs no A/B: leave out --report"),
    (["--repeat", "2"], "leave out --repeat"),
    (["--max-rounds", "1"], "--max-rounds"),
    (["--tune-timeout", "0"], "--tune-timeout"),
    (["--bench", "nosuch"], "unknown benchmark 'nosuch'"),
    (["--python", "/no/such/python"], "--python /no/such/python: no such Python"),
])
def test_bad_options_are_usage_errors(tmp_path, capsys, args, message):
    store = tmp_path / "s.sqlite"
    assert main(["tune", "--device", "cuda", "--store", str(store), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1
    assert not store.exists()


@pytest.fixture
def fake_gpu(monkeypatch):
    FakeGpu.started, FakeGpu.devices, FakeGpu.runs_gemms = [], 1, True
    tuner = FakeTuner()
    seams = steps.Seams(probe=lambda python: rocm(1), workers=lambda phase: FakeGpu,
                        run_tuner=tuner)
    monkeypatch.setattr(steps, "Seams", lambda: seams)
    return tuner


def test_it_prints_the_table_and_the_ab_and_exits_with_the_abs_code(fake_gpu, tmp_path,
                                                                     capsys):
    store = tmp_path / "s.sqlite"
    code = main(["tune", "--bench", "gemm", "--dtype", "fp16", "--store", str(store),
                 "--no-report", "--max-rounds", "8", "--fail-on-regression", "5"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "accelbench: tune: collecting GEMM shapes: run " in err
    assert "stored as an ordinary run" in err
    lines = out.splitlines()
    assert lines[0].startswith("Collected ") and "GEMM shape(s) in run " in lines[0]
    assert "PYTORCH_TUNABLEOP_FILENAME=" in out and "-gpu%d.csv" in out
    assert "faster" in out and "Stored in" in out


def test_json_gives_the_table_its_hash_validators_runs_and_the_ab(fake_gpu, tmp_path,
                                                                   capsys):
    store = tmp_path / "s.sqlite"
    code = main(["tune", "--bench", "gemm", "--dtype", "fp16", "--store", str(store),
                 "--no-report", "--max-rounds", "8", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == data["exit_code"] == 0
    assert Path(data["table"]).name == data["sha256"][:16] + ".csv"
    assert data["validators"] == VALIDATORS
    assert data["entries"] == data["gemms_collected"] == data["gemms_tuned"] > 0
    assert len(data["collection_runs"]) == 1
    assert data["ab"]["exit_code"] == 0 and data["ab"]["cases"]
    sidecar = json.loads(Path(data["sidecar"]).read_text())
    assert sidecar["sha256"] == data["sha256"]


def test_with_no_ab_it_keeps_the_table_and_runs_no_ab(fake_gpu, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    code = main(["tune", "--bench", "gemm", "--dtype", "fp16", "--store", str(store),
                 "--no-ab", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["ab"] is None and Path(data["table"]).is_file()
    assert not any(steps.FILENAME in env for env in FakeGpu.started)


def test_a_tuner_that_times_out_exits_with_1_and_keeps_no_table(monkeypatch, tmp_path,
                                                                capsys):
    def hung(command: steps.TunerCommand, timeout: float) -> str:
        return steps.run_tuner(steps.TunerCommand(
            (sys.executable, "-c", "import time; time.sleep(60)"), {}, command.cwd), timeout)

    FakeGpu.started, FakeGpu.devices = [], 1
    seams = steps.Seams(probe=lambda python: rocm(1), workers=lambda phase: FakeGpu,
                        run_tuner=hung)
    monkeypatch.setattr(steps, "Seams", lambda: seams)
    store = tmp_path / "s.sqlite"
    code = main(["tune", "--bench", "gemm", "--dtype", "fp16", "--store", str(store),
                 "--tune-timeout", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[-1] == ("accelbench: error: tune: the tuner timed out after 1 s "
                                    "(see --tune-timeout); no table was stored")
    assert not (tmp_path / "tuning").exists()
