"""scripts/gpu-check.sh's set-up: its arguments, and what an offline machine lacks
(bench/gpu_packages.py), judged on any machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.store import Store

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_packages as gp  # noqa: E402

SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def needs():
    return gp.needs(gp.load(ROOT / "pyproject.toml"))


def test_the_needs_are_the_packages_metadata_with_only_the_test_tools_of_dev():
    found = {n.name: n.extra for n in needs()}
    assert found["torch"] is None and found["numpy"] is None
    assert found["onnxruntime"] == "onnx" and found["amdsmi"] == "telemetry"
    assert {n for n, e in found.items() if e == "test"} == set(gp.TEST_PACKAGES)
    assert "mypy" not in found and "ruff" not in found
    assert "tomli" not in found  # its marker holds only before Python 3.11


def versions(**missing_or_old):
    """Every package at 99.0 but those named: None for missing, else their version."""
    return lambda name: missing_or_old.get(name, "99.0")


def test_everything_present_can_run():
    lines, ok = gp.report(gp.survey(needs(), versions()))
    assert ok and lines == [f"packages: {len(needs())} of {len(needs())} present"]


def test_a_missing_optional_package_is_named_with_what_is_left_out_and_does_not_block():
    lines, ok = gp.report(gp.survey(needs(), versions(onnxruntime=None)))
    assert ok
    assert lines[1] == ("missing (optional, extra onnx: the ONNX Runtime cases are skipped): "
                        "onnxruntime>=1.18")


def test_a_missing_or_old_required_package_blocks_with_the_wheel_line():
    lines, ok = gp.report(gp.survey(needs(), versions(platformdirs=None, numpy="1.20",
                                                      hypothesis=None)))
    assert not ok
    assert "missing (required): platformdirs>=3" in lines
    assert "missing (required): numpy>=1.24 (installed: 1.20)" in lines
    assert "missing (for the tests): hypothesis>=6.100" in lines
    assert lines[-1].startswith("bring them as wheels, on a machine with a package index: "
                                "pip download --only-binary=:all: --dest WHEELS ")
    assert "'platformdirs>=3'" in lines[-1] and lines[-1].endswith("--wheelhouse WHEELS")


def test_the_survey_reads_this_pythons_packages():
    found = {f.need.name: f for f in gp.survey(needs())}
    assert found["numpy"].fits and found["numpy"].version is not None
    assert gp.main(["--pyproject", str(ROOT / "pyproject.toml")]) == 0


def run(*args):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args, said", [
    (("--wheelhouse",), "--wheelhouse needs a folder"),
    (("--prepare",), "--prepare needs a folder"),
    (("--have", "list.txt"), "--have goes with --prepare"),
    (("--prepare", "w", "--dry-run"), "--prepare only downloads"),
    (("--prepare", "w", "out"), "--prepare only downloads"),
    (("--fast",), "unknown option --fast"),
    (("a", "b"), "at most one results folder"),
    (("--wheelhouse", "/nonexistent-wheels"), "no wheels in /nonexistent-wheels"),
])
def test_bad_arguments_exit_2_with_the_reason(args, said):
    done = run(*args)
    assert done.returncode == 2 and said in done.stderr


@pytest.mark.slow
def test_without_a_gpu_nothing_is_checked_offline_or_not(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = run("--offline", str(tmp_path / "out"))
    assert done.returncode == 4 and "gpu-check: no GPU" in done.stderr


def test_the_packages_taken_from_the_wheels_are_named_with_their_versions(tmp_path):
    site = tmp_path / "site"
    (site / "platformdirs-4.3.0.dist-info").mkdir(parents=True)
    (site / "platformdirs-4.3.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: platformdirs\nVersion: 4.3.0\n")
    assert gp.from_site(site) == ["from the wheels (site, 1): platformdirs 4.3.0; every "
                                  "other package is this Python's own"]
    assert gp.from_site(tmp_path) == [f"from the wheels ({tmp_path.name}): none"]


@pytest.mark.slow
@pytest.mark.pinned_only  # PyTorch's CUDA calls faked: nothing the floor would tell apart
def test_the_dry_run_goes_through_every_stage_stores_its_figures_and_ends_with_the_table(
        tmp_path):
    """The check as it runs on a GPU, on the CPU with the GPU calls faked: each stage,
    the store it fills, the table; the deadlines stretched, so a slow machine passes."""
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_PYTHON": sys.executable,
           "ACCELBENCH_GPU_CHECK_STRETCH": "4", "ACCELBENCH_STORE": str(tmp_path / "x.sqlite")}
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", str(out)], capture_output=True,
                          text=True, timeout=3000, stdin=subprocess.DEVNULL, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stages = json.loads((out / "stages.json").read_text())
    assert [s["name"] for s in stages] == [
        "fingerprint", "health (qualify level 1)", "headline figures",
        "training and inference", "reference and energy", "GPU tests (pytest -m gpu)"]
    assert all(s["status"] == "ok" for s in stages), stages
    table = (out / "figures.md").read_text()
    for row in ("| gemm batch=1 dtype=bf16 shape=256", "| memory op=copy", "| launch mode=eager",
                "| train ", "| infer ", "| reference: bf16 GEMM 256³",
                "| energy: instant power"):
        assert row in table, row
    assert done.stdout.rstrip().splitlines()[-1] == "gpu-check: passed"
    assert "| fingerprint | ok: Stack: " in done.stdout and "DRY RUN" in done.stdout
    # every figure printed is stored, and the store merges into another
    with Store.open(out / "results.sqlite", create=False) as store:
        benchmarks = {m.case.benchmark for r in store.list_runs()
                      for m in store.load_run(r.id).measurements}
    assert {"gemm", "memory", "launch", "train", "infer", "gpu-reference",
            "gpu-energy"} <= benchmarks
    merged = tmp_path / "merged.sqlite"
    cli = [sys.executable, "-m", "accelbench"]
    assert subprocess.run([*cli, "merge", "--into", str(merged), str(out / "results.sqlite")],
                          capture_output=True, text=True, timeout=300).returncode == 0
    shown = subprocess.run([*cli, "show", "--store", str(merged), "latest"],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and "gpu-energy" in shown.stdout, shown.stderr
