"""The memory test and the burn-in for real on the CPU (small), and with a word that does
not hold its pattern, and a GEMM that goes wrong under load."""

from __future__ import annotations

import pytest
import torch
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import burn, memtest
from accelbench.errors import UserError

MIB = 1 << 20


@pytest.mark.slow
def test_the_memory_test_reads_back_every_pattern():
    m = run_check(memtest.BENCHMARK, max_mib=192)
    assert m.status == "ok", m.reason
    f = figures(m)
    assert f["error"] == 0 and f["tolerance"] == 0
    assert f["tested"] == 128 * MIB  # one chunk of the 192 MiB holds the expected values
    assert m.details["wrong_words"] == dict.fromkeys(memtest.PATTERNS, 0)
    assert m.details["free_is"] == "available host memory"


@pytest.mark.slow
def test_the_cpu_is_tested_at_most_256_mib_by_default(monkeypatch):
    monkeypatch.setattr(memtest, "free_bytes", lambda torch, device: 64 << 30)
    m = run_check(memtest.BENCHMARK)
    assert m.details["cap_bytes"] == 256 * MIB
    assert figures(m)["tested"] <= 256 * MIB


@pytest.mark.slow
def test_a_stuck_word_fails_the_memory_test_with_its_address(monkeypatch):
    real = memtest.fill

    def fill(torch, pattern, chunk, index):
        real(torch, pattern, chunk, index)
        if pattern == "address" and index == 1:
            chunk[12345] ^= 1 << 17  # one bit that does not flip back

    monkeypatch.setattr(memtest, "fill", fill)
    m = run_check(memtest.BENCHMARK, max_mib=192)
    assert m.status == "failed"
    offset = (memtest.CHUNK_WORDS + 12345) * 8
    assert m.reason == (f"memory errors: 1 wrong words in 128 MiB (address: 1); first at byte "
                        f"offset {offset}")
    assert m.details["first_wrong"] == [{"pattern": "address", "chunk": 1, "word": 12345,
                                         "byte_offset": offset}]
    assert figures(m)["error"] == 1


@pytest.mark.parametrize("text", ["0", "1", "1.5", "-0.2", "nan"])
def test_a_memory_fraction_outside_0_and_1_is_refused(text):
    with pytest.raises(UserError, match="fraction"):
        memtest.BENCHMARK.resolve({"fraction": text})


@pytest.mark.slow
def test_a_short_burn_in_is_checked_and_keeps_its_intervals():
    m = run_check(burn.BENCHMARK, seconds=1.0, size=128, dtype="fp32", check_every=5)
    assert m.status == "ok", m.reason
    f = figures(m)
    assert f["error"] <= f["tolerance"] and f["throughput_first"] > 0
    intervals = m.details["intervals"]
    assert len(intervals) >= 2 and all(i["calls"] > 0 for i in intervals)
    assert m.details["checks"] >= m.details["calls"] // 5
    assert sum(i["calls"] for i in intervals) == m.details["calls"]


def test_a_gemm_that_goes_wrong_under_load_fails_the_burn_in(monkeypatch):
    real, calls = torch.matmul, []

    def matmul(a, b, out=None):
        calls.append(1)
        result = real(a, b, out=out)
        if len(calls) > 30:  # fine at first, wrong once the device is warm
            result.add_(1.0)
        return result

    monkeypatch.setattr(torch, "matmul", matmul)
    m = run_check(burn.BENCHMARK, seconds=30.0, size=64, dtype="fp32", check_every=10)
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("wrong result under load: relative error ")
    assert " for fp32 at call 40, " in m.reason and "into the burn-in (interval " in m.reason
    assert figures(m)["error"] > figures(m)["tolerance"]


def test_a_sagging_throughput_is_degradation_and_a_short_last_interval_is_not():
    steady = [{"seconds": 1.0, "throughput": 100.0}, {"seconds": 1.0, "throughput": 95.0}]
    first, last, lowest, sag = burn.throughput_sag(steady, 1.0)
    assert (first, last, lowest) == (100.0, 95.0, 95.0) and sag == pytest.approx(0.05)
    assert burn.degradation(0.05, 0.1) is None
    remainder = [*steady, {"seconds": 0.1, "throughput": 10.0}]
    assert burn.throughput_sag(remainder, 1.0)[1] == 95.0
    throttled = [{"seconds": 1.0, "throughput": 100.0}, {"seconds": 1.0, "throughput": 70.0}]
    sag = burn.throughput_sag(throttled, 1.0)[3]
    assert burn.degradation(sag, 0.1) == ("degraded: throughput fell 30.0% from the first "
                                          "interval to the last (more than 10%)")


def test_a_burn_in_may_run_for_as_long_as_it_is_asked():
    params = burn.BENCHMARK.resolve({"seconds": "3600"})
    assert burn.BENCHMARK.case_timeout(params) == burn.BENCHMARK.timeout_s + 3600
    for text in ("0", "-5", "inf", "nan"):
        with pytest.raises(UserError, match="seconds"):
            burn.BENCHMARK.resolve({"seconds": text})
