"""Determinism for real on the CPU, PyTorch's own words where it has no deterministic
implementation, and a computation made to vary from run to run."""

from __future__ import annotations

import os

import pytest
import torch
from validation_helpers import CPU, figures, run_check

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.validation import determinism
from accelbench.core.device import DeviceInfo

BENCH = determinism.BENCHMARK


@pytest.mark.parametrize("op", ["matmul", "conv", "index-add", "embedding-bag", "sdpa"])
def test_each_computation_is_bit_identical_twice(op):
    m = run_check(BENCH, op=op)
    assert m.status == "ok", m.reason
    assert figures(m)["error"] == 0 and figures(m)["tolerance"] == 0
    assert figures(m)["elements"] > 0
    assert m.details["settings"]["use_deterministic_algorithms"] is True


def test_the_deterministic_settings_are_restored_after_the_check():
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
              os.environ.get(determinism.CUBLAS_CONFIG))
    run_check(BENCH, op="matmul")
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
            os.environ.get(determinism.CUBLAS_CONFIG)) == before


def test_no_deterministic_implementation_is_a_skip_in_pytorchs_words():
    m = run_check(BENCH, op="max-unpool")
    assert m.status == "skipped"
    assert m.reason == (
        "PyTorch has no deterministic implementation of max-unpool on cpu: "
        "max_unpooling2d_forward_out does not have a deterministic implementation, but you "
        "set 'torch.use_deterministic_algorithms(True)'.")


def test_a_result_that_varies_between_runs_fails(monkeypatch):
    real = torch.matmul

    def matmul(a, b, **kwargs):  # atomics in another order: the last bits move
        out = real(a, b, **kwargs)
        return out + torch.rand_like(out) * 1e-6

    monkeypatch.setattr(torch, "matmul", matmul)
    m = run_check(BENCH, op="matmul")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("not deterministic: matmul in fp32 gave ")
    assert "elements different the second time (a @ b^T;" in m.reason
    assert figures(m)["error"] > 0


def test_pytorch_reason_keeps_its_first_sentence():
    error = RuntimeError("op does not have a deterministic implementation, but you set "
                         "'torch.use_deterministic_algorithms(True)'. You can turn off ...")
    assert determinism.pytorch_reason(error).endswith("(True)'.")


# --- cuBLAS's workspace setting, read when a handle is made -------------------------------

H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * 2**30)
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * 2**30)


def test_cuda_determinism_workers_start_with_the_cublas_workspace_setting():
    """cuBLAS reads CUBLAS_WORKSPACE_CONFIG when it creates a handle, and a worker may
    have made one in an earlier case: the setting is in the worker's environment from
    its start, in a worker of its own."""
    params = BENCH.resolve({"op": "matmul"})
    env = BENCH.environment(params, H100)
    assert dict(env.values) == {determinism.CUBLAS_CONFIG: ":4096:8"}
    assert not BENCH.environment(params, MI300X) and not BENCH.environment(params, CPU)
    numerics = REGISTRY.get("numerics")
    assert BENCH.worker_identity(params, H100) != numerics.worker_identity(
        numerics.resolve({"op": "matmul"}), H100)
    # The user's own value is kept; the check says whether it is a deterministic one.
    assert not env.for_user({determinism.CUBLAS_CONFIG: ":0:0"})


def test_the_check_never_sets_the_cublas_setting_itself(monkeypatch):
    """Set inside the case it would come after cuBLAS read it (the check would pass
    PyTorch's own test of the variable and run with the old workspace)."""
    monkeypatch.delenv(determinism.CUBLAS_CONFIG, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    with determinism.deterministic(torch) as settings:
        assert determinism.CUBLAS_CONFIG not in os.environ
        assert settings[determinism.CUBLAS_CONFIG] is None


@pytest.mark.parametrize(("value", "status"), [
    (None, "skipped"), (":0:0", "skipped"), (":4096:8", "ok"), (":16:8", "ok")])
def test_on_cuda_a_workspace_setting_that_is_not_deterministic_skips_with_the_reason(
        monkeypatch, value, status):
    if value is None:
        monkeypatch.delenv(determinism.CUBLAS_CONFIG, raising=False)
    else:
        monkeypatch.setenv(determinism.CUBLAS_CONFIG, value)
    cuda_on_cpu = DeviceInfo("cpu", None, "cuda", "NVIDIA H100 (on the CPU)", "sm_90")
    m = run_check(BENCH, device=cuda_on_cpu, op="matmul")
    assert m.status == status, m.reason
    if status == "skipped":
        assert m.reason is not None
        assert m.reason.startswith(f"{determinism.CUBLAS_CONFIG} is "
                                   f"{'unset' if value is None else repr(value)} in this "
                                   "worker")
        assert "cuBLAS reads it when it creates a handle" in m.reason
    else:
        assert m.details["settings"][determinism.CUBLAS_CONFIG] == value
