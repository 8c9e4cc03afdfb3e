"""torchvision for real with the pinned torch, and made wrong on purpose: an operator that
raises, one that returns something else, a build for another torch, none installed."""

from __future__ import annotations

import sys

import pytest
import torch
import torchvision
from torchvision.version import __version__ as torchvision_version
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import vision

BENCH = vision.BENCHMARK
# The releases installed (the pinned pair, or the oldest supported one), as a CUDA 13.0
# build whatever build is installed, so that the texts below are the same everywhere.
TORCH = torch.__version__.split("+", 1)[0]
TV = torchvision_version.split("+", 1)[0]
LINE = f"pip install torchvision=={TV} --index-url https://download.pytorch.org/whl/cu130"


@pytest.fixture(autouse=True)
def _pinned_torch(monkeypatch):
    """The checks read torch's and torchvision's versions; give them the installed
    releases as one build."""
    monkeypatch.setattr(torch, "__version__", f"{TORCH}+cu130")
    monkeypatch.setattr(torchvision, "__version__", f"{TV}+cu130")


@pytest.mark.parametrize("check", vision.VISION_CHECKS)
def test_every_torchvision_check_passes_for_real(check):
    m = run_check(BENCH, check=check)
    assert m.status == "ok", m.reason
    assert m.details["torchvision"]["problems"] == []
    assert all(m.details["operators"].values())
    if check != "build":
        f = figures(m)
        assert f["error"] <= f["tolerance"]


def test_greedy_nms_keeps_the_best_box_of_each_overlapping_group():
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=torch.float64)
    scores = torch.tensor([0.5, 0.9, 0.7], dtype=torch.float64)
    assert vision.greedy_nms(torch, boxes, scores, 0.5) == [1, 2]
    assert torchvision.ops.nms(boxes, scores, 0.5).tolist() == [1, 2]


def test_an_operator_that_raises_fails_its_check_with_the_error(monkeypatch):
    def nms(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torchvision.ops, "nms", nms)
    m = run_check(BENCH, check="nms")
    assert m.status == "failed"
    assert m.reason == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_nms_that_keeps_other_boxes_fails(monkeypatch):
    real = torchvision.ops.nms
    monkeypatch.setattr(torchvision.ops, "nms", lambda *a, **k: real(*a, **k)[:-2])
    m = run_check(BENCH, check="nms")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("wrong result: torchvision.ops.nms kept ")
    assert "2 differ" in m.reason and figures(m)["error"] == 2


@pytest.mark.parametrize(("check", "name", "what"), [
    ("roi-align", "roi_align", "torchvision.ops.roi_align"),
    ("deform-conv2d", "deform_conv2d", "torchvision.ops.deform_conv2d"),
])
def test_an_operator_that_computes_wrong_fails(monkeypatch, check, name, what):
    real = getattr(torchvision.ops, name)

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        return out if out.dtype == torch.float64 else out * 1.001

    monkeypatch.setattr(torchvision.ops, name, wrong)
    m = run_check(BENCH, check=check)
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith(f"wrong result: {what}: ")


def test_an_operator_without_a_kernel_for_the_device_is_a_skip(monkeypatch):
    def nms(*args, **kwargs):
        raise NotImplementedError("Could not run 'torchvision::nms' with arguments from the "
                                  "'CUDA' backend.")

    monkeypatch.setattr(torchvision.ops, "nms", nms)
    m = run_check(BENCH, check="nms")
    assert m.status == "skipped"
    assert m.reason is not None
    assert m.reason.startswith("torchvision has no cpu kernel for nms: Could not run")
    assert m.reason.endswith(LINE)


def test_a_torchvision_for_another_torch_is_skipped_with_the_install_line(monkeypatch):
    monkeypatch.setattr(torchvision, "__version__", "0.20.1+cu124")
    for check in ("build", "nms"):
        m = run_check(BENCH, check=check)
        assert m.status == "skipped"
        assert m.reason == (
            f"torchvision 0.20.1+cu124 is not built for torch {TORCH}+cu130: torchvision "
            f"0.20.1 goes with another torch; torch {TORCH} goes with torchvision {TV}; "
            f"torchvision is a cu124 build, torch a cu130 build; install the build for this "
            f"torch: {LINE}")


def test_operators_that_did_not_register_are_a_skip(monkeypatch):
    monkeypatch.setattr(vision, "_registered", lambda torch, tv: dict.fromkeys(vision.OPERATORS,
                                                                               False))
    m = run_check(BENCH, check="build")
    assert m.status == "skipped"
    assert m.reason is not None
    assert "its C++ operators did not register: nms, roi_align" in m.reason


@pytest.mark.slow
def test_without_torchvision_the_checks_are_skipped_not_crashed(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)
    m = run_check(BENCH, check="resnet")
    assert m.status == "skipped"
    assert m.reason == f"torchvision is not installed; install the build for torch " \
                       f"{TORCH}+cu130: {LINE}"
