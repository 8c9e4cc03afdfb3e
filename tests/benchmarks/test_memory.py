"""The memory bandwidth benchmark, run for real on the CPU."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from accelbench.benchmarks.micro import memory
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseSkipped
from accelbench.errors import UserError
from fakes import run_benchmark

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
MIB = 1 << 20



def run(ctx: CaseContext, **given: object):
    return run_benchmark(memory.BENCHMARK, ctx, **given)


@pytest.mark.parametrize(("op", "buffers"), [("copy", 2), ("triad", 3)])
def test_device_ops_give_bytes_per_second(ctx: CaseContext, op: str, buffers: int) -> None:
    result, measurement = run(ctx, op=op, size_mib=2)
    assert result.timing.samples
    assert result.details["buffer_bytes"] == 2 * MIB
    assert result.details["bytes_per_call"] == buffers * 2 * MIB
    assert result.details["byte_formula"].startswith(f"{buffers} * buffer_bytes")
    (rate,) = result.rates
    assert rate.unit == "B/s" and rate.amount == buffers * 2 * MIB
    bandwidth = measurement.figure("bandwidth")
    assert math.isfinite(bandwidth.value) and bandwidth.value > 0
    assert bandwidth.value == pytest.approx(rate.amount / measurement.stats.median, rel=1e-9)
    # On the CPU the buffers are mapped for huge pages, and how many the kernel gave is kept.
    assert 0.0 <= result.details["huge_page_share"] <= 1.0


@pytest.mark.parametrize("op", ["h2d", "d2h"])
def test_transfers_are_skipped_on_a_cpu(ctx: CaseContext, op: str) -> None:
    with pytest.raises(CaseSkipped, match="the CPU has none"):
        run(ctx, op=op, size_mib=1)


def test_device_peak_is_passed_through(ctx: CaseContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "accelbench.core.peaks.lookup", lambda device: SimpleNamespace(memory_bandwidth=1e11)
    )
    result, measurement = run(ctx, op="copy", size_mib=1)
    assert result.rates[0].peak == 1e11
    assert measurement.figure("bandwidth").pct_of_peak is not None


def test_buffers_within_cache_are_flagged(ctx: CaseContext) -> None:
    ctx.device = dataclasses.replace(CPU, l2_cache_bytes=4 * MIB)
    result, _ = run(ctx, op="copy", size_mib=1)
    assert any("L2 cache" in w for w in result.warnings)


@pytest.mark.parametrize(("share", "warned"), [(0.0, True), (0.3, True), (1.0, False)])
def test_buffers_mostly_on_small_pages_are_flagged(
    ctx: CaseContext, monkeypatch: pytest.MonkeyPatch, share: float, warned: bool
) -> None:
    monkeypatch.setattr(memory, "huge_page_share", lambda buffers: share)
    result, _ = run(ctx, op="copy", size_mib=1)
    assert result.details["huge_page_share"] == share
    assert any("on huge pages" in w for w in result.warnings) is warned


def test_a_wrong_triad_fails(ctx: CaseContext, monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.add

    def wrong(b, c, *, alpha, out):
        return real(b, c, alpha=alpha + 1, out=out)

    monkeypatch.setattr(torch, "add", wrong)
    with pytest.raises(CaseFailed, match="wrong result"):
        run(ctx, op="triad", size_mib=1)


def test_params_are_validated() -> None:
    bench = memory.BENCHMARK
    assert bench.resolve({}) == {"op": "copy", "size_mib": 256, "pinned": True}
    assert bench.resolve({"op": "h2d", "pinned": "no", "size_mib": "64"})["pinned"] is False
    # A device copy has no host buffer: pinned keeps its default and is no part of the case.
    assert bench.resolve({"pinned": "no", "size_mib": "64"})["pinned"] is True
    with pytest.raises(UserError, match="size_mib=0 is below 1"):
        bench.resolve({"size_mib": 0})
    with pytest.raises(UserError, match="not one of: copy, triad, h2d, d2h"):
        bench.resolve({"op": "scale"})
