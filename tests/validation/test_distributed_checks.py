"""The distributed check for real: two Gloo ranks started by torchrun run every
collective's known-data check between monitored barriers; then rank 1 corrupts its
result, and rank 1 never reaches the barrier."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from misbehaving_validation import HANG_TIMEOUT_S
from misbehaving_validation import REGISTRY as TEST_REGISTRY

from accelbench.benchmarks.collectives import ops
from accelbench.core.request import RunRequest
from accelbench.runner.plan import Suite, SuiteEntry, validate
from accelbench.runner.session import run_session
from accelbench.store import Store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    suite = Suite("validate", "distributed checks under test", {"processes": 1}, (
        SuiteEntry("distributed", ("any",), {"op": ops.OPS}),
        SuiteEntry("distributed", ("any",), {"op": ("all-reduce", "all-gather"),
                                             "dtype": ("fp16", "bf16", "fp64", "int8")}),
        SuiteEntry("distributed-rank1-corrupts", ("any",), {"op": ("all-reduce",)}),
        SuiteEntry("distributed-rank1-hangs", ("any",), {"barrier_timeout": (3.0,)}),
    ))
    path = tmp_path_factory.mktemp("ranks") / "results.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("accelbench.runner.plan.load_suite", lambda name, registry=None: suite)
        patch.setenv("PYTHONPATH", os.pathsep.join(
            filter(None, (str(HERE), os.environ.get("PYTHONPATH")))))
        with Store.open(path) as store:
            request = RunRequest(suite="validate", nproc_per_node=2, oversubscribe=True,
                              timing={"telemetry_interval": 0.0})
            outcome = run_session(validate(request, TEST_REGISTRY), store)
            stored = store.load_run(outcome.run_id)
    return {(m.case.benchmark, m.case.param_dict["op"], m.case.param_dict["dtype"]): m
            for m in stored.measurements}


@pytest.mark.parametrize("op", ops.OPS)
def test_every_collective_is_right_on_every_rank(two_ranks, op):
    m = two_ranks[("distributed", op, "fp32")]
    assert m.status == "ok", m.reason
    assert m.details["wrong_per_rank"] == [0, 0]
    assert (m.details["world_size"], m.details["backend"]) == (2, "gloo")
    assert {f.name: f.value for f in m.measured}["error"] == 0


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp64", "int8"])
def test_other_element_types_are_right_too(two_ranks, dtype):
    for op in ("all-reduce", "all-gather"):
        assert two_ranks[("distributed", op, dtype)].status == "ok"


def test_a_corrupted_result_on_one_rank_fails_the_check_naming_that_rank(two_ranks):
    m = two_ranks[("distributed-rank1-corrupts", "all-reduce", "fp32")]
    assert m.status == "failed"
    assert "wrong result: 5 wrong elements in all-reduce of 65536 B fp32 on rank 1 of 2" in \
        m.reason


def test_a_rank_that_never_arrives_ends_the_check_at_the_barrier(two_ranks):
    m = two_ranks[("distributed-rank1-hangs", "all-reduce", "fp32")]
    assert m.status == "failed"
    assert m.reason.startswith("rank 0: barrier before the check: not every rank arrived "
                               "within 3 s: ")
    assert "Ranks 1 failed to pass monitoredBarrier" in m.reason
    assert f"timed out after {HANG_TIMEOUT_S:g} s" not in m.reason
