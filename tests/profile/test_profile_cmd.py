"""`accelbench profile` for real on this CPU: a GEMM case, stored with its trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_DEVICE, EXIT_USAGE
from accelbench.profile.capture import kineto_noise
from accelbench.runner.capacity import default_threads, usable_cpus
from accelbench.store import Store


@pytest.fixture(scope="module")
def gemm_profile(tmp_path_factory):
    root = tmp_path_factory.mktemp("profile")
    store = root / "results.sqlite"
    args = ["profile", "gemm", "-p", "shape=96", "--dtype", "fp32", "--device", "cpu",
            "--wait", "1", "--warmup", "1", "--steps", "3", "--store", str(store), "--json"]
    return store, args


def test_profile_of_a_gemm_is_stored_with_its_trace_and_analysis(gemm_profile, capsys):
    store, args = gemm_profile
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "complete" and out["problems"] == []
    (trace,) = out["traces"]
    assert trace.startswith(str(store.parent / "profiles" / out["run_id"]))
    assert trace.endswith(".pt.trace.json.gz")
    events = json.loads(gzip.decompress(Path(trace).read_bytes()))["traceEvents"]
    steps = [e["name"] for e in events if e.get("cat") == "user_annotation"
             and e["name"].startswith("ProfilerStep#")]
    assert sorted(steps) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert "aten::mm" in {e["name"] for e in events if e.get("cat") == "cpu_op"}

    analysis = out["analysis"]
    assert analysis["window"]["steps"] == 3
    parts = analysis["breakdown"]["parts_s"]
    assert sum(parts.values()) == pytest.approx(analysis["window"]["duration_s"], rel=1e-9)
    assert analysis["top_operators"][0]["name"] == "aten::mm"

    with Store.open(store, create=False) as opened:
        stored = opened.load_run(out["run_id"])
        (profile,) = opened.profiles_for_run(out["run_id"])
    assert stored.record.suite == "profile" and stored.record.status == "complete"
    (m,) = stored.measurements
    assert m.status == "ok" and len(m.samples) == 3
    throughput = m.figure("throughput")
    assert throughput is not None and throughput.unit == "FLOP/s"
    assert any(w.startswith("profiled:") for w in m.warnings)
    assert not m.noisy
    assert m.details["profile"] == {"wait": 1, "warmup": 1, "active": 3, "memory": False,
                                    "trace_files": [trace]}
    assert profile.trace_paths == (trace,) and profile.analysis == analysis
    assert profile.case_key == m.case.key and profile.label == m.case.label
    # The threads `accelbench run` would use, in the case's identity as there.
    expected = default_threads(usable_cpus())
    assert out["threads"]["used"] == expected == m.case.param_dict["threads"]
    assert out["threads"]["source"].startswith("default: ")
    assert stored.fingerprint["threads_source"] == out["threads"]["source"]


def test_profile_takes_the_threads_of_run_and_keeps_kinetos_noise_off_the_terminal(
        tmp_path, capfd):
    assert main(["profile", "gemm", "-p", "shape=64", "--dtype", "fp32", "--device", "cpu",
                 "--threads", "1", "--wait", "0", "--warmup", "1", "--steps", "1",
                 "--store", str(tmp_path / "r.sqlite")]) == 0
    out, err = capfd.readouterr()
    assert "CPU threads: 1; --threads 1" in out and "threads=1" in out
    assert "gpuGetDeviceCount" not in out + err and "profiler_start" not in out + err


def test_kineto_noise_is_told_from_what_matters():
    assert kineto_noise("USDT:2026-12-06 14:54:39 1:1 SyncActivityProfilerHandler.cpp:39] "
                        "profiler_start", "cuda")
    failed = "ERROR:2026-12-06 1:1 DeviceProperties.cpp:56] gpuGetDeviceCount failed with code 35"
    assert kineto_noise(failed, "cpu") and not kineto_noise(failed, "cuda")
    assert not kineto_noise("ERROR: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", "cuda")


def test_the_terminal_output_names_the_trace(gemm_profile, capsys):
    _, args = gemm_profile
    assert main([a for a in args if a != "--json"]) == 0
    out = capsys.readouterr().out
    assert "Profile of gemm" in out and "CPU time" in out and "aten::mm" in out
    assert "Trace: " in out and "tensorboard --logdir" in out


@pytest.mark.parametrize("argv, message", [
    (["profile", "gemm", "-p", "shape=64,128"], "make a grid"),
    (["profile", "gemmm"], "unknown benchmark"),
    (["profile", "launch", "--dtype", "fp16"], "not measured"),
    (["profile", "gemm", "-p", "nope=1"], "no selected benchmark has a parameter"),
    (["profile", "gemm", "--steps", "0"], "--steps: expected a whole number of at least 1"),
    (["profile", "gemm", "--device", "rocm"], "unknown device"),
])
def test_bad_input_is_one_line_and_touches_no_store(tmp_path, capsys, argv, message):
    store = tmp_path / "r.sqlite"
    assert main([*argv, "--store", str(store)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not store.exists()


def test_a_missing_device_is_refused(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    store = tmp_path / "r.sqlite"
    assert main(["profile", "gemm", "-p", "shape=64", "--device", "cuda",
                 "--store", str(store)]) == EXIT_DEVICE
    with Store.open(store) as opened:
        assert opened.list_runs() == []


def test_a_failed_case_is_stored_without_a_profile_and_exits_one(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    assert main(["profile", "gemm", "--dtype", "int8", "-p", "shape=16", "--device", "cpu",
                 "--store", str(store), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "failed" and out["traces"] == [] and out["analysis"] is None
    with Store.open(store, create=False) as opened:
        stored = opened.load_run(out["run_id"])
        assert opened.profiles_for_run(out["run_id"]) == []
    assert stored.record.status == "failed"
    reason = stored.measurements[0].reason
    assert reason is not None and reason.startswith("int8 GEMM")
