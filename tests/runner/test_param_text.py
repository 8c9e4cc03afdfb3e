"""A `-p` value is read exactly as written, or refused: structured values are one value."""

from __future__ import annotations

import re

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.models.zoo import get_spec, parameter_count
from accelbench.cli.options import parse_overrides
from accelbench.core.device import DeviceInfo
from accelbench.core.request import RunRequest
from accelbench.errors import UserError
from accelbench.runner.plan import PlannedCase, expand, validate
from docs_pages import ALL as DOCS

CPU = DeviceInfo(type="cpu", index=None, name="cpu", platform="cpu")


def cases(*items: str, bench: str = "train") -> list[PlannedCase]:
    request = RunRequest(benches=(bench,), overrides=parse_overrides(list(items)))
    return expand(validate(request, REGISTRY), CPU)


@pytest.mark.parametrize("example", sorted(set(re.findall(r"-p (config=[^`\s]+)", DOCS))))
def test_the_documented_config_examples_are_one_case_each(example: str) -> None:
    (planned,) = cases(example)
    assert planned.params["config"] == example.split("=", 1)[1]


def test_the_asked_for_model_is_the_one_measured() -> None:
    (planned,) = cases("model=bert-tiny", "config=layers=4,hidden=256")
    spec = get_spec(planned.params["model"], planned.params["config"])
    assert (spec.shape["layers"], spec.shape["hidden"]) == (4, 256)
    # Split on its comma, the same text used to build two one-key models, the smaller
    # one with tens of thousands of parameters instead of millions.
    assert parameter_count(spec) > 10 * parameter_count(get_spec("bert-tiny", "layers=4"))


def test_repeating_p_makes_a_grid_of_structured_values() -> None:
    planned = cases("model=bert-tiny", "config=layers=2,hidden=64", "config=layers=4,hidden=64")
    assert [p.params["config"] for p in planned] == ["layers=2,hidden=64", "layers=4,hidden=64"]


def test_commas_still_make_a_grid_of_plain_values() -> None:
    planned = cases("model=bert-tiny,gpt2-tiny", "batch=2", "batch=4")
    assert {(p.params["model"], p.params["batch"]) for p in planned} == {
        ("bert-tiny", 2), ("bert-tiny", 4), ("gpt2-tiny", 2), ("gpt2-tiny", 4)}


@pytest.mark.parametrize(("item", "message"), [
    ("shape=512,,1024", "empty value between commas"),
    ("shape=512,", "empty value between commas"),
    ("config=layers=4,heads", "config"),
    ("config=layers=four", "config"),
])
def test_what_cannot_be_read_exactly_is_refused(item: str, message: str) -> None:
    bench = "gemm" if item.startswith("shape") else "train"
    with pytest.raises(UserError, match=message):
        cases(item, bench=bench)
