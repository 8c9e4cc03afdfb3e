"""The explicit registry of benchmark declarations."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.dtypes import DTYPES
from accelbench.core.registry import FAMILIES, Benchmark


def test_registry_lists_the_micro_benchmarks_first() -> None:
    assert REGISTRY.names()[:5] == ["gemm", "memory", "launch", "conv", "attention"]
    assert len(set(REGISTRY.names())) == len(REGISTRY)


@pytest.mark.parametrize("bench", list(REGISTRY), ids=lambda b: b.name)
def test_declaration_is_complete(bench: Benchmark) -> None:
    assert bench.family in FAMILIES
    assert "cpu" in bench.devices and "cuda" in bench.devices
    assert 0 < bench.timeout_s <= 900
    assert callable(bench.load())
    assert len(bench.version) == 12
    json.dumps(bench.describe())


@pytest.mark.parametrize("bench", list(REGISTRY), ids=lambda b: b.name)
def test_defaults_pass_their_own_validation(bench: Benchmark) -> None:
    defaults = {p.name: p.default for p in bench.params}
    assert bench.resolve({}) == defaults
    for p in bench.params:
        p.validate(p.default, bench.name)
        assert p.parse(str(p.default), bench.name) == p.default
        assert p.help


def test_gemm_dtypes_are_known_precisions() -> None:
    dtypes = REGISTRY.get("gemm").dtypes
    assert dtypes == ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
    assert set(dtypes) <= set(DTYPES)


def test_importing_the_registry_does_not_import_torch() -> None:
    code = "import accelbench.benchmarks, sys; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
