"""Every collective for real with gloo on CPU ranks started by torchrun, at 2 and 4 ranks.

Rank start-up dominates (seconds per job on a small machine), so each fixture runs many
cases in one job: a test suite replaces the packaged one for the session, and the tests
read the stored run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from misbehaving_collectives import HANG_TIMEOUT_S
from misbehaving_collectives import REGISTRY as TEST_REGISTRY

from accelbench.benchmarks.collectives import ops
from accelbench.benchmarks.collectives.summary import summarize_sweep
from accelbench.core.case import identity_params
from accelbench.core.measurement import Measurement
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED
from accelbench.runner.plan import Suite, SuiteEntry, validate
from accelbench.runner.session import Outcome, run_session
from accelbench.store import Store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
# One process per case: rounds of processes are tested in tests/runner/test_interleaving.py.
FAST = {"max_time": 0.03, "warmup_time": 0.0, "block_time": 0.002, "min_samples": 3, "processes": 1}


def _suite(*entries: tuple[str, dict[str, Any]]) -> Suite:
    return Suite("quick", "collectives under test", {}, tuple(
        SuiteEntry(bench, ("any",), {k: tuple(v) for k, v in grid.items()})
        for bench, grid in entries))


def _run(tmp_path_factory: pytest.TempPathFactory, nproc: int,
         suite: Suite) -> tuple[Outcome, tuple[Measurement, ...]]:
    path = tmp_path_factory.mktemp(f"ranks{nproc}") / "results.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("accelbench.runner.plan.load_suite", lambda name, registry=None: suite)
        # The ranks import the misbehaving variants, and accelbench from where this does.
        patch.setenv("PYTHONPATH", os.pathsep.join(
            filter(None, (str(HERE), os.environ.get("PYTHONPATH")))))
        with Store.open(path) as store:
            # Four ranks on a two-core machine (CI's) only time-share: enough to check them.
            request = RunRequest(nproc_per_node=nproc, timing=FAST, oversubscribe=True)
            outcome = run_session(validate(request, TEST_REGISTRY), store)
            stored = store.load_run(outcome.run_id)
    return outcome, stored.measurements


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One job for every operation and variant, then rank 1 miscounts, dies, is killed,
    and hangs."""
    suite = _suite(
        ("collectives", {"op": ops.OPS, "bytes": ("8", "64K")}),
        ("collectives", {"op": ("all-reduce",), "reduce": ("max", "min", "prod", "avg"),
                         "bytes": ("4K",)}),
        ("collectives", {"op": ("reduce-scatter",), "reduce": ("max", "avg"), "bytes": ("4K",)}),
        ("collectives", {"op": ("reduce",), "reduce": ("min", "prod", "avg"), "bytes": ("4K",)}),
        ("collectives", {"op": ("all-gather", "reduce-scatter"), "inplace": ("yes",),
                         "bytes": ("4K",)}),
        ("collectives", {"op": ("all-reduce",), "bytes": ("1K",),
                         "dtype": ("fp16", "bf16", "fp64", "int32", "int64", "int8", "uint8")}),
        ("collectives", {"op": ("all-gather",), "bytes": ("1K",),
                         "dtype": ("fp16", "fp64", "int8")}),
        ("collectives", {"op": ("all-reduce",), "dtype": ("int32",), "reduce": ("avg",)}),
        ("collectives", {"op": ("gather",), "inplace": ("yes",)}),
        ("collectives", {"op": ("all-reduce",), "bytes": ("64K",), "warmup": (3,),
                         "iters": (7,)}),
        ("collectives-rank1-miscounts", {"bytes": ("64K",)}),
        ("collectives-rank1-dies", {"bytes": ("64K",)}),
        ("collectives-rank1-is-killed", {"op": ("all-gather",), "bytes": ("64K",)}),
        ("collectives-rank1-hangs", {"op": ("all-gather",), "bytes": ("64K",)}),
    )
    return _run(tmp_path_factory, 2, suite)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    suite = _suite(
        ("collectives", {"op": ops.OPS, "bytes": ("100", "64K")}),  # 100 B: 25 elements
        ("collectives", {"op": ("all-gather", "broadcast"), "bytes": ("8",)}),
        ("collectives", {"op": ops.REDUCING, "reduce": ("avg",), "bytes": ("4K",)}),
        ("collectives", {"op": ("all-gather", "reduce-scatter"), "inplace": ("yes",),
                         "bytes": ("4K",)}),
    )
    return _run(tmp_path_factory, 4, suite)


def _find(measurements: Sequence[Measurement], bench: str = "collectives",
          **params: Any) -> list[Measurement]:
    return [m for m in measurements if m.case.benchmark == bench
            and all(m.case.param_dict.get(k) == v for k, v in params.items())]


def _one(measurements: Sequence[Measurement], **params: Any) -> Measurement:
    [found] = _find(measurements, **params)
    return found


@pytest.mark.parametrize("ranks", ["two_ranks", "four_ranks"])
def test_every_operation_is_checked_then_timed(ranks, request):
    _, measurements = request.getfixturevalue(ranks)
    n = 2 if ranks == "two_ranks" else 4
    for op in ops.OPS:
        # Of these, only the parameters that apply to the operation are in its case.
        m = _one(measurements, **identity_params("collectives", dict(
            op=op, bytes=65536, dtype="fp32", reduce="sum", inplace="auto", warmup=0,
            iters=0)))
        assert m.status == "ok", (m.case.label, m.reason)
        d = m.details
        assert d["wrong_elements"] == 0
        assert (d["world_size"], d["nodes"], d["backend"]) == (n, 1, "gloo")
        assert m.case.param_dict["world_size"] == n and m.case.param_dict["backend"] == "gloo"
        assert d["library"].startswith("Gloo (PyTorch ")
        assert len(d["rank_median_s"]) == n and d["rank_spread"] >= 1.0
        assert d["dist"]["world_size"] == n  # the job's shape, added by the runner
        time_figure = m.figure("time" if op != "barrier" else "latency")
        assert time_figure is not None and m.stats is not None
        time = time_figure.value
        assert time == pytest.approx(m.stats.median)
        if op == "barrier":
            assert m.figure("busbw") is None
            continue
        assert d["bytes"] == 65536
        algbw_figure, busbw_figure = m.figure("algbw"), m.figure("busbw")
        assert algbw_figure is not None and busbw_figure is not None
        algbw, busbw = algbw_figure.value, busbw_figure.value
        factor = ops.bus_factor(op, n)
        assert factor is not None
        assert algbw == pytest.approx(65536 / time)
        assert busbw == pytest.approx(algbw * factor)
        assert m.primary is not None and m.primary.name == "busbw"


def test_variants_of_reduction_form_and_dtype_are_correct(two_ranks, four_ranks):
    for _, measurements in (two_ranks, four_ranks):
        for op in ops.REDUCING:
            m = _one(measurements, op=op, reduce="avg", bytes=4096)
            assert m.status == "ok" and m.details["wrong_elements"] == 0, m.reason
            assert m.details["reduce"] == "avg"
        for op in ("all-gather", "reduce-scatter"):
            m = _one(measurements, op=op, inplace="yes", bytes=4096)
            assert m.status == "ok" and m.details["inplace"] is True, m.reason
    _, measurements = two_ranks
    reduced = [m for m in measurements if m.case.param_dict.get("reduce") in ("max", "min", "prod")]
    assert len(reduced) == 6
    assert all(m.ok and m.details["wrong_elements"] == 0 for m in reduced)
    typed = _find(measurements, bytes=1024)
    assert len(typed) == 7 + 3
    assert all(m.ok and m.details["wrong_elements"] == 0 for m in typed), [
        (m.case.label, m.reason) for m in typed if not m.ok]


def test_unsupported_combinations_are_skipped_with_the_reason(two_ranks, four_ranks):
    _, measurements = two_ranks
    assert _one(measurements, dtype="int32", reduce="avg").reason == (
        "gloo averages floating-point data only, not int32")
    skipped = _one(measurements, op="gather", inplace="yes")
    assert skipped.status == "skipped" and skipped.reason is not None
    assert "only out of place" in skipped.reason
    _, measurements = four_ranks
    tiny = _one(measurements, op="all-gather", bytes=8)
    assert tiny.status == "skipped"
    assert tiny.reason == "8 B holds no whole fp32 element per rank at 4 ranks"


def test_sizes_are_whole_elements_and_the_rounding_is_said(four_ranks):
    _, measurements = four_ranks
    m = _one(measurements, op="all-gather", bytes=100)
    assert m.ok and m.details["bytes"] == 96 and m.details["count"] == 24
    assert m.warnings[0].startswith("moves 96 B: 100 B rounded down to whole fp32 elements")
    assert _one(measurements, op="all-reduce", bytes=100).details["bytes"] == 100
    assert _one(measurements, op="broadcast", bytes=8).ok


def test_fixed_warmup_and_iteration_counts(two_ranks):
    _, measurements = two_ranks
    m = _one(measurements, op="all-reduce", iters=7)
    assert m.ok and m.number == 7 and m.timings[0].warmup_calls == 3


def test_wrong_elements_on_any_rank_fail_the_case(two_ranks):
    _, measurements = two_ranks
    [m] = _find(measurements, bench="collectives-rank1-miscounts")
    assert m.status == "failed" and m.reason is not None
    # Both ranks find the sum of wrong elements and fail; whichever says so first is named.
    assert re.fullmatch(r"rank [01]: wrong result: 5 wrong elements across 2 ranks in "
                        r"all-reduce of 65536 B fp32 \(sum\)", m.reason), m.reason


def test_a_killed_rank_and_a_hang_end_their_case_and_keep_what_was_measured(two_ranks):
    outcome, measurements = two_ranks
    [dead] = _find(measurements, bench="collectives-rank1-dies")
    # Which rank ended the job and how, not torchrun's "error_file: <N/A>"; rank 0, whose
    # collective broke with it, is not blamed.
    assert dead.status == "failed" and dead.reason == "rank 1 exited with code 3", dead.reason
    assert "op=all-reduce" in dead.case.label and "bytes=65536" in dead.case.label
    [killed] = _find(measurements, bench="collectives-rank1-is-killed")
    assert killed.status == "failed"
    assert killed.reason == "rank 1 was killed by SIGKILL (signal 9)", killed.reason
    assert "op=all-gather" in killed.case.label
    [hung] = _find(measurements, bench="collectives-rank1-hangs")
    assert hung.status == "failed" and hung.reason is not None
    assert hung.reason.startswith(f"timed out after {HANG_TIMEOUT_S:g} s")
    assert "op=all-gather" in hung.case.label and "bytes=65536" in hung.case.label
    assert hung.duration_s < HANG_TIMEOUT_S + 30
    # Everything measured before is stored, and the run says it failed.
    assert len([m for m in measurements if m.ok]) > 35
    assert outcome.exit_code == EXIT_CASE_FAILED


def test_summary_of_the_stored_sweeps(two_ranks):
    _, measurements = two_ranks
    rows = {(r.op, r.dtype, r.reduce, r.inplace, r.iters): r
            for r in summarize_sweep(measurements)}
    row = rows[("all-reduce", "fp32", "sum", "auto", 0)]
    assert (row.min_bytes, row.max_bytes, row.sizes) == (8, 65536, 2)
    assert row.peak_busbw is not None and row.small_latency_s is not None
    assert row.peak_busbw > 0 and row.small_bytes == 8 and row.small_latency_s > 0
    # A barrier moves no data: no size, element type or reduction of its own.
    assert rows[("barrier", None, None, "auto", 0)].peak_busbw is None


@pytest.mark.pinned_only  # the operations the tests above run on the floor too
def test_the_readme_command_runs_the_sweep_and_show_reads_it(tmp_path):
    store = tmp_path / "results.sqlite"

    def accelbench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "accelbench", *args, "--store", str(store)],
                              capture_output=True, text=True, timeout=600)

    # --oversubscribe: a small or busy node would refuse two ranks otherwise.
    run = accelbench("run", "--bench", "collectives", "--nproc-per-node", "2",
                     "--oversubscribe", "--max-time", "0.05", "--no-report")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Collectives: peak bus bandwidth and small-message latency" in run.stdout
    shown = accelbench("show")
    assert shown.returncode == 0, shown.stderr
    assert "Collectives: peak bus bandwidth" in shown.stdout and "all-reduce" in shown.stdout
    data = json.loads(accelbench("show", "--json").stdout)
    measurements = data["runs"][0]["measurements"]
    assert len(measurements) == 5
    assert {m["status"] for m in measurements} == {"ok"}
    assert {m["details"]["wrong_elements"] for m in measurements} == {0}


def test_a_one_node_job_records_its_node_and_interconnect(two_ranks):
    outcome, _ = two_ranks
    cluster = outcome.fingerprint.data["cluster"]
    assert (cluster["node_count"], cluster["ranks_per_node"]) == (1, [2])
    assert cluster["node_ranks"] == [[0, 1]]
    assert len(cluster["node_names"]) == 1
    assert isinstance(cluster["interconnect"][0], dict)
