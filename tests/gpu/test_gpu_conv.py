"""Convolution on the GPU with the library's algorithm search on and off (cuDNN's
benchmark mode on CUDA, MIOpen's exhaustive find on ROCm)."""

from __future__ import annotations

import pytest
from gpu_runs import run_on_gpu

pytestmark = pytest.mark.gpu

LIBRARY = {"cuda": "cuDNN", "rocm": "MIOpen"}


@pytest.fixture(scope="module")
def by_search(tmp_path_factory):
    store = tmp_path_factory.mktemp("conv") / "results.sqlite"
    run = run_on_gpu(store, ["conv"],
                     {"layer": "resnet50.layer1.0.conv2", "batch": "8", "dtype": "bf16",
                      "direction": "fwd", "layout": "nchw", "search": "true,false"})
    return {m.case.param_dict["search"]: m for m in run.measurements}


def test_search_on_and_off_run_checked_each_in_a_fresh_process(by_search, gpu):
    assert sorted(by_search) == [False, True]
    for search, m in by_search.items():
        assert m.status == "ok", (search, m.reason)
        details = m.details
        assert details["conv_library"] == LIBRARY[gpu.platform]
        assert details["flags"]["cudnn.benchmark"] is search
        # Both cases run the same problem: had they shared a worker, the second would have
        # taken the first one's algorithm from PyTorch's per-process cache.
        assert details["algorithm_cache"] == "cold", search
        assert details["check_rel_error_full"] <= details["check_tolerance"]
        assert m.figure("throughput").unit == "FLOP/s" and m.figure("throughput").value > 0
        assert m.figure("first_call_time").value > 0


def test_the_search_is_timed_apart_only_when_it_is_on(by_search):
    on, off = by_search[True], by_search[False]
    search_time = on.figure("search_time")
    assert search_time is not None and search_time.value >= 0
    assert on.details["search_time_s"] == search_time.value
    assert off.figure("search_time") is None and "search_time_s" not in off.details


def test_the_selection_recorded_is_the_one_in_force(by_search, gpu):
    on, off = (by_search[s].details["algorithm_selection"] for s in (True, False))
    if gpu.platform == "cuda":
        assert on.startswith("cuDNN benchmark") and off == "cuDNN heuristics, no search"
    elif by_search[True].details["flags"].get("miopen.immediate"):
        assert on == off and on.startswith("MIOpen immediate mode")
    else:
        assert on.startswith("MIOpen find with exhaustive search")
        assert off.startswith("MIOpen find without exhaustive search")
        assert "miopen_find_mode" in by_search[False].details
