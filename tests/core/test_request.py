"""A run request: a frozen, typed value whose JSON form reads back as itself, read from
untrusted JSON with every value checked, and upgraded from a stored command line."""

from __future__ import annotations

import json

import pytest

from accelbench.core.request import (
    REQUEST_FORMAT,
    AbRequest,
    ProfileRequest,
    RequestError,
    RunRequest,
    Stack,
)
from accelbench.core.request_argv import request_from_argv
from accelbench.errors import EXIT_USAGE

FULL = RunRequest(
    command="run", suite="standard", benches=("gemm", "memory"),
    overrides={"shape": ("1024,2048",), "op": ("copy",)}, values={"seconds": (60.0,)},
    dtypes=("fp16", "bf16"), device="cuda:1",
    timing={"max_time": 0.5, "flush_cache": True, "telemetry_sources": ("nvml", "host")},
    nproc_per_node=2, backend="gloo", threads=3, wait_quiet=5.0, oversubscribe=True,
    case_timeout=120.0, repeat=2, report="out.md", no_report=False,
    profile=ProfileRequest(wait=0, warmup=1, active=3, memory=True, output="traces"))


def test_the_json_form_reads_back_as_the_same_request() -> None:
    data = FULL.to_dict()
    assert data["format"] == REQUEST_FORMAT
    assert RunRequest.from_dict(json.loads(json.dumps(data))) == FULL
    assert RunRequest.from_json(FULL.to_json()) == FULL
    assert RunRequest.from_json(RunRequest().to_json()) == RunRequest()


AB = RunRequest(command="ab", benches=("gemm",), ab=AbRequest(
    a=Stack(python="/opt/envs/torch-2.13/bin/python"),
    b=Stack(env=(("PYTORCH_TUNABLEOP_ENABLED", "1"), ("EMPTY", ""))),
    min_effect=0.02, alpha=0.01, max_rounds=30, budget=600.0, fail_on_regression=0.05,
    id="0123456789ab", side="b"))


def test_an_ab_request_reads_back_and_a_format_1_one_reads_as_none() -> None:
    assert RunRequest.from_json(AB.to_json()) == AB
    assert AB.to_dict()["ab"]["b"]["env"] == [["PYTORCH_TUNABLEOP_ENABLED", "1"], ["EMPTY", ""]]
    assert RunRequest.from_dict({"format": 1}).ab is None


@pytest.mark.parametrize(("ab", "message"), [
    ({"c": {}}, "request.ab: unknown key 'c'"),
    ({"a": {"python": ""}}, "request.ab.a.python: expected a non-empty text"),
    ({"a": {"cwd": "/"}}, "request.ab.a: unknown key 'cwd'"),
    ({"b": {"env": [["1BAD", "x"]]}}, "request.ab.b.env[0][0]: not a variable name"),
    ({"b": {"env": [["A", "x", "y"]]}}, "request.ab.b.env[0]: expected [NAME, VALUE]"),
    ({"b": {"env": [["A", 1]]}}, "request.ab.b.env[0][1]: expected a text"),
    ({"b": {"env": [["A", "x\u0000"]]}}, "request.ab.b.env[0][1]"),
    ({"min_effect": 1.0}, "request.ab.min_effect: expected a number from 0 and below 1"),
    ({"alpha": 0}, "request.ab.alpha: expected a number above 0"),
    ({"alpha": float("nan")}, "request.ab.alpha"),
    ({"max_rounds": 1}, "request.ab.max_rounds: expected a whole number of at least 2"),
    ({"max_rounds": 10**9}, "request.ab.max_rounds: at most"),
    ({"budget": -1}, "request.ab.budget: expected a positive"),
    ({"side": "c"}, "request.ab.side: expected 'a' or 'b'"),
])
def test_a_bad_ab_form_is_one_line_naming_its_value(ab, message) -> None:
    with pytest.raises(RequestError) as refused:
        RunRequest.from_dict(json.loads(json.dumps({"format": 2, "ab": ab})))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_form_may_leave_out_what_keeps_its_default() -> None:
    assert RunRequest.from_dict({"format": 1, "benches": ["gemm"]}) == RunRequest(
        benches=("gemm",))


@pytest.mark.parametrize(("data", "message"), [
    ([], "request: expected an object, got list"),
    ({}, "request.format: expected a format number"),
    ({"format": 3}, "written by a newer accelbench (request format 3"),
    ({"format": 1, "bench": ["gemm"]}, "unknown key 'bench'"),
    ({"format": 1, "suite": 3}, "request.suite: expected a non-empty text, got 3"),
    ({"format": 1, "suite": " "}, "request.suite: expected a non-empty text"),
    ({"format": 1, "benches": "gemm"}, "request.benches: expected a list, got str"),
    ({"format": 1, "benches": ["gemm", ""]}, "request.benches[1]"),
    ({"format": 1, "threads": 0}, "request.threads: expected a whole number of at least 1"),
    ({"format": 1, "threads": True}, "request.threads"),
    ({"format": 1, "threads": 2.5}, "request.threads"),
    ({"format": 1, "case_timeout": float("inf")}, "request.case_timeout: expected a positive"),
    ({"format": 1, "wait_quiet": -1}, "request.wait_quiet"),
    ({"format": 1, "oversubscribe": "yes"}, "request.oversubscribe: expected true or false"),
    ({"format": 1, "overrides": {"shape": [1024]}}, "request.overrides.shape[0]"),
    ({"format": 1, "values": {"seconds": [float("nan")]}}, "request.values.seconds[0]"),
    ({"format": 1, "values": {"seconds": [[1]]}}, "request.values.seconds[0]"),
    ({"format": 1, "timing": {"max_tme": 1}}, "unknown timing setting 'max_tme'"),
    ({"format": 1, "timing": {"max_time": "1"}}, "request.timing.max_time: expected a number"),
    ({"format": 1, "profile": {"active": 0}}, "request.profile.active"),
    ({"format": 1, "profile": {"steps": 3}}, "request.profile: unknown key 'steps'"),
])
def test_a_bad_form_is_one_line_naming_the_first_bad_value(data, message) -> None:
    with pytest.raises(RequestError) as refused:
        RunRequest.from_dict(data)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert refused.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not a JSON request"),
    ('{"format": 1, "timing": {"max_time": NaN}}', "expected a finite number"),
    ('{"format": 1, "suite": "\\udc80"}', "not Unicode"),
    ("[" * 100 + "]" * 100, "nested too deeply"),
])
def test_json_text_is_read_within_the_caps_of_untrusted_input(text, message) -> None:
    with pytest.raises(RequestError, match=message):
        RunRequest.from_json(text, "FILE")


def test_a_stored_command_line_of_run_becomes_its_request() -> None:
    argv = ["run", "--bench", "gemm", "memory", "--dtype", "fp16,bf16", "-p", "shape=1024",
            "-p", "shape=2048", "--max-time", "0.5", "--target-ci", "2", "--no-telemetry",
            "--telemetry-source", "host", "--threads", "3", "--timeout", "60", "--repeat",
            "2", "--store", "results.sqlite", "--json", "--no-report"]
    assert request_from_argv(argv) == RunRequest(
        benches=("gemm", "memory"), overrides={"shape": ("1024", "2048")},
        dtypes=("fp16", "bf16"), device="auto",
        timing={"max_time": 0.5, "target_rel_ci": 0.02, "telemetry_interval": 0.0,
                "telemetry_sources": ("host",)},
        threads=3, case_timeout=60.0, repeat=2, no_report=True)
    assert request_from_argv(["run"]) == RunRequest()


@pytest.mark.parametrize("argv", [
    [], ["validate", "--level", "1"], ["run", "--bogus"], ["run", "-p", "shape"],
    ["run", "--threads", "many"], ["run", 3],
])
def test_what_does_not_read_as_run_s_options_has_no_request(argv) -> None:
    assert request_from_argv(argv) is None
