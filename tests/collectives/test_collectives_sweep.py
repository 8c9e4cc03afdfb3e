"""Size sweeps in the nccl-tests form, from the command line and from suites."""

from __future__ import annotations

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.collectives.sweep import parse_size, parse_sizes, sweep_sizes
from accelbench.core.device import DeviceInfo
from accelbench.core.request import RunRequest
from accelbench.core.units import format_size
from accelbench.errors import UserError
from accelbench.runner.plan import expand, load_suite, validate

CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942")


@pytest.mark.parametrize(
    ("text", "size"),
    [("8", 8), (8, 8), ("1K", 1024), ("64k", 65536), ("256M", 256 << 20), ("1G", 1 << 30),
     ("2GiB", 2 << 30), ("512B", 512), (" 4 KB ", 4096)],
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1.5M", "-8", "8X", "K", True])
def test_bad_sizes(text):
    with pytest.raises(UserError):
        parse_size(text)


def test_sweeps_like_nccl_tests():
    assert sweep_sizes(8, 128, factor=2) == (8, 16, 32, 64, 128)
    assert sweep_sizes(8, 100, factor=2) == (8, 16, 32, 64)  # stops below MAX
    assert sweep_sizes(1024, 4096, step=1024) == (1024, 2048, 3072, 4096)
    assert parse_sizes("8:1G:x2")[-1] == 1 << 30 and len(parse_sizes("8:1G:x2")) == 28
    assert parse_sizes("1K:64K:+8K") == (1024, 9216, 17408, 25600, 33792, 41984, 50176, 58368)
    assert parse_sizes("1M:4M") == (1 << 20, 2 << 20, 4 << 20)  # doubling by default
    assert parse_sizes("0:16:+8") == (0, 8, 16)
    assert parse_sizes("64K") == (65536,)


@pytest.mark.parametrize(
    ("text", "message"),
    [("8:1G:x1", "at least 2"), ("1G:8:x2", "min <= max"), ("0:8:x2", "cannot start at 0"),
     ("8:1G:+0", "at least 1"), ("1:1G:+1", "more than 1000"), ("8:1G:/2", r"xFACTOR or \+STEP"),
     ("8:1G:x2.5", "factor"), ("8::x2", "not a sweep"), ("8:16:x2:1", "not a sweep")],
)
def test_bad_sweeps_are_one_line_user_errors(text, message):
    with pytest.raises(UserError, match=message):
        parse_sizes(text)


def test_format_size():
    assert [format_size(s) for s in (8, 1000, 1024, 3 << 20, 1 << 30)] == [
        "8", "1000", "1K", "3M", "1G"]


def test_a_sweep_on_the_command_line_is_one_case_per_size():
    request = RunRequest(benches=("collectives",),
                      overrides={"bytes": ("8:64:x2", "1K"), "op": ("all-reduce", "barrier")})
    validate(request, REGISTRY)
    cases = expand(validate(request, REGISTRY), CPU)
    # A barrier moves no data: one case, with no size in its identity.
    assert [(c.params["op"], c.case.param_dict.get("bytes")) for c in cases] == [
        *(("all-reduce", b) for b in (8, 16, 32, 64, 1024)), ("barrier", None)]
    assert all(isinstance(c.params["bytes"], int) for c in cases)
    assert "bytes=8 " in cases[0].case.label and "op=all-reduce" in cases[0].case.label


def test_a_bad_sweep_is_refused_before_anything_runs():
    with pytest.raises(UserError, match="sweep factor"):
        validate(RunRequest(benches=("collectives",), overrides={"bytes": ("8:1G:x1",)}),
                 REGISTRY)
    with pytest.raises(UserError, match="not one of"):
        validate(RunRequest(benches=("collectives",), overrides={"op": ("allreduce",)}), REGISTRY)


def test_parameters_without_a_sweep_syntax_are_untouched():
    request = RunRequest(benches=("memory",), overrides={"size_mib": ("64", "128")})
    cases = expand(validate(request, REGISTRY), CPU)
    assert {c.params["size_mib"] for c in cases} == {64, 128}
    with pytest.raises(UserError, match="not a valid int"):
        validate(RunRequest(benches=("memory",), overrides={"size_mib": ("8:64:x2",)}), REGISTRY)


def test_suites_sweep_all_reduce_and_standard_covers_every_operation():
    quick = expand(validate(RunRequest(benches=("collectives",)), REGISTRY), CPU)
    assert [c.params["bytes"] for c in quick] == [16 << (4 * k) for k in range(5)]
    assert {c.params["op"] for c in quick} == {"all-reduce"}
    gpu = expand(validate(RunRequest(benches=("collectives",)), REGISTRY), MI300X)
    assert max(c.params["bytes"] for c in gpu) == 256 << 20
    for device, top in ((CPU, 64 << 20), (MI300X, 1 << 30)):
        standard = expand(validate(RunRequest(benches=("collectives",)), REGISTRY,
                                   load_suite("standard")), device)
        op = REGISTRY.get("collectives").param("op")
        assert op is not None and op.choices is not None
        assert {c.params["op"] for c in standard} == set(op.choices)
        assert max(c.params["bytes"] for c in standard) == top
        assert {c.params["inplace"] for c in standard
                if c.params["op"] == "all-gather"} == {"auto", "yes"}
