"""The device on a GPU machine: the fingerprint of the real GPU, and what a device that
is not there gets (the GPU counterparts of the tests that skip when a GPU is present)."""

from __future__ import annotations

import json

import pytest
from gpu_runs import TIMING, accelbench

from accelbench.cli.main import main
from accelbench.errors import EXIT_DEVICE, DeviceError, UserError
from accelbench.store import Store

pytestmark = pytest.mark.gpu


def test_the_fingerprint_describes_the_gpu_pytorch_sees():
    import torch

    from accelbench.env.fingerprint import collect

    fp = collect("cuda")
    props = torch.cuda.get_device_properties(0)
    rocm = bool(torch.version.hip)
    assert fp.platform == ("rocm" if rocm else "cuda")
    assert fp.device.type == "cuda" and fp.device.index == 0
    assert fp.device.platform == fp.platform
    assert fp.device.name == torch.cuda.get_device_name(0)
    if rocm:
        assert fp.device.arch == props.gcnArchName.split(":")[0]
        assert fp.device.arch.startswith("gfx")
    else:
        major, minor = torch.cuda.get_device_capability(0)
        assert fp.device.arch == f"sm_{major}{minor}"
    assert fp.device.memory_bytes == props.total_memory
    assert fp.device.compute_units == props.multi_processor_count
    data = fp.data
    assert data["devices"]["count"] == torch.cuda.device_count()
    assert data["devices"]["names"][0] == fp.device.name
    runtime = data["runtime"]
    assert runtime["name"] == ("ROCm" if rocm else "CUDA")
    assert runtime["version"] == (torch.version.hip if rocm else torch.version.cuda)
    assert data["libraries"]["conv"]["name"] == ("MIOpen" if rocm else "cuDNN")
    assert data["libraries"]["collective"]["name"] == ("RCCL" if rocm else "NCCL")
    # The device part is the product identified (on ROCm from the architecture, compute
    # units and memory, whatever name the driver reports).
    product = (data.get("product") or {}).get("label") or fp.device.name
    assert fp.generation_key.startswith(f"{product} | {runtime['name']} ")


def test_auto_picks_the_first_gpu():
    from accelbench.env.fingerprint import collect

    fp = collect("auto")
    assert fp.device.type == "cuda" and fp.device.index == 0


def test_a_gpu_index_past_the_last_is_a_device_error(gpu):
    from accelbench.env.fingerprint import collect

    with pytest.raises(DeviceError) as err:
        collect(f"cuda:{gpu.count}")
    assert err.value.exit_code == EXIT_DEVICE
    message = str(err.value)
    assert f"there are {gpu.count} cuda device(s)" in message
    assert gpu.device.name in message and "\n" not in message


def test_the_runner_refuses_a_missing_gpu_before_anything_is_stored(gpu, store_path):
    from accelbench.benchmarks import REGISTRY
    from accelbench.core.request import RunRequest
    from accelbench.runner.plan import validate
    from accelbench.runner.session import run_session

    request = RunRequest(benches=("launch",), device=f"cuda:{gpu.count}", timing=TIMING)
    with Store.open(store_path) as store:
        with pytest.raises(UserError) as info:
            run_session(validate(request, REGISTRY), store)
        assert store.list_runs() == []
    assert info.value.exit_code == EXIT_DEVICE


def test_run_on_a_missing_gpu_has_the_device_exit_code(gpu, store_path, capsys):
    assert main(["run", "--bench", "launch", "--device", f"cuda:{gpu.count}"]) == EXIT_DEVICE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accelbench: error: "), err
    assert f"cuda:{gpu.count}" in err[0]


def test_profile_of_a_missing_gpu_is_refused_and_stores_nothing(gpu, tmp_path):
    store = tmp_path / "r.sqlite"
    result = accelbench("profile", "gemm", "-p", "shape=64", "--device", f"cuda:{gpu.count}",
                        "--store", str(store), "--json")
    assert result.returncode == EXIT_DEVICE, result.stderr
    assert result.stderr.startswith("accelbench: error: ")
    with Store.open(store) as opened:
        assert opened.list_runs() == []


def test_accelbench_env_reports_the_gpu(gpu):
    result = accelbench("env", "--device", "cuda", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["platform"] == gpu.platform
    assert data["device"]["name"] == gpu.device.name
