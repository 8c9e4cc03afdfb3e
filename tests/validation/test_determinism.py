"""Determinism for real on the CPU, PyTorch's own words where it has no deterministic
implementation, and a computation made to vary from run to run."""

from __future__ import annotations

import os

import pytest
import torch
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import determinism

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
