"""`accelbench tune` on a faked ROCm GPU: the collecting run's processes record GEMM
shapes as TunableOp does (one untuned file per device ordinal, appended to by every
process), a fake tuner writes a results table as TunableOp's tuner does, and the A/B runs
on fake workers (tests/tune_fakes.py); the real parts are everything between
(runner.tune, app.tune)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from accelbench.app import tune
from accelbench.core.request import AbRequest, RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_DEVICE, UserError
from accelbench.runner import tune as steps
from accelbench.store import Store
from accelbench.store.location import parse_location
from tune_fakes import SHARED, VALIDATORS, FakeGpu, FakeTuner, case_shape, rocm


@pytest.fixture
def gpu(tmp_path: Path) -> SimpleNamespace:
    FakeGpu.started, FakeGpu.devices = [], 1
    tuner = FakeTuner()
    probed: list[str | None] = []

    def probe(python: str | None) -> steps.GpuStack:
        probed.append(python)
        return rocm(FakeGpu.devices)

    seams = steps.Seams(probe=probe, workers=lambda phase: FakeGpu, run_tuner=tuner)
    return SimpleNamespace(seams=seams, tuner=tuner, probed=probed,
                           location=parse_location(tmp_path / "store" / "results.sqlite"))


REQUEST = RunRequest(benches=("gemm",), dtypes=("fp16",), device="cuda", no_report=True)
AB_SETTINGS = AbRequest(max_rounds=8)


def test_tune_collects_the_shapes_tunes_them_keeps_the_table_and_abs_it(gpu):
    tuned = tune(REQUEST, gpu.location, ab_settings=AB_SETTINGS, seams=gpu.seams)
    assert gpu.probed == [None]  # this Python's stack

    # Collected: one ordinary run, its processes with TunableOp recording in a private
    # folder; every shape once, though each case ran the shared one.
    collecting = [env for env in FakeGpu.started if steps.RECORD_UNTUNED in env]
    assert collecting and all(
        env[steps.ENABLED] == "1" and env[steps.TUNING] == "0"
        and env[steps.UNTUNED_FILENAME].endswith("/untuned.csv") for env in collecting)
    cases = tuned.collected.measurements
    assert len(cases) >= 2
    assert gpu.tuner.gemms.count(SHARED) == 1
    assert set(gpu.tuner.gemms) == {SHARED, *(case_shape(m.case.label) for m in cases)}
    assert tuned.gemms == len(gpu.tuner.gemms)

    # Tuned on one GPU in a process of the stack, TunableOp on and tuning.
    (command,) = gpu.tuner.commands
    assert command.argv[0] == sys.executable and command.argv[3] == "1"
    assert command.env == {steps.ENABLED: "1", steps.TUNING: "1", steps.RECORD_UNTUNED: "0",
                           steps.FILENAME: "results%d.csv"}
    assert gpu.tuner.timeout == steps.DEFAULT_TUNE_TIMEOUT_S
    assert not command.cwd.exists()  # the work folder is gone

    # Kept beside the store: read-only, named by its hash, with its sidecar and a link
    # per device that the FILENAME pattern finds.
    table = tuned.table
    files = gpu.location.files_dir / "tuning"
    assert table.path == files / f"{table.sha256[:16]}.csv"
    assert not table.path.stat().st_mode & stat.S_IWUSR
    assert table.entries == tuned.gemms and dict(table.validators) == VALIDATORS
    assert Path(table.pattern.replace("%d", "0")).resolve() == table.path
    sidecar = json.loads(table.sidecar.read_text())
    assert sidecar["sha256"] == table.sha256 and sidecar["validators"] == VALIDATORS
    assert sidecar["entries"] == tuned.gemms == sidecar["gemms_tuned"]
    assert sidecar["collection_runs"] == [tuned.collected.run_id]
    assert sidecar["device"]["name"] == "AMD Instinct MI250X"
    assert sidecar["device"]["arch"] == "gfx90a" and sidecar["device"]["platform"] == "rocm"
    assert sidecar["selection"]["benches"] == ["gemm"]
    assert sidecar["filename"] == table.pattern

    # The A/B: the same stack without (A) and with the table (B).
    assert tuned.ab is not None
    pair = tuned.ab.result.ab
    assert dict(pair.a.env) == {steps.ENABLED: "0"}
    assert dict(pair.b.env) == {steps.ENABLED: "1", steps.TUNING: "0",
                                steps.FILENAME: table.pattern}
    assert pair.max_rounds == 8
    used = [env for env in FakeGpu.started if env.get(steps.FILENAME) == table.pattern]
    assert used and all(env[steps.TUNING] == "0" for env in used)
    assert {c.verdict.verdict for c in tuned.ab.result.cases if c.verdict} == {"faster"}

    # Three runs stored: the collecting one and the A/B's two.
    with Store.open(gpu.location, create=False) as store:
        stored = {r.id for r in store.list_runs()}
    assert {tuned.collected.run_id, tuned.ab.result.a.record.id,
            tuned.ab.result.b.record.id} == stored


def test_the_stack_named_is_probed_collected_tuned_and_abd_with_its_own_python(gpu, tmp_path):
    other = tmp_path / "venv" / "bin" / "python"
    other.parent.mkdir(parents=True)
    other.symlink_to(sys.executable)
    tuned = tune(REQUEST, gpu.location, python=str(other), ab_settings=AB_SETTINGS,
                 seams=gpu.seams)
    assert gpu.probed == [str(other)]
    assert gpu.tuner.commands[0].argv[0] == str(other)
    assert tuned.table.meta["python"] == str(other)
    assert tuned.ab is not None
    assert tuned.ab.result.ab.a.python == tuned.ab.result.ab.b.python == str(other)


def test_several_gpus_are_tuned_at_once_and_the_table_is_linked_for_each(gpu):
    FakeGpu.devices = 4
    tuned = tune(REQUEST, gpu.location, seams=gpu.seams, tune_timeout=60)
    (command,) = gpu.tuner.commands
    assert command.argv[3] == "4" and command.argv[4] == steps.MGPU_RESULTS_NAME
    assert gpu.tuner.timeout == 60
    for ordinal in range(4):
        assert Path(tuned.table.pattern.replace("%d", str(ordinal))).resolve() == \
            tuned.table.path
    assert tuned.ab is None


def test_a_stack_whose_pytorch_cannot_tune_on_several_gpus_tunes_on_one(gpu):
    FakeGpu.devices = 2
    seams = steps.Seams(probe=lambda python: rocm(2, multi=False), workers=lambda p: FakeGpu,
                        run_tuner=gpu.tuner)
    tune(REQUEST, gpu.location, seams=seams)
    assert gpu.tuner.commands[0].argv[3] == "1"


def test_a_tuner_that_times_out_stores_no_table(gpu, tmp_path):
    def hung(command: steps.TunerCommand, timeout: float) -> str:
        hanging = steps.TunerCommand((sys.executable, "-c", "import time; time.sleep(60)"),
                                     command.env, command.cwd)
        return steps.run_tuner(hanging, 0.5)

    seams = steps.Seams(probe=gpu.seams.probe, workers=lambda p: FakeGpu, run_tuner=hung)
    with pytest.raises(steps.TuneFailed, match=r"timed out after 0\.5 s .* no table was stored"
                       ) as info:
        tune(REQUEST, gpu.location, ab_settings=AB_SETTINGS, seams=seams)
    assert info.value.exit_code == EXIT_CASE_FAILED
    assert not (gpu.location.files_dir / "tuning").exists()
    with Store.open(gpu.location, create=False) as store:  # the collecting run is kept
        assert len(store.list_runs()) == 1


def test_a_tuner_that_tunes_nothing_stores_no_table(gpu):
    tuner = FakeTuner(skip=10_000)
    seams = steps.Seams(probe=gpu.seams.probe, workers=lambda p: FakeGpu, run_tuner=tuner)
    with pytest.raises(steps.TuneFailed, match=r"tuned none of the .* GEMM shape"):
        tune(REQUEST, gpu.location, seams=seams)
    assert not (gpu.location.files_dir / "tuning").exists()


def test_only_the_shapes_tuned_are_counted_as_tuned(gpu):
    gpu.tuner.skip = 1
    tuned = tune(REQUEST, gpu.location, seams=gpu.seams)
    assert tuned.table.meta["gemms_tuned"] == tuned.gemms - 1
    assert tuned.table.meta["gemms_collected"] == tuned.gemms


def test_cases_that_run_no_gemm_leave_nothing_to_tune(gpu, monkeypatch):
    monkeypatch.setattr(FakeGpu, "runs_gemms", False)
    with pytest.raises(steps.TuneFailed, match="ran no GEMM through TunableOp"):
        tune(REQUEST, gpu.location, seams=gpu.seams)
    assert gpu.tuner.commands == []


def test_the_same_table_tuned_again_is_kept_once_with_both_collecting_runs(gpu):
    first = tune(REQUEST, gpu.location, seams=gpu.seams)
    second = tune(REQUEST, gpu.location, seams=gpu.seams)
    assert first.table.path == second.table.path
    runs = json.loads(second.table.sidecar.read_text())["collection_runs"]
    assert runs == [first.collected.run_id, second.collected.run_id]
    assert sorted(p.name for p in first.table.path.parent.iterdir()) == sorted(
        [first.table.path.name, first.table.sidecar.name, first.table.path.stem + "-gpu0.csv"])


@pytest.mark.parametrize(("device", "probed"), [("cpu", False), ("mps", False), ("auto", True)])
def test_where_nothing_can_be_tuned_it_is_refused_before_a_store_is_made(gpu, device, probed):
    seams = steps.Seams(probe=lambda python: steps.GpuStack("cpu", 0, "2.6.0+cpu", True, True),
                        workers=lambda p: FakeGpu, run_tuner=gpu.tuner)
    with pytest.raises(UserError, match="TunableOp tunes GEMMs on ROCm and CUDA GPUs; "
                       "nothing to tune on") as info:
        tune(REQUEST.replace(device=device), gpu.location, seams=seams)
    assert info.value.exit_code == EXIT_DEVICE
    assert not gpu.location.path.exists() and FakeGpu.started == []


def test_a_pytorch_without_offline_tuning_is_refused(gpu):
    seams = steps.Seams(probe=lambda python: steps.GpuStack("rocm", 1, "2.3.0", False, False))
    with pytest.raises(UserError, match=r"PyTorch 2\.3\.0 has no offline TunableOp") as info:
        tune(REQUEST, gpu.location, seams=seams)
    assert info.value.exit_code == EXIT_DEVICE
    assert not gpu.location.path.exists()


def test_repeat_is_refused(gpu):
    with pytest.raises(UserError, match="leave out --repeat"):
        tune(REQUEST.replace(repeat=3), gpu.location, seams=gpu.seams)


def test_the_collecting_request_samples_briefly_once():
    request = steps.collection_request(RunRequest(timing={"max_time": 5.0}, report="x.html"))
    assert request.timing == {"max_time": steps.COLLECT_MAX_TIME, "processes": 1}
    assert request.repeat == 1 and request.no_report and request.report is None
    shorter = steps.collection_request(RunRequest(timing={"max_time": 0.1}))
    assert shorter.timing["max_time"] == 0.1


def test_merging_keeps_each_shape_once_from_every_device_file(tmp_path):
    (tmp_path / "untuned0.csv").write_text(f"{SHARED}\nGemmTunableOp_float_NT,nt_1_2_3\n"
                                           "garbage\n")
    (tmp_path / "untuned1.csv").write_text(
        f"{SHARED},BLAS_PARAMS: x\nScaledGemmTunableOp_a,b\n")
    assert steps.merge_untuned(tmp_path) == [SHARED, "GemmTunableOp_float_NT,nt_1_2_3",
                                             "ScaledGemmTunableOp_a,b"]


def test_the_tuner_script_refuses_a_machine_without_a_gpu(tmp_path):
    """The real tuner, on a machine with no GPU (this one's torch, if it has one), fails
    in one line rather than write anything."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    (tmp_path / steps.GEMMS_NAME).write_text(SHARED + "\n")
    command = steps.tuner_command(None, tmp_path, 1)
    with pytest.raises(steps.TuneFailed, match="tuner failed: no ROCm or CUDA GPU"):
        steps.run_tuner(command, 120)
    assert sorted(os.listdir(tmp_path)) == [steps.GEMMS_NAME, steps.TUNER_SCRIPT]


def test_results_named_outside_the_folder_are_refused(tmp_path):
    with pytest.raises(steps.TuneFailed, match="wrote no results file"):
        steps.results_of(json.dumps({"results": "../elsewhere.csv"}), tmp_path)
    with pytest.raises(steps.TuneFailed, match="did not say where"):
        steps.results_of("", tmp_path)
