"""The details a training-at-scale case stores, as typed records (scale.details): what the
writer stores round-trips byte for byte, and a damaged or hand-made record reads as the
scaling analysis and the report have always read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from accelbench.benchmarks.scale import forms, parity
from accelbench.benchmarks.scale.details import LossParity, ParallelForm, ScaleDetails
from accelbench.benchmarks.scale.scaling import judge_ranks, of_run
from accelbench.benchmarks.scale.sizing import Estimate, Layout
from accelbench.benchmarks.scale.view import sections
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement, Rate
from accelbench.core.timing import Timing

RULE = ("each checked step's loss over the global batch within the tolerance (relative) of "
        "a single-device step on the same data and seed")
ESTIMATE = Estimate(parameters=1000, gradients=1000, optimizer=2000, activations=500,
                    gathered=0, workspace=100, total=4600, formula="counted")
# What `measure` stored for a pipeline case on 4 ranks of 2 nodes before the record was
# typed: the keys in their order (the peak-memory meter's in the middle), and the values.
STORED = {
    "mode": "train", "model": "gpt2-tiny", "parameters": 123456, "layers": 4,
    "world_size": 4, "nodes": 2, "ranks_per_node": 2,
    "parallel": {"form": "pp", "dp": 1, "tp": 1, "pp": 4, "accumulate": 1,
                 "schedule": "1f1b", "microbatches": 8},
    "scaling": "weak", "global_batch": 8, "batch_per_rank": 8, "loss_last": 3.25,
    "parity": {"steps": 2, "losses": [4.0, 3.9], "reference_losses": [4.0, 3.9],
               "worst_relative_difference": 0.0, "tolerance": 1e-4, "reference_layers": 4,
               "rule": RULE},
    "memory_estimate": ESTIMATE.to_dict(),
    "peak_memory_source": "torch.cuda.max_memory_allocated",
    "peak_memory_reserved": 4 << 20,
    "peak_memory_scope": "the largest rank's",
    "model_flop_formula": "6N + 12LSH (torchtitan's count)",
    "throughput_scope": "aggregate over ranks; each sample the slowest rank's",
    "rank_nodes": ["n1", "n1", "n2", "n2"],
    "rank_step_s": [0.5, 0.51, 0.5, 0.52],
    "rank_solo_s": [0.2, 0.21, 0.2, 0.2],
    "rank_peak_memory": [3 << 20, 3 << 20, 2 << 20, 2 << 20],
    "rank_exposed_comm_share": [0.1, None, 0.12, 0.11],
}


def _written() -> ScaleDetails:
    """The record `measure` builds for STORED."""
    plan = forms.Plan("pp", Layout(pp=4, microbatches=8), batch=8, accumulate=1,
                      scaling="weak")
    checked = parity.compare([4.0, 3.9], parity.Reference((4.0, 3.9), 0.2, 4), "fp32")
    return ScaleDetails(
        mode="train", model="gpt2-tiny", parameters=123456, layers=4, world_size=4, nodes=2,
        ranks_per_node=2, parallel=plan.record(), scaling=plan.scaling,
        global_batch=plan.global_batch, batch_per_rank=plan.batch, loss_last=3.25,
        parity=checked, memory_estimate=ESTIMATE.to_dict(),
        memory={"peak_memory_source": "torch.cuda.max_memory_allocated",
                "peak_memory_reserved": 4 << 20},
        peak_memory_scope="the largest rank's",
        model_flop_formula="6N + 12LSH (torchtitan's count)",
        throughput_scope="aggregate over ranks; each sample the slowest rank's",
        rank_nodes=("n1", "n1", "n2", "n2"), rank_step_s=(0.5, 0.51, 0.5, 0.52),
        rank_solo_s=(0.2, 0.21, 0.2, 0.2), rank_peak_memory=(3 << 20, 3 << 20, 2 << 20, 2 << 20),
        rank_exposed_comm_share=(0.1, None, 0.12, 0.11))


def test_the_writers_record_is_stored_as_before_and_read_back() -> None:
    record = _written()
    assert json.dumps(record.to_dict()) == json.dumps(STORED)  # keys, order and values
    again = ScaleDetails.from_details(json.loads(json.dumps(record.to_dict())))
    assert again == record
    assert json.dumps(again.to_dict()) == json.dumps(STORED)
    assert again.estimated_total == 4600 and again.peak_memory_source.startswith("torch")


def test_the_parity_check_and_the_plan_are_stored_as_before() -> None:
    assert json.dumps(parity.check([4.0, 3.9], parity.Reference((4.0, 3.9), 0.2, 4), "fp32")
                      ) == json.dumps(STORED["parity"])
    fsdp = forms.Plan("fsdp", Layout(dp=4), batch=2, accumulate=2, scaling="strong")
    assert list(fsdp.to_dict().items()) == [("form", "fsdp"), ("dp", 4), ("tp", 1), ("pp", 1),
                                            ("accumulate", 2)]
    assert ParallelForm.from_dict(fsdp.to_dict()) == fsdp.record()
    assert LossParity.from_dict(STORED["parity"]) == _written().parity


def test_a_record_of_a_few_keys_reads_the_rest_as_absent() -> None:
    found = ScaleDetails.from_details({"world_size": 8, "nodes": 2})
    assert (found.world_size, found.nodes, found.parallel, found.parity) == (8, 2, None, None)
    assert found.rank_nodes is None and found.memory == {} and found.peak_memory_source == ""
    assert ScaleDetails.from_details({}) == ScaleDetails()
    # A hand-made form keeps only the keys it has.
    form = ParallelForm.from_dict({"form": "tp", "tp": 4})
    assert form is not None and form.to_dict() == {"form": "tp", "tp": 4}


def test_values_of_another_kind_read_as_absent() -> None:
    found = ScaleDetails.from_details({
        "mode": 1, "layers": "4", "world_size": True, "nodes": 2.0, "parallel": ["fsdp"],
        "scaling": ["weak"], "loss_last": "3.2", "parity": "ok", "memory_estimate": 4600,
        "rank_nodes": "n1", "rank_step_s": [0.5, "slow"], "rank_solo_s": [0.2, float("nan")],
        "rank_peak_memory": [1.5], "rank_exposed_comm_share": [0.1, "none"]})
    assert found == ScaleDetails()
    assert found.estimated_total is None


# -- the report's cells, against how they were read before -----------------------------------


def _form_before(parallel: Any) -> str:
    if not isinstance(parallel, Mapping):
        return "-"
    form = str(parallel.get("form", "-"))
    sizes = " ".join(f"{k}={parallel[k]}" for k in ("dp", "tp", "pp")
                     if isinstance(parallel.get(k), int) and parallel[k] > 1)
    extra = ""
    if parallel.get("schedule") and form == "pp":
        extra = f" {parallel['schedule']} x{parallel.get('microbatches', '?')}"
    if isinstance(parallel.get("accumulate"), int) and parallel["accumulate"] > 1:
        extra += f" accumulate {parallel['accumulate']}"
    return " ".join(x for x in (form, sizes) if x) + extra


def _ranks_before(details: Mapping[str, Any]) -> str:
    world, nodes = details.get("world_size"), details.get("nodes")
    if not isinstance(world, int):
        return "-"
    return f"{world}" + (f" on {nodes} nodes" if isinstance(nodes, int) and nodes > 1 else "")


def _parity_before(found: Any, layers: Any) -> str:
    if not isinstance(found, Mapping):
        return "-"
    worst, tolerance = found.get("worst_relative_difference"), found.get("tolerance")
    if not isinstance(worst, (int, float)) or not isinstance(tolerance, (int, float)):
        return "-"
    fewer = found.get("reference_layers")
    shrunk = isinstance(fewer, int) and isinstance(layers, int) and fewer != layers
    note = f", on {fewer} of {layers} blocks" if shrunk else ""
    return f"{worst:.1e} <= {tolerance:g} ({found.get('steps', '?')} steps{note})"


def _estimate_before(details: Mapping[str, Any]) -> str | None:
    estimate = details.get("memory_estimate")
    total = estimate.get("total") if isinstance(estimate, Mapping) else None
    return str(total) if isinstance(total, (int, float)) else None


def _measurement(details: dict[str, Any], world: int | None = 4) -> Measurement:
    params: dict[str, Any] = {"model": "llama-tiny", "dtype": "bf16", "seq": 128}
    if world is not None:
        params["world_size"] = world
    case = Case.make("train-fsdp", "s1", "scale", params, "cuda:0")
    timings = tuple(Timing((0.5, 0.51, 0.49), 1, 0, "converged", 0.95) for _ in range(2))
    return Measurement(case, "ok", timings=timings,
                       rates=(Rate("tokens", 4096.0, "token/s", over="mean"),),
                       details=details)


DAMAGED: list[dict[str, Any]] = [
    {},
    STORED,
    {"parallel": None, "world_size": "4", "nodes": 2},
    {"parallel": {"form": "fsdp", "dp": "4", "accumulate": 2}, "world_size": 4, "nodes": "2"},
    {"parallel": {"dp": 4, "tp": 2.0}, "world_size": 4, "nodes": 1},
    {"parallel": {"form": "pp", "pp": 4, "schedule": "gpipe"}, "layers": 4,
     "parity": {"worst_relative_difference": 1e-6, "tolerance": 1e-4, "steps": 3}},
    {"parity": {"worst_relative_difference": 1e-6}, "layers": 4},
    {"parity": {"worst_relative_difference": "0", "tolerance": 1e-4}},
    {"parity": {"worst_relative_difference": 1e-6, "tolerance": 1e-4, "reference_layers": 2},
     "layers": 4},
    {"parity": {"worst_relative_difference": 1e-6, "tolerance": 1e-4, "reference_layers": "2"},
     "layers": 4},
    {"parity": [], "memory_estimate": {"total": "big"}},
    {"memory_estimate": {"parameters": 1}},
    {"memory_estimate": [4600]},
]


@pytest.mark.parametrize("details", DAMAGED)
def test_a_damaged_record_is_shown_as_the_report_showed_it(details) -> None:
    [section] = sections([_measurement(details)])
    row = dict(zip(section.tables[0].header, section.tables[0].rows[0], strict=True))
    assert row["Form"] == _form_before(details.get("parallel"))
    assert row["Ranks"] == _ranks_before(details)
    assert row["Loss parity"] == _parity_before(details.get("parity"), details.get("layers"))
    total = _estimate_before(details)
    assert row["Peak memory (estimate)"].endswith(")") == (total is not None)


def test_values_the_report_passed_on_as_they_were_now_read_as_absent() -> None:
    """Where a value of another kind was shown as it was, it is now left out: a form of
    another kind is "-", a pipeline's microbatches that are not a number "?"."""
    def form(parallel: dict[str, Any]) -> str:
        [section] = sections([_measurement({"parallel": parallel})])
        return section.tables[0].rows[0][1]

    assert form({"form": 3, "pp": 2}) == "- pp=2"  # "3 pp=2" before
    assert form({"form": "pp", "pp": 2, "schedule": "1f1b", "microbatches": None}) == (
        "pp pp=2 1f1b x?")  # "x None" before


@pytest.mark.parametrize(("details", "named"), [
    ({"rank_nodes": ["n1", "n1"], "rank_solo_s": [0.2, 0.2, 0.2, 0.2]}, False),
    ({"rank_nodes": ["n1"] * 4, "rank_solo_s": [0.2, 0.2, "0.2", 0.2]}, False),
    ({"rank_nodes": ["n1"] * 4, "rank_solo_s": [0.2, 0.2, float("inf"), 0.2]}, False),
    ({"rank_nodes": ["n1"] * 4, "rank_solo_s": [0.2, 0.2, True, 0.2]}, False),
    ({"rank_nodes": "n1n1", "rank_solo_s": [0.2, 0.2, 0.2, 0.2]}, False),
    ({"rank_nodes": [], "rank_solo_s": []}, False),
    ({"rank_nodes": [1, 1, 1, 1], "rank_solo_s": [0.2, 0.2, 0.2, 0.2]}, True),
    ({"rank_nodes": ("n1",) * 4, "rank_solo_s": (0.2, 0.2, 0.2, 0.2)}, True),
])
def test_damaged_per_rank_times_name_nothing_and_say_so(details, named) -> None:
    drags, notes = judge_ranks(details, 4)
    assert drags == ()
    assert ("no per-rank node and solo times: nothing to name" in notes) != named


def test_a_point_reads_its_shape_from_what_the_record_holds() -> None:
    [series] = of_run("r1", "", [_measurement({
        "world_size": 4, "nodes": "2", "scaling": 5, "parallel": "fsdp",
        "rank_nodes": ["a", "a", "b", "b"]}, world=None)]).series
    [point] = series.points
    assert (point.world_size, point.nodes, point.ranks_per_node) == (4, 2, (2, 2))
    assert point.scaling == "unknown" and point.parallel == {}
    [series] = of_run("r1", "", [_measurement({"world_size": 4, "nodes": 2,
                                               "scaling": "strong"})]).series
    [point] = series.points
    assert (point.nodes, point.ranks_per_node, point.scaling) == (2, (2, 2), "strong")
    # Not a world size: the measurement is left out, and said so.
    result = of_run("r1", "", [_measurement({"world_size": "4"}, world=None)])
    assert result.series == () and "without a world size" in result.notes[0]
