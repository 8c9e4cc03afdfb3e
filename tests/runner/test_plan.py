"""Suites expand into the right cases for each device class; bad requests fail early."""

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.device import DeviceInfo
from accelbench.core.request import RunRequest
from accelbench.errors import UserError
from accelbench.runner.plan import (
    expand,
    given_aside,
    load_suite,
    suite_names,
    timing_policy,
    validate,
)

CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942")


@pytest.mark.parametrize("name", suite_names(REGISTRY))
def test_every_suite_loads_and_its_cases_are_valid(name):
    suite = load_suite(name, REGISTRY)
    validate(RunRequest(suite=name), REGISTRY)
    for device in (CPU, MI300X):
        cases = expand(validate(RunRequest(suite=name), REGISTRY, suite), device)
        assert cases, f"{name} has no case for {device.platform}"
        assert len({(c.case, c.ranks) for c in cases}) == len(cases)


def test_quick_suite_differs_by_device_class():
    suite = load_suite("quick")
    cpu = expand(validate(RunRequest(), REGISTRY, suite), CPU)
    gpu = expand(validate(RunRequest(), REGISTRY, suite), MI300X)
    assert {c.case.device for c in cpu} == {"cpu"}
    assert {c.case.device for c in gpu} == {"cuda:0"}
    gpu_dtypes = {c.params["dtype"] for c in gpu if c.benchmark.name == "gemm"}
    assert {"fp16", "bf16", "fp8", "tf32"} <= gpu_dtypes
    assert not any(c.params.get("op") == "h2d" for c in cpu)


def test_overrides_replace_grid_axes():
    suite = load_suite("quick")
    request = RunRequest(benches=("gemm",), overrides={"shape": ("64", "32x16x8")},
                      dtypes=("fp32", "bf16"))
    cases = expand(validate(request, REGISTRY, suite), CPU)
    assert {(c.params["shape"], c.params["dtype"]) for c in cases} == {
        ("64", "fp32"), ("64", "bf16"), ("32x16x8", "fp32"), ("32x16x8", "bf16")
    }


def test_a_benchmark_outside_the_suite_runs_with_its_defaults():
    suite = load_suite("quick")
    cases = expand(validate(RunRequest(benches=("launch",)), REGISTRY, suite), CPU)
    assert [c.params["mode"] for c in cases] == ["eager"]


def test_full_suite_extends_standard_with_longer_budgets():
    full, standard = load_suite("full"), load_suite("standard")
    assert full.entries == standard.entries
    request = RunRequest()
    assert timing_policy(full, request).max_time > timing_policy(standard, request).max_time


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (RunRequest(suite="huge"), "unknown suite 'huge'"),
        (RunRequest(benches=("gemmm",)), "unknown benchmark 'gemmm' \\(did you mean gemm\\?\\)"),
        (RunRequest(dtypes=("fp128",)), "unknown dtype 'fp128'"),
        (RunRequest(benches=("launch",), dtypes=("fp16",)), "dtype fp16 is not measured"),
        (RunRequest(benches=("gemm",), overrides={"colour": ("red",)}), "no selected benchmark"),
        (RunRequest(benches=("gemm",), overrides={"shape": ("12x",)}), "shape"),
        (RunRequest(timing={"max_time": -1.0}), "invalid timing"),
        (RunRequest(timing={"max_time": float("nan")}), "max_time must be a finite number"),
        (RunRequest(timing={"target_rel_ci": float("inf")}), "target_rel_ci must be a finite"),
        (RunRequest(wait_quiet=float("nan")), "--wait-quiet"),
    ],
)
def test_bad_requests_fail_before_running(request_, message):
    with pytest.raises(UserError, match=message):
        validate(request_, REGISTRY)


def test_ranks_come_from_the_request_else_the_suite():
    suite = load_suite("quick")
    request = RunRequest(benches=("collectives",))
    cpu = expand(validate(request, REGISTRY, suite), CPU)
    assert cpu and {c.ranks for c in cpu} == {2}
    node = expand(validate(request, REGISTRY, suite), MI300X, device_count=8)
    assert {c.ranks for c in node} == {8}
    asked = expand(validate(RunRequest(benches=("collectives",), nproc_per_node=4), REGISTRY,
                            suite), CPU)
    assert {c.ranks for c in asked} == {4}
    # Benchmarks that are not distributed stay on one process.
    gemm = expand(validate(RunRequest(benches=("gemm",)), REGISTRY, suite), CPU)
    assert {c.ranks for c in gemm} == {1}


def test_a_suite_benchmark_for_other_devices_only_has_no_case_unless_asked_for():
    suite = load_suite("quick")
    gpu_only = {e.bench for e in suite.entries} - {
        e.bench for e in suite.entries if e.applies_to(CPU)}
    assert gpu_only == {"unified-memory"}
    cpu = expand(validate(RunRequest(), REGISTRY, suite), CPU)
    assert not {c.benchmark.name for c in cpu} & gpu_only
    gpu = expand(validate(RunRequest(), REGISTRY, suite), MI300X)
    assert "unified-memory" in {c.benchmark.name for c in gpu}
    named = expand(validate(RunRequest(benches=("unified-memory",)), REGISTRY, suite), CPU)
    assert [dict(c.params) for c in named] == [{"op": "bandwidth", "memory": "host",
                                                "size_mib": 256}]


def test_an_engine_setting_crossed_with_eager_keeps_the_eager_reference():
    """`-p engine=eager,int8 -p int8=dynamic`: the recipe applies to the int8 engine, and
    the eager case is planned as it is without it (same key: its history goes on)."""
    crossed = RunRequest(benches=("infer-engine",), overrides={
        "engine": ("eager,int8",), "int8": ("dynamic",), "model": ("bert-tiny",)})
    valid = validate(crossed, REGISTRY)
    cases = expand(valid, CPU)
    assert sorted((c.params["engine"], c.params["int8"]) for c in cases) == [
        ("eager", ""), ("int8", "dynamic")]
    (plain,) = expand(validate(RunRequest(benches=("infer-engine",), overrides={
        "engine": ("eager",), "model": ("bert-tiny",)}), REGISTRY), CPU)
    assert plain.case.key in {c.case.key for c in cases}
    assert given_aside(valid, cases) == [
        "infer-engine: int8=dynamic applies only where engine int8: the other 1 of 2 "
        "infer-engine cases keep its default (none)"]


def test_a_parameter_that_applies_to_no_planned_case_is_refused_not_dropped():
    request = RunRequest(benches=("gemm",), dtypes=("fp32",), overrides={"fast_accum": ("no",)})
    valid = validate(request, REGISTRY)
    cases = expand(valid, CPU)
    assert all("fast_accum" not in c.params for c in cases)
    with pytest.raises(UserError, match="gemm: fast_accum=no applies only where dtype fp8, "
                                        "and no gemm case here has it"):
        given_aside(valid, cases)
    # Given at its default, nothing is said.
    at_default = validate(RunRequest(benches=("gemm",), dtypes=("fp32",),
                                  overrides={"fast_accum": ("yes",)}), REGISTRY)
    assert given_aside(at_default, expand(at_default, CPU)) == []


def test_cases_a_benchmark_says_do_not_apply_are_left_out_unless_none_would_run():
    from accelbench.benchmarks.qualify.catalog import FIGURES

    every = RunRequest(command="validate", suite="validate", benches=("gate",),
                       values={"figure": FIGURES, "level": (1,)})
    # The CPU's level-1 gates: only their figures are planned.
    assert [c.params["figure"] for c in expand(validate(every, REGISTRY), CPU)] == [
        "memory-size", "launch", "gemm-fp32"]
    # A figure with no gate here, asked for alone, runs: its skip says why.
    alone = RunRequest(benches=("gate",), overrides={"figure": ("gemm-bf16",)})
    assert [c.params["figure"] for c in expand(validate(alone, REGISTRY), CPU)] == [
        "gemm-bf16"]
