"""Two sides' profiles aligned (profile.diff): per-step self times by operator, by shapes
and by kernel, the movers in the step's direction, and what counts as consistent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from accelbench.profile.diff import diff, gemm_summary, step_table
from accelbench.profile.trace import load, parse

TRACES = Path(__file__).parent.parent / "fixtures" / "traces"


def _trace(steps: int, ops: list[tuple[str, float, list[Any], list[str]]],
           kernels: Sequence[tuple[str, float]] = (), step_us: float = 1000.0) -> Any:
    """A trace of `steps` profiled steps, each running `ops` (name, self µs, input dims,
    input types) one after another on one thread, and `kernels` (name, µs) on a device."""
    events: list[dict[str, Any]] = []
    for step in range(steps):
        start = step * step_us * 2
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 3}",
                       "pid": 1, "tid": 1, "ts": start, "dur": step_us})
        at = start + 1
        for name, dur, dims, types in ops:
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                           "ts": at, "dur": dur,
                           "args": {"Input Dims": dims, "Input type": types}})
            at += dur + 1
        for name, dur in kernels:
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                           "ts": start + 2, "dur": dur, "args": {"device": 0}})
    return step_table(parse({"traceEvents": events}))


MM = ("aten::mm", 100.0, [[64, 32], [32, 16]], ["float", "float"])
RELU = ("aten::relu", 50.0, [[64, 16]], ["float"])


def test_a_table_is_per_profiled_step_whatever_the_step_count() -> None:
    two, five = _trace(2, [MM, RELU]), _trace(5, [MM, RELU])
    for table in (two, five):
        assert table.operators["aten::mm"] == pytest.approx(100e-6)
        assert table.operator_calls["aten::relu"] == pytest.approx(1.0)
        assert table.step_s == pytest.approx(1e-3)
        assert table.basis == "cpu"
    assert two.shapes[("aten::mm", "64x32, 32x16", "float, float")] == pytest.approx(100e-6)


def test_a_nested_operator_is_counted_once_in_its_parent() -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 500},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10,
         "dur": 300},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 20,
         "dur": 250},
    ]
    table = step_table(parse({"traceEvents": events}))
    assert table.operators["aten::linear"] == pytest.approx(50e-6)
    assert table.operators["aten::addmm"] == pytest.approx(250e-6)


def test_scalars_are_left_out_of_the_shapes() -> None:
    op = ("aten::add", 10.0, [[8, 8], [], [8, 8]], ["float", "Scalar", "c10::BFloat16"])
    (key,) = _trace(1, [op]).shapes
    assert key == ("aten::add", "8x8, 8x8", "float, c10::BFloat16")


def test_the_largest_mover_is_the_operator_that_moved_with_the_step() -> None:
    slow_mm = ("aten::mm", 400.0, *MM[2:])
    fast_relu = ("aten::relu", 20.0, *RELU[2:])
    a = [_trace(3, [MM, RELU]), _trace(3, [MM, RELU])]
    b = [_trace(3, [slow_mm, fast_relu], step_us=1300.0),
         _trace(3, [slow_mm, fast_relu], step_us=1250.0)]
    found = diff(a, b)
    assert found.step.delta_s > 0 and found.step.consistent
    largest = found.largest()
    assert largest is not None and largest.key == "aten::mm"
    assert largest.ratio == pytest.approx(4.0)
    assert largest.consistent
    # The operator that got faster comes last: it does not explain a slowdown.
    assert found.operators[-1].key == "aten::relu" and found.operators[-1].delta_s < 0
    data = found.to_dict()
    assert data["operators"][0]["share_of_change"] == pytest.approx(300e-6 / 275e-6)
    assert data["shapes"][0]["shapes"] == "64x32, 32x16"


def test_when_b_got_faster_the_largest_mover_is_the_one_that_sped_up() -> None:
    fast_mm = ("aten::mm", 10.0, *MM[2:])
    found = diff([_trace(2, [MM, RELU])], [_trace(2, [fast_mm, RELU], step_us=900.0)])
    largest = found.largest()
    assert largest is not None and largest.key == "aten::mm" and largest.delta_s < 0


def test_a_change_that_swaps_places_between_profiles_is_not_consistent() -> None:
    a = [_trace(2, [MM]), _trace(2, [("aten::mm", 130.0, *MM[2:])])]
    b = [_trace(2, [("aten::mm", 120.0, *MM[2:])]), _trace(2, [("aten::mm", 110.0, *MM[2:])])]
    (mm,) = diff(a, b).operators
    assert not mm.consistent


def test_an_operator_of_one_side_only_says_so() -> None:
    extra = ("aten::_to_copy", 80.0, [[64, 16]], ["float"])
    found = diff([_trace(2, [MM])], [_trace(2, [MM, extra], step_us=1100.0)])
    largest = found.largest()
    assert largest is not None and largest.key == "aten::_to_copy"
    assert largest.only_in == "b" and largest.ratio is None


def test_device_kernels_and_the_gemm_library_are_named_from_recorded_traces() -> None:
    rocm = step_table(load(TRACES / "rocm_mi250x_rank0.pt.trace.json.gz"))
    cuda = step_table(load(TRACES / "cuda_h100_rank0.pt.trace.json.gz"))
    assert rocm.basis == cuda.basis == "device"
    assert gemm_summary([rocm])["kernels"][0]["name"].startswith("Cijk_")
    assert gemm_summary([cuda])["kernels"][0]["name"].startswith("sm90_xmma_gemm")
    found = diff([rocm], [cuda]).to_dict(top=50)
    assert found["basis"] == "device"
    gemm_rows = [k for k in found["kernels"] if k["gemm"]]
    assert {k["only_in"] for k in gemm_rows} == {"a", "b"}


def test_a_hostile_name_is_clipped() -> None:
    table = _trace(1, [("x" * 10_000, 5.0, [], [])])
    (name,) = table.operators
    assert len(name) == 300 and name.endswith("…")


def test_each_side_needs_a_profile() -> None:
    with pytest.raises(ValueError):
        diff([], [_trace(1, [MM])])


def test_the_chance_of_a_separation_where_nothing_moved_is_exact() -> None:
    from itertools import permutations

    from accelbench.profile.diff import separation_chance

    assert separation_chance(2, 2) == pytest.approx(1 / 3)
    assert separation_chance(3, 3) == pytest.approx(1 / 10)
    assert separation_chance(1, 1) == 1.0 and separation_chance(0, 3) == 1.0
    # Counted over every order of five exchangeable values, two in A and three in B.
    orders = list(permutations(range(5)))
    separated = sum(min(o[2:]) > max(o[:2]) or max(o[2:]) < min(o[:2]) for o in orders)
    assert separation_chance(2, 3) == pytest.approx(separated / len(orders))
    found = diff([_trace(2, [MM])] * 3, [_trace(2, [MM])] * 3).to_dict()
    assert found["separation_chance"] == pytest.approx(0.1)


def test_a_host_that_ran_one_side_slower_moves_no_operator() -> None:
    """Every operator 1.3x slower in B (another job, a lower clock): their times separate,
    their shares of the step do not; the step itself moved."""
    from accelbench.profile.explain import summary

    relu = ("aten::relu", 50.0, *RELU[2:])
    slow = [("aten::mm", 130.0, *MM[2:]), ("aten::relu", 65.0, *RELU[2:])]
    a = [_trace(2, [MM, relu], step_us=1000.0 + d) for d in (0, 5, 10)]
    b = [_trace(2, slow, step_us=1300.0 + d) for d in (0, 5, 10)]
    found = diff(a, b)
    assert found.step.consistent
    assert not any(m.consistent for m in found.operators)
    data = found.to_dict()
    assert data["operators_consistent"] == 0 and data["operators_total"] == 2
    said = summary({**data, "largest": None})
    assert "0 of 2 operators moved beyond the profiles' spread" in said
    assert "the host or a setting of the whole process changed" in said


def test_an_operator_that_slowed_beyond_the_hosts_drift_is_still_named() -> None:
    relu = ("aten::relu", 50.0, *RELU[2:])
    a = [_trace(2, [MM, relu], step_us=1000.0 + d) for d in (0, 5, 10)]
    # B: the host 10% slower for everything, and aten::mm three times slower on top.
    b = [_trace(2, [("aten::mm", 330.0, *MM[2:]), ("aten::relu", 55.0, *RELU[2:])],
                step_us=1400.0 + d) for d in (0, 5, 10)]
    found = diff(a, b)
    largest = found.largest()
    assert largest is not None and largest.key == "aten::mm" and largest.consistent
    relu_moved = next(m for m in found.operators if m.key == "aten::relu")
    assert relu_moved.delta_s > 0 and not relu_moved.consistent  # its share fell
