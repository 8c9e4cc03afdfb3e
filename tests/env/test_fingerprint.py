from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from accelbench.core.peaks import lookup
from accelbench.env import fingerprint as fp_module
from accelbench.env.fingerprint import (
    FORMAT_VERSION,
    Fingerprint,
    collect,
    environment_switches,
    parse_torch_config,
)
from accelbench.env.vendor_tools import MISSING, ToolRun
from accelbench.errors import EXIT_DEVICE, DeviceError, StoreError
from accelbench.report.fingerprint import rows
from fakes import no_vendor_tools

ENV = {
    "HIPBLASLT_LOG_LEVEL": "0",
    "TORCH_BLAS_PREFER_HIPBLASLT": "1",
    "NCCL_DEBUG": "WARN",
    "OMP_NUM_THREADS": "8",
    "HOME": "/home/someone",
    "PATH": "/usr/bin",
    "PYTORCH_API_TOKEN": "secret",
}


# --- the CPU, for real ------------------------------------------------------------------


def test_cpu_fingerprint_from_the_installed_torch(fakes):
    calls: list[Sequence[str]] = []

    def run(argv: Sequence[str], timeout: float) -> ToolRun:
        calls.append(argv)
        return ToolRun(problem=MISSING)

    fp = collect("cpu", run=run, environ=ENV)
    data = fp.to_dict()
    assert fp.platform == "cpu" and data["platform"] == "cpu"
    assert fp.device.type == "cpu" and fp.device.index is None
    assert data["torch"]["version"] == torch.__version__
    assert data["torch"]["git_version"] == torch.version.git_version
    assert data["torch"]["blas"]
    assert data["libraries"]["collective"]["name"] == "gloo"
    host = data["host"]
    for key in ("hostname", "cpu_model", "logical_cores", "memory_bytes", "os", "python"):
        assert host[key], key
    assert fp.device.name == host["cpu_model"]
    assert data["devices"] == {"type": "cpu", "count": 1, "names": [host["cpu_model"]]}
    assert data["packages"]["numpy"]
    assert data["driver"] == {}
    assert calls == [], "no vendor tool is run for a CPU fingerprint"
    key = fp.generation_key
    assert "| CPU |" in key and key.endswith(f"PyTorch {torch.__version__.split('+')[0]}")


def test_cpu_fingerprint_is_stable_and_comes_back_whole_from_json():
    first = collect("cpu", run=no_vendor_tools, environ=ENV)
    second = collect("cpu", run=no_vendor_tools, environ=ENV)
    assert re.fullmatch(r"[0-9a-f]{16}", first.fingerprint_id)
    assert first.fingerprint_id == second.fingerprint_id
    loaded = Fingerprint.from_dict(json.loads(json.dumps(first.to_dict())))
    assert loaded == first and loaded.data == first.data
    assert loaded.fingerprint_id == first.fingerprint_id
    assert loaded.generation_key == first.generation_key


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_a_gpu_on_a_machine_without_one_is_a_device_error():
    with pytest.raises(DeviceError) as err:
        collect("cuda", run=no_vendor_tools, environ={})
    assert err.value.exit_code == EXIT_DEVICE
    assert "available: cpu" in str(err.value)


def test_cuda_on_a_cpu_only_build_names_the_build(fakes):
    with pytest.raises(DeviceError) as err:
        collect("cuda", torch_module=fakes.cpu_only(), run=fakes.no_tools, environ={})
    message = str(err.value)
    assert "CPU-only build" in message and "available: cpu" in message
    assert "\n" not in message


def test_hidden_gpus_are_named_in_the_error(fakes):
    env = {"HIP_VISIBLE_DEVICES": ""}
    with pytest.raises(DeviceError, match="HIP_VISIBLE_DEVICES=''"):
        collect("cuda:0", torch_module=fakes.mi250x(count=0), run=fakes.no_tools, environ=env)


def test_auto_falls_back_on_the_cpu(fakes):
    fp = collect("auto", torch_module=fakes.cpu_only(), run=fakes.no_tools, environ={})
    assert fp.device.type == "cpu"
    assert fp.generation_key.endswith("| CPU | PyTorch 2.5.1")


def test_importing_the_fingerprint_module_has_no_side_effects():
    code = (
        "import sys, subprocess\n"
        "calls = []\n"
        "subprocess.run = lambda *a, **k: calls.append(a)\n"
        "import accelbench.env.fingerprint, accelbench.env.metadata, accelbench.core.peaks\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert not calls, calls\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- ROCm, faked ------------------------------------------------------------------------


def test_mi250x_on_rocm_6_2(fakes):
    fp = collect(
        "auto", torch_module=fakes.mi250x(), run=fakes.replay("mi250x-rocm6.2"), environ=ENV
    )
    data = fp.data
    assert fp.platform == "rocm"
    assert fp.device.type == "cuda" and fp.device.index == 0 and fp.device.platform == "rocm"
    assert fp.device.name == "AMD Instinct MI250X"
    assert fp.device.arch == "gfx90a"
    assert fp.device.compute_units == 110 and fp.device.memory_bytes == 68702699520
    assert data["devices"] == {"type": "cuda", "count": 2, "names": ["AMD Instinct MI250X"] * 2}
    assert data["runtime"] == {
        "name": "ROCm",
        "version": "6.2.41133-dd7f95766",
        "hip": "6.2.41133-dd7f95766",
    }
    assert data["libraries"]["conv"] == {"name": "MIOpen", "version": "3.2.0"}
    assert data["libraries"]["collective"] == {"name": "RCCL", "version": "2.20.5"}
    assert data["torch"]["preferred_blas_library"] == "hipblaslt"
    assert data["torch"]["blas"] == "mkl"
    assert data["driver"]["tool"] == "amd-smi"
    assert data["driver"]["driver_version"] == "6.8.5"
    assert data["driver"]["rocm_version"] == "6.2.0"
    assert data["driver"]["products"] == ["AMD Instinct MI250X"] * 8
    assert fp.generation_key == "AMD Instinct MI250X | ROCm 6.2 | PyTorch 2.5.1"
    peaks = lookup(fp.device)
    assert peaks is not None and peaks.name == "AMD Instinct MI250X"
    assert fp.device.market_name == "AMD Instinct MI250X"  # amd-smi's, on every GPU
    assert data["product"] == {
        "label": "AMD Instinct MI250X",
        "name": "AMD Instinct MI250X",
        "identified_by": "device name",
        "peaks": "AMD Instinct MI250X",
    }


def test_rocm_driver_falls_back_on_rocm_smi(fakes):
    replay = fakes.replay("mi250x-rocm6.2")

    def without_amd_smi(argv, timeout):
        return fakes.no_tools(argv, timeout) if argv[0] == "amd-smi" else replay(argv, timeout)

    fp = collect("cuda:1", torch_module=fakes.mi250x(), run=without_amd_smi, environ={})
    assert fp.device.index == 1
    assert fp.data["driver"] == {
        "driver_version": "6.8.5",
        "products": ["AMD Instinct MI250X"] * 8,
        "tool": "rocm-smi",
        "problems": ["amd-smi: not installed"],
    }


def test_a_device_index_out_of_range_names_what_is_there(fakes):
    with pytest.raises(DeviceError) as err:
        collect("cuda:3", torch_module=fakes.mi250x(count=2), run=fakes.no_tools, environ={})
    message = str(err.value)
    assert err.value.exit_code == EXIT_DEVICE
    assert "'cuda:3'" in message and "2 cuda device(s)" in message
    assert "cuda:0..cuda:1 (AMD Instinct MI250X)" in message
    assert "\n" not in message


def test_mi300x_on_rocm_6_3(fakes):
    fp = collect(
        "cuda", torch_module=fakes.mi300x(), run=fakes.replay("mi300x-rocm6.3"), environ={}
    )
    assert fp.device.arch == "gfx942"
    assert fp.data["libraries"]["conv"] == {"name": "MIOpen", "version": "3.3.0"}
    assert fp.data["driver"]["driver_version"] == "6.10.5"
    assert fp.data["driver"]["rocm_version"] == "6.3.1"
    assert fp.generation_key == "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
    peaks = lookup(fp.device)
    assert peaks is not None and peaks.name == "AMD Instinct MI300X"


# --- CUDA, faked ------------------------------------------------------------------------


def test_h100_on_cuda_12_4(fakes):
    fp = collect(
        "auto",
        torch_module=fakes.h100(),
        run=fakes.replay("h100-cuda12.4"),
        environ={"CUDA_VISIBLE_DEVICES": "0,1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
    )
    data = fp.data
    assert fp.platform == "cuda"
    assert fp.device.arch == "sm_90" and fp.device.sm == 90
    assert fp.device.name == "NVIDIA H100 80GB HBM3"
    assert data["runtime"] == {"name": "CUDA", "version": "12.4", "cuda": "12.4"}
    assert data["libraries"]["conv"] == {"name": "cuDNN", "version": "9.1.0"}
    assert data["libraries"]["collective"] == {"name": "NCCL", "version": "2.21.5"}
    assert data["torch"]["preferred_blas_library"] == "cublaslt"
    assert data["driver"]["tool"] == "nvidia-smi"
    assert data["driver"]["driver_version"] == "550.90.07"
    assert data["driver"]["cuda_driver_version"] == "12.4"
    assert data["environment"] == {
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    assert fp.generation_key == "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.5.1"
    peaks = lookup(fp.device)
    assert peaks is not None and peaks.name == "NVIDIA H100 SXM5"


def test_a_fingerprint_survives_a_missing_vendor_tool_and_says_so(fakes):
    fp = collect("cuda", torch_module=fakes.h100(), run=fakes.no_tools, environ={})
    assert fp.data["driver"] == {"problems": ["nvidia-smi: not installed"]}
    assert fp.generation_key == "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.5.1"


# --- storing ----------------------------------------------------------------------------


BUILDS = {
    "mi250x": ("mi250x-rocm6.2", "AMD Instinct MI250X | ROCm 6.2 | PyTorch 2.5.1"),
    "mi300x": ("mi300x-rocm6.3", "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"),
    "h100": ("h100-cuda12.4", "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.5.1"),
}


def _build(fakes, build, environ=None, device="cuda:0"):
    node, _ = BUILDS[build]
    return collect(device, torch_module=getattr(fakes, build)(), run=fakes.replay(node),
                   environ=ENV if environ is None else environ)


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_round_trip_through_json_keeps_every_field_and_the_identity(fakes, build):
    fp = _build(fakes, build)
    stored = json.loads(json.dumps(fp.to_dict()))
    assert stored["format_version"] == FORMAT_VERSION == 1
    loaded = Fingerprint.from_dict(stored)
    assert loaded == fp and loaded.data == fp.data and loaded.device == fp.device
    assert loaded.to_dict() == fp.to_dict()
    assert loaded.fingerprint_id == fp.fingerprint_id
    assert loaded.generation_key == fp.generation_key == BUILDS[build][1]


def test_the_identity_is_the_content_not_the_order_it_was_written_in(fakes):
    fp = _build(fakes, "mi250x")
    shuffled = dict(reversed(list(fp.to_dict().items())))
    assert Fingerprint.from_dict(shuffled).fingerprint_id == fp.fingerprint_id
    changed = json.loads(json.dumps(fp.to_dict()))
    changed["libraries"]["collective"]["version"] = "2.20.6"  # one library, one patch
    assert Fingerprint.from_dict(changed).fingerprint_id != fp.fingerprint_id


def test_builds_of_different_generations_have_different_keys_and_ids(fakes):
    made = {build: _build(fakes, build) for build in BUILDS}
    assert len({fp.generation_key for fp in made.values()}) == len(BUILDS)
    assert len({fp.fingerprint_id for fp in made.values()}) == len(BUILDS)
    # The generation key names the product, the runtime's major.minor and PyTorch,
    # whatever the device index, the driver found or the switches set.
    other = collect("cuda:1", torch_module=fakes.mi250x(), run=fakes.no_tools,
                    environ={"HIPBLASLT_LOG_LEVEL": "3"})
    assert other.generation_key == made["mi250x"].generation_key
    assert other.fingerprint_id != made["mi250x"].fingerprint_id


def test_a_newer_format_is_refused_clearly(fakes):
    stored = collect("cpu", run=fakes.no_tools, environ={}).to_dict()
    stored["format_version"] = 2
    with pytest.raises(StoreError, match="format version 2, newer than this accelbench reads"):
        Fingerprint.from_dict(stored)
    del stored["format_version"]
    with pytest.raises(StoreError, match="stack fingerprint has an invalid format_version"):
        Fingerprint.from_dict(stored)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TORCH_BLAS_PREFER_HIPBLASLT", "0"),
        ("HIPBLASLT_TENSILE_LIBPATH", "/opt/tuned"),
        ("ROCBLAS_LAYER", "2"),
        ("MIOPEN_FIND_MODE", "FAST"),
        ("NCCL_MIN_NCHANNELS", "112"),
        ("HIP_VISIBLE_DEVICES", "0"),
        ("PYTORCH_TUNABLEOP_ENABLED", "1"),
        ("OMP_NUM_THREADS", "4"),
    ],
)
def test_an_environment_switch_lands_in_the_fingerprint_and_changes_its_id(fakes, name, value):
    def make(env):
        return collect("cuda", torch_module=fakes.mi250x(), run=fakes.no_tools, environ=env)

    plain, tuned = make({"HOME": "/root"}), make({"HOME": "/root", name: value})
    assert tuned.data["environment"] == {name: value}
    assert plain.data["environment"] == {}
    assert plain.fingerprint_id != tuned.fingerprint_id
    assert make({"HOME": "/root", name: value + "1"}).fingerprint_id != tuned.fingerprint_id
    assert plain.generation_key == tuned.generation_key
    stored = Fingerprint.from_dict(json.loads(json.dumps(tuned.to_dict())))
    assert stored.data["environment"] == {name: value}


def test_unrelated_variables_and_secrets_change_nothing(fakes):
    def make(env):
        return collect("cuda", torch_module=fakes.mi250x(), run=fakes.no_tools, environ=env)

    plain = make({})
    noisy = make({"HOME": "/home/other", "PATH": "/opt/bin", "LANG": "C", "SSH_AUTH_SOCK": "x",
                  "NCCL_API_KEY": "k", "HIPBLASLT_TOKEN": "t", "TORCH_PASSWORD": "p"})
    assert noisy.data["environment"] == {}
    assert noisy.fingerprint_id == plain.fingerprint_id
    assert "secret" not in json.dumps(make(ENV).to_dict())


# --- pieces -----------------------------------------------------------------------------


def test_environment_switches_keep_what_changes_results_and_no_secrets():
    assert environment_switches(ENV) == {
        "HIPBLASLT_LOG_LEVEL": "0",
        "NCCL_DEBUG": "WARN",
        "OMP_NUM_THREADS": "8",
        "TORCH_BLAS_PREFER_HIPBLASLT": "1",
    }


def test_parse_torch_config_reads_the_rocm_build(fakes):
    assert parse_torch_config(fakes.rocm_config) == {
        "blas": "mkl",
        "lapack": "mkl",
        "cpu_capability": "AVX512",
        "onednn_version": "3.5.3",
        "mkl_version": "2022.2",
        "hip_runtime": "6.2.41133",
        "miopen_version": "3.2.0",
    }
    assert parse_torch_config("") == {}
    assert parse_torch_config(None) == {}


def test_library_versions_are_decoded():
    assert fp_module._cudnn_version(8902) == "8.9.2"
    assert fp_module._cudnn_version(90100) == "9.1.0"
    assert fp_module._miopen_version(3002000) == "3.2.0"
    assert fp_module._dotted((2, 20, 5)) == "2.20.5"
    assert fp_module._dotted((2, 21, 5, "+cuda12.4")) == "2.21.5+cuda12.4"


# --- which product: names that say too little -------------------------------------------

MI300X_MEMORY = 205822885888
GCD_MEMORY = 68702699520


def _rocm(fakes, name, arch, memory, cus, run=None):
    torch_module = fakes.rocm(name, arch, memory, cus)
    return collect("cuda", torch_module=torch_module, run=run or fakes.no_tools, environ={})


def test_an_mi300x_that_rocm_calls_amd_radeon_graphics_is_an_mi300x(fakes):
    fp = _rocm(fakes, "AMD Radeon Graphics", "gfx942:sramecc+:xnack-", MI300X_MEMORY, 304)
    peaks = lookup(fp.device)
    assert peaks is not None and peaks.name == "AMD Instinct MI300X"
    named = collect("cuda", torch_module=fakes.mi300x(), run=fakes.no_tools, environ={})
    assert fp.generation_key == named.generation_key == (
        "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0")
    assert fp.device.name == "AMD Radeon Graphics"  # what PyTorch said is kept
    assert fp.data["product"] == {
        "label": "AMD Instinct MI300X",
        "name": "AMD Instinct MI300X",
        "identified_by": "gfx942, 304 CUs, 192 GiB",
        "peaks": "AMD Instinct MI300X",
    }
    mi325x = _rocm(fakes, "AMD Radeon Graphics", "gfx942", 256 << 30, 304)
    assert mi325x.generation_key == "AMD Instinct MI325X | ROCm 6.3 | PyTorch 2.6.0"


def test_mi250x_and_mi250_gcds_named_alike_are_told_apart_by_their_cus(fakes):
    shared = "AMD Instinct MI250X / MI250"
    mi250x = _rocm(fakes, shared, "gfx90a:sramecc+:xnack-", GCD_MEMORY, 110)
    mi250 = _rocm(fakes, shared, "gfx90a:sramecc+:xnack-", GCD_MEMORY, 104)
    assert mi250x.generation_key == "AMD Instinct MI250X | ROCm 6.3 | PyTorch 2.6.0"
    assert mi250.generation_key == "AMD Instinct MI250 | ROCm 6.3 | PyTorch 2.6.0"
    assert mi250.data["product"]["identified_by"] == "device name and gfx90a, 104 CUs, 64 GiB"
    peaks = lookup(mi250x.device)
    assert peaks is not None and peaks.name == "AMD Instinct MI250X"
    peaks = lookup(mi250.device)
    assert peaks is not None and peaks.name == "AMD Instinct MI250"


def test_amd_smi_tells_an_mi210_from_an_mi250_gcd(fakes):
    args = ("AMD Radeon Graphics", "gfx90a", GCD_MEMORY, 104)
    told = _rocm(fakes, *args, run=fakes.replay("mi210-rocm6.2"))
    untold = _rocm(fakes, *args)
    assert told.generation_key == "AMD Instinct MI210 | ROCm 6.3 | PyTorch 2.6.0"
    assert told.device.market_name == "AMD Instinct MI210"
    assert told.data["product"]["name"] == "AMD Instinct MI210"
    assert told.data["product"]["identified_by"] == "vendor tool's product name"
    assert untold.data["product"]["candidates"] == ["AMD Instinct MI210", "AMD Instinct MI250"]
    assert untold.generation_key == (
        "AMD Instinct MI210 or AMD Instinct MI250 | ROCm 6.3 | PyTorch 2.6.0")
    # Their devices rate the same, so the result still gets its % of peak.
    untold_peaks, told_peaks = lookup(untold.device), lookup(told.device)
    assert untold_peaks is not None and told_peaks is not None
    assert untold_peaks.dense_flops("fp16") == pytest.approx(
        told_peaks.dense_flops("fp16"), rel=0.005)


def test_a_cpx_partition_of_an_mi300x_is_recognised_and_keyed_apart(fakes):
    fp = _rocm(fakes, "AMD Radeon Graphics", "gfx942", 48 << 30, 38,
               run=fakes.replay("mi300x-cpx-rocm6.3"))
    peaks = lookup(fp.device)
    assert peaks is not None and peaks.devices_per_package == 8
    assert fp.generation_key == "AMD Instinct MI300X (CPX) | ROCm 6.3 | PyTorch 2.6.0"
    assert fp.data["product"]["name"] == "AMD Instinct MI300X"
    assert fp.data["product"]["partition"] == "CPX"


def test_a_gpu_that_cannot_be_identified_says_why_in_its_fingerprint(fakes):
    fp = _rocm(fakes, "AMD Radeon Graphics", "gfx1100", 48 << 30, 96)
    assert fp.generation_key.startswith("AMD Radeon PRO W7900 or AMD Radeon PRO W7900 Dual Slot")
    product = fp.data["product"]
    assert "name" not in product and "peaks" not in product
    assert product["candidates"] == ["AMD Radeon PRO W7900", "AMD Radeon PRO W7900 Dual Slot"]
    assert "no published figures for AMD Radeon PRO W7900 Dual Slot" in product["no_peaks"]
    assert lookup(fp.device) is None


def test_a_fingerprint_stored_before_products_were_identified_still_loads(fakes):
    stored = collect("cuda", torch_module=fakes.mi250x(), run=fakes.no_tools,
                     environ={}).to_dict()
    stored.pop("product", None)
    for key in ("market_name", "compute_units", "memory_bytes", "l2_cache_bytes"):
        stored["device"].pop(key, None)
    loaded = Fingerprint.from_dict(json.loads(json.dumps(stored)))
    assert loaded.device.market_name is None and loaded.device.compute_units is None
    assert loaded.generation_key == "AMD Instinct MI250X | ROCm 6.2 | PyTorch 2.5.1"
    peaks = lookup(loaded.device)
    assert peaks is not None and peaks.name == "AMD Instinct MI250X"


def test_the_recorded_product_names_the_generation_whatever_the_table_says_today(fakes):
    stored = _rocm(fakes, "AMD Radeon Graphics", "gfx942", MI300X_MEMORY, 304).to_dict()
    stored["product"]["label"] = "AMD Instinct MI300X (as identified then)"
    assert Fingerprint.from_dict(stored).generation_key.startswith(
        "AMD Instinct MI300X (as identified then) | ")


# --- vendor tools that time out ---------------------------------------------------------


def test_a_timed_out_vendor_tool_is_named_in_the_fingerprint_and_stored(fakes, tmp_path):
    from accelbench.env.vendor_tools import NVIDIA_SMI_QUERY, TIMED_OUT, ToolRun
    from accelbench.store import Store, export_json, load_json

    def run(argv, timeout):
        if tuple(argv) == NVIDIA_SMI_QUERY:
            return ToolRun(problem=TIMED_OUT, detail=f"no answer within {timeout:g} s")
        return fakes.replay("h100-cuda12.4")(argv, timeout)

    fp = collect("cuda", torch_module=fakes.h100(), run=run, environ={})
    assert fp.data["driver"] == {
        "problems": ["nvidia-smi --query-gpu: timed out (no answer within 20 s)"]
    }
    with Store.open(tmp_path / "results.sqlite") as store:
        run_id = store.begin_run(fingerprint=fp.to_dict(), fingerprint_id=fp.fingerprint_id,
                                 generation_key=fp.generation_key, device="cuda:0",
                                 suite=None, argv=["run"], host="h100-01",
                                 accelbench_version="0.1.0")
        store.finish_run(run_id, "complete")
        stored = store.load_run(run_id)
    (again,) = load_json(json.loads(json.dumps(export_json([stored]))))
    assert Fingerprint.from_dict(again.fingerprint) == fp


def test_the_fingerprint_keeps_the_nodes_wiring_read_for_its_platform(fakes) -> None:
    asked: list[str] = []

    def wiring(platform: str) -> dict[str, Any]:
        asked.append(platform)
        return {"signature": "GPU0: X NV18; GPU1: NV18 X", "direct": {"source": "nvml"}}

    fp = collect("cuda:1", torch_module=fakes.mi250x(), run=fakes.no_tools, environ={},
                 wiring=wiring)
    assert asked == ["rocm"]
    assert fp.data["topology"]["signature"] == "GPU0: X NV18; GPU1: NV18 X"
    assert ("GPU/NIC wiring", "GPU0: X NV18; GPU1: NV18 X") in rows(fp.to_dict())
    assert ("GPU links read from", "nvml") in rows(fp.to_dict())


def test_this_machines_wiring_is_read_from_sysfs_without_a_gpu_library() -> None:
    wiring = collect("cpu", run=no_vendor_tools, environ=ENV).data["topology"]
    assert "missing" in wiring or (
        isinstance(wiring["signature"], str) and wiring["direct"]["read"] is False
        and wiring["direct"]["missing"] == "no GPU library was asked")
