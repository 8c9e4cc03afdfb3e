"""A parameter that does not apply to a case is no part of its identity: it neither splits
the case nor shows in its key and label, and records stored with it before compare with
the cases planned now."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from accelbench.analysis.compare import compare
from accelbench.analysis.select import RunGroup
from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.health import copy_matrix
from accelbench.benchmarks.micro import memory
from accelbench.core.case import NOT_APPLYING_BEFORE, Case, case_key, identity_params
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement, Rate
from accelbench.core.params import DEFAULT, UNKEYED
from accelbench.core.request import RunRequest
from accelbench.core.timing import Timing
from accelbench.runner.plan import PlannedCase, expand, load_suite, validate
from accelbench.store import Store

CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942")
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90")


def _inapplicable(planned: PlannedCase) -> list[str]:
    """The parameters of a planned case's identity that do not apply to it, less those
    declared to keep their default in the identity (DEFAULT: the engines' settings)."""
    out = []
    for name, _ in planned.case.params:
        declared = planned.benchmark.param(name)
        if declared is not None and declared.outside != DEFAULT \
                and not declared.applies(planned.params):
            out.append(f"{planned.case.label}: {name}")
    return out


@pytest.mark.parametrize("suite", ["quick", "standard", "full", "validate", "generations"])
@pytest.mark.parametrize("device", [CPU, MI300X, H100], ids=lambda d: d.platform)
def test_suites_plan_no_parameter_that_does_not_apply_and_no_case_twice(
        suite: str, device: DeviceInfo) -> None:
    planned = expand(validate(RunRequest(), REGISTRY, load_suite(suite)), device, 8)
    assert planned
    assert [p for p in planned if _inapplicable(p)] == []
    # And by the rule written down apart from the declarations: no all-gather with a
    # reduction, barrier with a size, device copy with `pinned`, vision model with `seq`.
    assert [p.case.label for p in planned
            if identity_params(p.case.benchmark, p.case.param_dict) != p.case.param_dict] == []
    twice = [k for k, n in Counter((p.case, p.ranks) for p in planned).items() if n > 1]
    assert twice == []


def test_standard_suite_measures_a_barrier_once_per_configuration_with_no_size() -> None:
    planned = expand(validate(RunRequest(benches=("collectives",)), REGISTRY,
                              load_suite("standard")), H100)
    barriers = [p for p in planned if p.params["op"] == "barrier"]
    assert len(barriers) == 1
    assert "bytes" not in barriers[0].case.param_dict
    assert "reduce" not in barriers[0].case.param_dict


def test_a_barrier_over_a_size_sweep_is_one_case_per_other_setting() -> None:
    request = RunRequest(benches=("collectives",),
                         overrides={"op": ("barrier",), "bytes": ("16:1M:x16",),
                                    "dtype": ("fp32", "bf16"), "iters": ("10", "20")})
    planned = expand(validate(request, REGISTRY), CPU)
    # A barrier moves no data: neither its sizes nor its element types make cases.
    assert len(planned) == 2
    assert {p.case.param_dict["iters"] for p in planned} == {10, 20}
    assert all("bytes" not in p.case.param_dict for p in planned)
    assert all("dtype" not in p.case.param_dict for p in planned)
    # The measure function is still given every parameter, at its default where unkeyed.
    assert all(p.params["bytes"] == 1 << 20 and p.params["reduce"] == "sum" for p in planned)


def _case(bench: str, **given: object) -> Case:
    declared = REGISTRY.get(bench)
    return declared.case(declared.resolve(dict(given)), "cuda:0")


@pytest.mark.parametrize(("bench", "given", "left_out"), [
    ("collectives", {"op": "all-gather", "reduce": "sum"}, "reduce"),
    ("collectives", {"op": "broadcast"}, "reduce"),
    ("collectives", {"op": "barrier", "bytes": 0}, "bytes"),
    ("memory", {"op": "copy", "pinned": True}, "pinned"),
    ("memory", {"op": "triad", "pinned": False}, "pinned"),
    ("train", {"model": "bert-base", "image": 224}, "image"),
    ("infer", {"model": "resnet50", "seq": 64}, "seq"),
    ("infer-engine", {"model": "vit-b16", "seq": 64}, "seq"),
    ("train", {"model": "sd-unet", "seq": 64}, "seq"),
    ("train", {"model": "sd-unet", "image": 64}, "image"),
    ("serve", {"model": "resnet50", "seq": 64}, "seq"),
])
def test_a_parameter_that_does_not_apply_is_not_in_the_key_or_label(
        bench: str, given: dict[str, object], left_out: str) -> None:
    case = _case(bench, **given)
    assert left_out not in case.param_dict
    assert f" {left_out}=" not in case.label
    others = {k: v for k, v in given.items() if k != left_out}
    assert case.key == _case(bench, **others).key


@pytest.mark.parametrize(("bench", "given", "kept"), [
    ("collectives", {"op": "all-reduce", "reduce": "max"}, "reduce"),
    ("collectives", {"op": "all-gather", "bytes": 4096}, "bytes"),
    ("memory", {"op": "h2d", "pinned": False}, "pinned"),
    ("train", {"model": "bert-base", "seq": 64}, "seq"),
    ("infer", {"model": "resnet50", "image": 160}, "image"),
    ("train", {"model": "lstm", "seq": 64}, "seq"),
])
def test_a_parameter_that_applies_stays_in_the_identity(
        bench: str, given: dict[str, object], kept: str) -> None:
    case = _case(bench, **given)
    assert case.param_dict[kept] == given[kept]
    others = {k: v for k, v in given.items() if k != kept}
    assert case.key != _case(bench, **others).key


def test_the_rule_for_stored_records_agrees_with_the_declarations() -> None:
    """Every parameter a declaration leaves out of the identity where it does not apply
    (UNKEYED) has a rule for the records stored with it before, and each rule drops a
    parameter exactly where the declaration says it does not apply."""
    for bench in REGISTRY:
        rules = {name: (on, where) for name, on, where in NOT_APPLYING_BEFORE.get(bench.name, ())}
        for p in bench.params:
            if p.outside != UNKEYED:
                continue
            assert p.name in rules, f"{bench.name}: {p.name} has no rule for stored records"
            on, where = rules[p.name]
            values = bench.param(on).choices  # type: ignore[union-attr]
            assert values is not None
            for value in values:
                resolved = bench.resolve({on: value})
                assert (value in where) == (not p.applies(resolved)), (bench.name, p.name, value)


def _timing(samples: tuple[float, ...]) -> Timing:
    return Timing(samples, 10, 0, "converged")


def _old_all_gather() -> dict[str, object]:
    """An all-gather stored as accelbench did before: with `reduce=sum` in its case."""
    params = {"op": "all-gather", "bytes": 1 << 20, "dtype": "fp32", "inplace": "auto",
              "warmup": 0, "iters": 0}
    case = Case.make("collectives", "v1", "collectives", params, "cuda:0")
    m = Measurement(case, "ok", timings=(_timing((1e-4, 1.1e-4, 1.05e-4)),),
                    rates=(Rate("busbw", 1 << 20, "B/s"),), started_at=1.0)
    record = m.to_dict()
    stored = {**params, "reduce": "sum"}
    record["case"] = {**record["case"], "params": stored, "shown": sorted(stored),
                      "key": case_key("collectives", stored.items())}
    assert record["case"]["key"] != case.key
    return record


def test_an_old_all_gather_with_reduce_sum_compares_with_a_new_one(tmp_path: Path) -> None:
    old = Measurement.from_dict(_old_all_gather())
    new_case = REGISTRY.get("collectives").case(
        REGISTRY.get("collectives").resolve({"op": "all-gather", "bytes": 1 << 20}), "cuda:0")
    assert "reduce" not in new_case.param_dict
    assert old.case.key == new_case.key
    new = Measurement(Case.make("collectives", "v1", "collectives", new_case.param_dict,
                                "cuda:0"), "ok",
                      timings=(_timing((1e-4, 1.1e-4, 1.05e-4)),),
                      rates=(Rate("busbw", 1 << 20, "B/s"),), started_at=2.0)
    with Store.open(tmp_path / "s.sqlite") as store:
        runs = []
        for m in (old, new):
            run_id = store.begin_run(fingerprint={"format_version": 1}, fingerprint_id="fp",
                                     generation_key="H100", device="cuda", suite=None,
                                     argv=["run"], host="h", accelbench_version="0")
            store.add_measurement(run_id, m)
            store.finish_run(run_id, "complete")
            runs.append(store.load_run(run_id))
    result = compare(RunGroup("a", (runs[0],)), RunGroup("b", (runs[1],)))
    assert not result.only_a and not result.only_b and not result.version_differs
    assert [c.key for c in result.cases] == [new_case.key]


def test_an_old_store_is_rekeyed_when_opened(tmp_path: Path) -> None:
    """A store written before: its all-gather stored under the key with `reduce` is found
    by the key a run plans now, once the store is opened (migration 007_case_identity),
    and its record is kept as it was stored."""
    path = tmp_path / "old.sqlite"
    with Store.open(path) as store:
        run_id = store.begin_run(fingerprint={"format_version": 1}, fingerprint_id="fp",
                                 generation_key="H100", device="cuda", suite=None,
                                 argv=["run"], host="h", accelbench_version="0")
        store.finish_run(run_id, "complete")
    record = _old_all_gather()
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO measurements (run_id, case_key, status, record)"
                     " VALUES (?, ?, ?, ?)",
                     (run_id, record["case"]["key"], "ok", json.dumps(record)))  # type: ignore[index]
        conn.execute("DELETE FROM migrations WHERE name IN "
                     "('007_case_identity', '008_barrier_identity')")
        conn.execute("PRAGMA user_version = 6")
    conn.close()
    new_key = Case.from_dict(record["case"]).key  # type: ignore[arg-type]
    assert new_key != record["case"]["key"]  # type: ignore[index]
    with Store.open(path) as store:
        found = store.measurements_for_case(new_key)
        assert [m.case.key for _, m in found] == [new_key]
    with sqlite3.connect(path) as conn:
        (stored,) = conn.execute("SELECT record FROM measurements").fetchone()
    conn.close()
    assert json.loads(stored)["case"]["params"]["reduce"] == "sum"  # kept as stored


def test_a_case_made_with_a_parameter_that_did_not_apply_leaves_it_out() -> None:
    """However a case is made (read from a record, or built by hand as older code did),
    its identity, shown parameters and key are those of the case planned now."""
    old = Case.make("memory", "v", "micro", {"op": "copy", "size_mib": 64, "pinned": True},
                    "cpu", shown=("op", "size_mib", "pinned"))
    assert old.param_dict == {"op": "copy", "size_mib": 64} and old.shown == ("op", "size_mib")
    assert old.key == _case("memory", op="copy", size_mib=64).key


def test_identity_params_keep_what_applies_and_a_new_case_as_it_is() -> None:
    params = {"op": "all-reduce", "reduce": "max", "bytes": 8}
    assert identity_params("collectives", params) == params
    assert identity_params("collectives", {"op": "scatter", "reduce": "sum"}) == {
        "op": "scatter"}
    assert identity_params("gemm", {"shape": "1024", "dtype": "fp32"}) == {
        "shape": "1024", "dtype": "fp32"}


# -- figures say how they count bytes ------------------------------------------------------


def test_memory_copy_bandwidth_counts_read_plus_written_and_transfers_count_once() -> None:
    """`bandwidth` (copy, triad) counts bytes read plus written, as STREAM does;
    `transfer_rate` (h2d, d2h, and the copy matrix's figures) counts each byte once: no
    figure name stands for both."""
    assert memory.BYTE_FORMULAS["copy"].startswith("2 * buffer_bytes")
    assert memory.BYTE_FORMULAS["h2d"].startswith("buffer_bytes")
    assert memory.BANDWIDTH == "bandwidth" and memory.TRANSFER_RATE == "transfer_rate"
    assert copy_matrix.MIN_RATE.endswith("transfer_rate")
    assert copy_matrix.MEDIAN_RATE.endswith("transfer_rate")
    assert "bandwidth" not in copy_matrix.MIN_RATE + copy_matrix.MEDIAN_RATE


@pytest.mark.parametrize(("op", "old", "now"), [
    ("h2d", "bandwidth", "transfer_rate"), ("d2h", "bandwidth", "transfer_rate"),
    ("copy", "bandwidth", "bandwidth"),
])
def test_a_stored_memory_record_reads_with_the_figure_name_of_its_convention(
        op: str, old: str, now: str) -> None:
    case = Case.make("memory", "v", "micro", {"op": op, "size_mib": 64, "pinned": True},
                     "cuda:0")
    m = Measurement(case, "ok", timings=(_timing((1e-3, 1.1e-3)),),
                    rates=(Rate(old, 64 << 20, "B/s"),))
    read = Measurement.from_dict(m.to_dict())
    assert [r.name for r in read.rates] == [now]
    assert read.figure(now) is not None


def test_a_stored_copy_matrix_record_reads_with_transfer_rates() -> None:
    from accelbench.core.measurement import Figure

    case = Case.make("copy-matrix", "v", "health", {"bytes": 0}, "cuda:0", check=True)
    m = Measurement(case, "ok", measured=(Figure("min_bandwidth", 1e9, "B/s"),
                                          Figure("median_bandwidth", 2e9, "B/s")))
    read = Measurement.from_dict(m.to_dict())
    assert [f.name for f in read.measured] == ["min_transfer_rate", "median_transfer_rate"]


def test_a_reduction_given_for_some_operations_only_is_noted_and_for_none_refused() -> None:
    from accelbench.errors import UserError
    from accelbench.runner.plan import given_aside

    request = RunRequest(benches=("collectives",),
                         overrides={"op": ("all-reduce", "all-gather"), "reduce": ("max",),
                                    "bytes": ("1M",)})
    valid = validate(request, REGISTRY)
    planned = expand(valid, CPU)
    assert [(p.params["op"], p.case.param_dict.get("reduce")) for p in planned] == [
        ("all-reduce", "max"), ("all-gather", None)]
    (note,) = given_aside(valid, planned)
    assert "reduce=max applies only where op all-reduce" in note
    assert note.endswith("the other 1 of 2 collectives cases leave it out")
    alone = validate(RunRequest(benches=("collectives",),
                                overrides={"op": ("broadcast",), "reduce": ("max",)}), REGISTRY)
    with pytest.raises(UserError, match="no collectives case here has it"):
        given_aside(alone, expand(alone, CPU))


@pytest.mark.parametrize(("op", "now"), [("bandwidth", "bandwidth"),
                                         ("first-touch", "transfer_rate"),
                                         ("cpu-touch", "transfer_rate")])
def test_unified_memory_names_a_touch_of_one_buffer_a_transfer_rate(op: str, now: str) -> None:
    """The kernel's bytes read plus written are a bandwidth; a first touch moves its buffer
    once, so it is a transfer rate; a record stored when both were `bandwidth` reads with
    today's name."""
    from accelbench.benchmarks.micro import unified

    assert unified.figure_name(op) == now
    assert unified.BUFFERS.get(op, 0) == (2 if now == "bandwidth" else 1)
    case = Case.make("unified-memory", "v", "micro", {"op": op, "size_mib": 64}, "cuda:0")
    m = Measurement(case, "ok", timings=(_timing((1e-3, 1.1e-3)),),
                    rates=(Rate("bandwidth", 64 << 20, "B/s"),))
    assert [r.name for r in Measurement.from_dict(m.to_dict()).rates] == [now]
