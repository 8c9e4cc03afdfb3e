"""Model cases through `accelbench run`'s session: worker, ranks, store."""

from __future__ import annotations

import statistics

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_OK
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store

# One process per case: rounds of processes are tested in tests/runner/test_interleaving.py.
FAST = {"max_time": 0.2, "warmup_time": 0.0, "processes": 1}
TINY_BERT = {"model": ("bert-tiny",), "batch": ("4",), "seq": ("16",),
             "steps_per_window": ("2",)}


@pytest.mark.slow
def test_ddp_on_two_gloo_ranks_stores_one_aggregate_and_skips_do_not_stop_the_run(
    store_path,
) -> None:
    request = RunRequest(benches=("train", "train-ddp"), overrides=TINY_BERT,
                      dtypes=("tf32", "fp32"), device="cpu", timing=FAST, nproc_per_node=2)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, REGISTRY), store)
        stored = store.load_run(outcome.run_id)
    by_case = {(m.case.benchmark, m.case.dtype): m for m in stored.measurements}
    assert list(by_case) == [("train", "tf32"), ("train", "fp32"),
                             ("train-ddp", "tf32"), ("train-ddp", "fp32")]

    for bench in ("train", "train-ddp"):  # unsupported here: recorded, and the run goes on
        skipped = by_case[(bench, "tf32")]
        assert skipped.status == "skipped"
        assert skipped.reason is not None and "unsupported precision: tf32" in skipped.reason
    assert by_case[("train", "fp32")].status == "ok", by_case[("train", "fp32")].reason

    ddp = by_case[("train-ddp", "fp32")]
    assert ddp.status == "ok", ddp.reason
    assert ddp.case.param_dict["world_size"] == 2 and ddp.case.param_dict["backend"] == "gloo"
    assert ddp.details["dist"]["world_size"] == 2 and ddp.details["dist"]["backend"] == "gloo"
    assert ddp.details["data_parallel"] == "DistributedDataParallel"
    assert (ddp.details["batch_per_rank"], ddp.details["global_batch"]) == (4, 8)
    per_call = 2 * 4 * 2  # ranks x batch per rank x steps per window
    assert ddp.details["samples_per_call"] == per_call
    throughput = ddp.figure("throughput")
    assert throughput is not None
    assert throughput.value == pytest.approx(per_call / statistics.fmean(ddp.samples))
    assert len([m for m in stored.measurements if m.case.benchmark == "train-ddp"]) == 2
    assert outcome.exit_code == EXIT_OK  # a precision the CPU lacks is a skip, not a failure
