"""A request is parsed once: `validate` turns -p text and a command's own values into
typed values, and planning never parses text again."""

from __future__ import annotations

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.device import DeviceInfo
from accelbench.core.params import Param
from accelbench.core.request import RunRequest
from accelbench.errors import UserError
from accelbench.runner.plan import expand, validate

CPU = DeviceInfo(type="cpu", index=None, name="cpu", platform="cpu")


def test_given_values_are_typed_once_and_planning_splits_no_text(monkeypatch) -> None:
    request = RunRequest(benches=("gemm",), overrides={"shape": ("256,512",), "batch": ("2",)})
    valid = validate(request, REGISTRY)
    assert valid.given["gemm"]["batch"] == (2,)
    assert len(valid.given["gemm"]["shape"]) == 2

    def no_text(self: Param, text: str) -> tuple[str, ...]:
        raise AssertionError(f"{self.name}={text!r} split again")

    monkeypatch.setattr(Param, "split", no_text)
    cases = expand(valid, CPU)
    assert {c.params["batch"] for c in cases} == {2}
    assert len({c.params["shape"] for c in cases}) == 2


def test_a_commands_own_values_are_typed_and_never_split() -> None:
    # A float written back into text and split again could change; a typed value cannot.
    valid = validate(RunRequest(suite="validate", benches=("burn-in",),
                             values={"seconds": (0.125,)}), REGISTRY)
    assert valid.given["burn-in"]["seconds"] == (0.125,)
    with pytest.raises(UserError, match="seconds"):
        validate(RunRequest(suite="validate", benches=("burn-in",), values={"seconds": (-1.0,)}),
                 REGISTRY)


def test_the_device_is_named_once() -> None:
    assert validate(RunRequest(benches=("gemm",), device="cuda:3"), REGISTRY).device == ("cuda", 3)
    assert validate(RunRequest(benches=("gemm",)), REGISTRY).device == ("auto", None)
    with pytest.raises(UserError):
        validate(RunRequest(benches=("gemm",), device="tpu"), REGISTRY)
