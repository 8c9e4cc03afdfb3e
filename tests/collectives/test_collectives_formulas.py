"""Bandwidth formulas, sizes, support rules and the known-result data, without ranks."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from accelbench.benchmarks.collectives import ops
from accelbench.benchmarks.collectives.declaration import BENCHMARK
from accelbench.benchmarks.collectives.summary import summarize_sweep
from accelbench.benchmarks.collectives.view import collectives_table, sections
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.timing import TimingPolicy
from accelbench.core.view import Lines
from fakes import stored_measurement

MIB = 1 << 20


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        # Hand-computed from nccl-tests' doc/PERFORMANCE.md.
        ("all-reduce", 2, 1.0),  # 2 * 1 / 2
        ("all-reduce", 4, 1.5),  # 2 * 3 / 4
        ("all-reduce", 8, 1.75),  # 2 * 7 / 8
        ("all-gather", 2, 0.5),
        ("all-gather", 4, 0.75),
        ("reduce-scatter", 8, 0.875),
        ("all-to-all", 4, 0.75),
        ("gather", 4, 0.75),
        ("scatter", 16, 0.9375),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("send-recv", 2, 1.0),
        ("send-recv", 16, 1.0),
    ],
)
def test_bus_factors_match_nccl_tests(op, n, factor):
    assert ops.bus_factor(op, n) == pytest.approx(factor)


def test_barrier_has_no_bandwidth_and_unknown_ops_are_refused():
    assert ops.bus_factor("barrier", 4) is None
    with pytest.raises(ValueError, match="moves no data"):
        ops.bandwidths("barrier", 0, 1e-5, 4)
    with pytest.raises(ValueError, match="unknown collective"):
        ops.bus_factor("allreduce", 4)


def test_bandwidths_by_hand():
    # 64 MiB all-reduce on 8 ranks in 1 ms: algbw = 67.108864 GB/s, busbw = * 7/4.
    algbw, busbw = ops.bandwidths("all-reduce", 64 * MIB, 1e-3, 8)
    assert algbw == pytest.approx(67.108864e9)
    assert busbw == pytest.approx(117.440512e9)
    # 1 GiB all-gather on 4 ranks in 25 ms: S/t = 42.95 GB/s, busbw * 3/4.
    algbw, busbw = ops.bandwidths("all-gather", 1 << 30, 25e-3, 4)
    assert algbw == pytest.approx(42.94967296e9)
    assert busbw == pytest.approx(32.21225472e9)
    # send-recv: bus = alg.
    assert ops.bandwidths("send-recv", 1000, 1e-6, 2) == pytest.approx((1e9, 1e9))


@pytest.mark.parametrize(
    ("op", "nbytes", "element", "n", "count"),
    [
        ("all-reduce", 100, 4, 4, 25),  # whole elements only
        ("all-gather", 100, 4, 4, 24),  # and a multiple of n where split
        ("reduce-scatter", 8, 4, 4, 0),  # not one element per rank
        ("all-to-all", 1 << 20, 2, 8, 1 << 19),
        ("send-recv", 7, 2, 2, 3),
        ("barrier", 1 << 20, 4, 2, 0),
    ],
)
def test_element_counts(op, nbytes, element, n, count):
    assert ops.element_count(op, nbytes, element, n) == count


def test_send_recv_pairs_cross_the_halves_of_the_job():
    assert ops.peers(0, 2) == (1, 1)
    assert [ops.peers(r, 16)[0] for r in (0, 7, 8, 15)] == [8, 15, 0, 7]
    assert ops.peers(2, 3) == (0, 1)  # odd worlds: a shifted ring
    assert sorted(ops.peers(r, 6)[0] for r in range(6)) == list(range(6))


@pytest.mark.parametrize(
    ("op", "backend", "dtype", "reduce", "inplace", "n", "reason"),
    [
        ("all-reduce", "gloo", "fp32", "sum", "auto", 1, "needs at least 2 ranks"),
        ("all-reduce", "gloo", "int32", "avg", "auto", 2, "gloo averages floating-point"),
        ("all-reduce", "nccl", "int32", "avg", "auto", 2, None),
        ("all-reduce", "nccl", "int8", "avg", "auto", 128, "exact check of avg"),
        ("all-gather", "gloo", "fp32", "max", "auto", 2, "all-gather does not reduce"),
        ("gather", "nccl", "fp32", "sum", "yes", 2, "only out of place"),
        ("all-reduce", "nccl", "fp32", "sum", "no", 2, "only in place"),
        ("all-reduce", "nccl", "fp32", "sum", "yes", 2, None),
        ("reduce-scatter", "gloo", "bf16", "sum", "yes", 4, None),
        ("barrier", "gloo", "fp32", "sum", "yes", 2, "barrier moves no data"),
        ("reduce-scatter", "mpi", "fp32", "sum", "auto", 2, "mpi backend has no"),
        ("all-reduce", "mpi", "bf16", "sum", "auto", 2, "mpi backend has no bf16"),
        ("all-reduce", "mpi", "fp32", "avg", "auto", 2, "no avg"),
        ("all-to-all", "mpi", "fp32", "sum", "auto", 2, None),
    ],
)
def test_what_is_skipped_and_why(op, backend, dtype, reduce, inplace, n, reason):
    got = ops.unsupported(op, backend, dtype, reduce, inplace, n)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


def test_inplace_auto_takes_the_out_of_place_form_where_there_are_both():
    assert ops.in_place("all-gather", "auto") is False
    assert ops.in_place("reduce-scatter", "yes") is True
    assert ops.in_place("all-reduce", "auto") is True
    assert ops.in_place("all-to-all", "auto") is False
    assert ops.in_place("barrier", "auto") is None


_REDUCE: dict[str, Callable[[Sequence[int]], float]] = {
    "sum": sum, "avg": lambda xs: sum(xs) / len(xs), "max": max, "min": min,
    "prod": lambda xs: functools.reduce(operator.mul, xs, 1)}


@pytest.mark.parametrize("reduce", ops.REDUCE_OPS)
@pytest.mark.parametrize("n", [2, 3, 4, 8, 64])
def test_reduction_data_has_an_exact_known_result(reduce, n):
    """Reducing every rank's tile gives the expected tile exactly, and leaving out any one
    rank's contribution changes the result somewhere."""
    limit = ops.ELEMENT_TYPES["bf16"].exact_limit
    tiles = [ops._reduction_data(r, n, reduce, limit) for r in range(n)]
    expected = tiles[0][1]
    assert all(t[1] == expected for t in tiles)
    assert max(max(t[0]) for t in tiles) <= limit  # exact in bf16, the narrowest type
    columns = list(zip(*(t[0] for t in tiles), strict=True))
    assert [_REDUCE[reduce](c) for c in columns] == expected
    for missing in range(n):
        partial = [[v for r, v in enumerate(c) if r != missing] for c in columns]
        if reduce == "avg":
            assert [sum(c) / n for c in partial] != expected
        else:
            assert [_REDUCE[reduce](c) for c in partial] != expected


def test_data_values_are_exact_in_int8_and_differ_between_sources():
    values = {tuple(ops._data(ops._seed(r))) for r in range(16)}
    assert len(values) == 16
    assert all(1 <= v <= 101 for vs in values for v in vs)


def test_counted_policy_is_nccl_tests_warmup_and_iterations():
    base = TimingPolicy(max_time=1.0)
    assert ops.counted_policy(base, 0, 0) is base
    counted = ops.counted_policy(base, 5, 20)
    assert counted.min_warmup_calls == 5 and counted.warmup_time == 0.0
    assert counted.max_block_calls == 20
    assert math.ceil(counted.block_time / 1e-9) >= 20  # so the cap decides the count


def _torch(hip: str | None, nccl: object) -> Any:
    """A stand-in for the torch module, with only what `ops.library` reads."""
    def version() -> object:
        if isinstance(nccl, Exception):
            raise nccl
        return nccl

    return SimpleNamespace(__version__="2.5.1", version=SimpleNamespace(hip=hip),
                           cuda=SimpleNamespace(nccl=SimpleNamespace(version=version)))


def test_library_names_rccl_on_rocm_builds_and_nccl_on_cuda_builds():
    assert ops.library(_torch("6.2.41133", (2, 20, 5)), "nccl") == "RCCL 2.20.5"
    assert ops.library(_torch(None, (2, 21, 5)), "nccl") == "NCCL 2.21.5"
    assert ops.library(_torch(None, RuntimeError("no nccl")), "nccl") == "NCCL"
    assert ops.library(_torch(None, None), "gloo") == "Gloo (PyTorch 2.5.1)"
    assert ops.library(_torch(None, None), "mpi") == "MPI"


def test_declaration():
    assert BENCHMARK.distributed and BENCHMARK.family == "collectives"
    assert BENCHMARK.resolve({}) == {"op": "all-reduce", "bytes": MIB, "dtype": "fp32",
                                     "reduce": "sum", "inplace": "auto", "warmup": 0,
                                     "iters": 0}
    assert BENCHMARK.resolve({"bytes": "64K"})["bytes"] == 65536
    assert BENCHMARK.load() is ops.measure
    assert {p["name"] for p in BENCHMARK.describe()["params"]} >= {"op", "bytes", "reduce"}


def _measured(op: str, nbytes: int, seconds: float, n: int = 2, **params) -> Measurement:
    identity = {**BENCHMARK.resolve({"op": op, "bytes": nbytes, **params}),
                "world_size": n, "backend": "gloo"}
    case = Case.make("collectives", "v", "collective", identity, "cpu")
    figures = [Figure("time" if op != "barrier" else "latency", seconds, "s", False)]
    factor = ops.bus_factor(op, n)
    if factor is not None:
        figures.insert(0, Figure("busbw", nbytes * factor / seconds, "B/s"))
    return stored_measurement(case, "ok", samples=(seconds,), number=1, figures=tuple(figures),
                       details={"bytes": nbytes, "library": "Gloo (PyTorch 2.5.1)", "nodes": 1})


def test_summary_gives_peak_bus_bandwidth_and_small_message_latency_per_sweep():
    sweep = [_measured("all-reduce", b, t) for b, t in ((8, 20e-6), (1 << 20, 1e-3),
                                                           (1 << 24, 10e-3), (1 << 26, 30e-3))]
    other = [_measured("all-reduce", 8, 30e-6, dtype="bf16"),
             _measured("barrier", 0, 15e-6)]
    failed = stored_measurement(Case.make("collectives", "v", "collective", {"op": "all-gather"},
                                   "cpu"), "failed", reason="boom")
    rows = summarize_sweep([*sweep, *other, failed])
    assert [(r.op, r.dtype) for r in rows] == [
        ("all-reduce", "fp32"), ("all-reduce", "bf16"), ("barrier", None)]
    first = rows[0]
    assert first.sizes == 4
    assert first.peak_bytes == 1 << 26
    assert first.peak_busbw == pytest.approx((1 << 26) / 30e-3)
    assert (first.small_bytes, first.small_latency_s) == (8, 20e-6)
    assert rows[2].peak_busbw is None and rows[2].small_latency_s == 15e-6
    assert collectives_table(sweep) is not None
    assert collectives_table([failed]) is None


def test_the_bus_bandwidth_chart_leaves_out_a_barrier_in_the_same_sweep():
    measured = [_measured("all-reduce", b, t) for b, t in ((8, 20e-6), (1 << 20, 1e-3))]
    barrier = _measured("barrier", 1 << 20, 15e-6)  # a grid of ops crossed with sizes
    (section,) = sections([*measured, barrier])
    (chart,) = section.charts
    assert isinstance(chart, Lines)
    assert chart.ylabel.startswith("bus bandwidth (") and chart.ylabel.endswith("B/s)")
    assert [s.name for s in chart.series] == ["all-reduce"]
    assert [r.op for r in summarize_sweep([*measured, barrier])] == ["all-reduce", "barrier"]
    (alone,) = sections([barrier])
    assert alone.charts == ()  # its latency is in the table


def test_each_ranks_own_times_are_those_of_the_samples_kept():
    # 13 ms per call while settling, then 10.8 ms: the timing core extends the warm-up
    # and drops the leading samples, counting their calls (not blocks) as warm-up.
    from accelbench.core.timing import measure
    from fakes import FakeClock

    policy = TimingPolicy(warmup_time=0.0, min_warmup_calls=2, block_time=0.03,
                          min_samples=5, max_samples=400, max_time=2.0, target_rel_ci=0.005)
    own = ops.OwnTimes(FakeClock(lambda i: 13e-3 if i < 75 else 10.8e-3, noise=0.02, seed=3))
    timing = measure(lambda: None, own, policy)
    assert timing.number > 1 and timing.warmup_calls >= 70  # extended, counted in calls
    assert timing.warmup_calls > len(own.per_call) - len(timing.samples)  # blocks before
    assert own.kept(timing) == pytest.approx(list(timing.samples))  # one rank: its own
