"""The registry of benchmark declarations: what it promises the rest of accelbench.

Every declared benchmark can be called, every suite asks only for what the benchmarks
declare, every default is a valid value, versions follow the code, and the documentation
says what each benchmark is.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.dtypes import DTYPES
from accelbench.core.params import DEFAULT, UNKEYED
from accelbench.core.registry import Benchmark, Registry, source_version
from accelbench.runner.plan import load_suite, spread_values, suite_names
from docs_pages import page

BENCHES = list(REGISTRY)


@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b.name)
def test_entry_point_is_a_measure_function_of_ctx_and_params(bench: Benchmark) -> None:
    fn = bench.load()
    assert callable(fn)
    assert fn is getattr(importlib.import_module(bench.module), bench.entry.split(":")[1])
    parameters = list(inspect.signature(fn).parameters.values())
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert len(positional) >= 2, f"{bench.entry} must take (ctx, params)"
    assert all(p.default is not p.empty for p in positional[2:])
    for module in bench.sources:
        importlib.import_module(module)  # every source of the version exists


@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b.name)
def test_declaration_is_usable(bench: Benchmark) -> None:
    assert bench.family in REGISTRY.families
    for entry in bench.views:  # every view loads, and a run without results adds nothing
        module, _, name = entry.partition(":")
        assert getattr(importlib.import_module(module), name)([]) == []
    assert "cpu" in bench.devices and "cuda" in bench.devices
    assert 0 < bench.timeout_s <= 900
    assert bench.min_ranks >= 1 and (bench.distributed or bench.min_ranks == 1)
    assert re.fullmatch(r"[0-9a-f]{12}", bench.version)
    described = json.loads(json.dumps(bench.describe()))
    assert described["name"] == bench.name
    assert [p["name"] for p in described["params"]] == [p.name for p in bench.params]
    if bench.family != "collectives":  # collectives move integers of any width too
        assert set(bench.dtypes) <= set(DTYPES), "a precision the dtype table does not know"


@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b.name)
def test_defaults_pass_their_own_validation(bench: Benchmark) -> None:
    defaults = {p.name: p.default for p in bench.params}
    # A parameter that applies only to some values of another is left out elsewhere, or
    # kept at its default, as it says.
    assert bench.resolve({}) == {p.name: p.default for p in bench.params
                                 if p.applies(defaults) or p.outside in (DEFAULT, UNKEYED)}
    for p in bench.params:
        p.validate(p.default, bench.name)
        assert p.parse(str(p.default), bench.name) == p.default
        if p.choices:
            assert p.default in p.choices
        assert p.help


def test_names_are_unique_and_a_second_declaration_is_refused() -> None:
    assert len(set(REGISTRY.names())) == len(REGISTRY) == len(BENCHES)
    with pytest.raises(ValueError, match="declared twice"):
        Registry([BENCHES[0], BENCHES[0]])
    for bench in BENCHES:
        assert REGISTRY.get(bench.name) is bench


@pytest.mark.parametrize("suite_name", suite_names(REGISTRY))
def test_every_suite_asks_only_for_declared_benchmarks_and_valid_values(suite_name) -> None:
    suite = load_suite(suite_name, REGISTRY)
    assert suite.entries
    for entry in suite.entries:
        assert entry.bench in REGISTRY, f"{suite_name}: unknown benchmark {entry.bench}"
        bench = REGISTRY.get(entry.bench)
        unknown = [k for k in entry.grid if bench.param(k) is None]
        assert not unknown, f"{suite_name}: {entry.bench} has no parameter {unknown}"
        axes = {k: spread_values(bench, k, v) for k, v in entry.grid.items()}
        assert all(axes.values()), f"{suite_name}: an empty axis for {entry.bench}"
        applied: set[str] = set()
        for combo in itertools.product(*axes.values()):
            resolved = bench.resolve(dict(zip(axes, combo, strict=True)))
            for p in bench.params:
                if p.name in resolved:
                    p.validate(resolved[p.name], bench.name)
            applied |= set(resolved)
        # An axis over a parameter that applies to none of the entry's cases is a mistake.
        assert set(entry.grid) <= applied, f"{suite_name}: {entry.bench} grids what never applies"
        if entry.ranks is not None:
            assert bench.distributed, f"{suite_name}: ranks for {entry.bench}, not distributed"


def test_every_benchmark_is_in_the_full_suite_and_every_check_in_validate() -> None:
    families = ("validation", "health", "qualify")
    measuring = {b.name for b in BENCHES if b.family not in families}
    checks = {b.name for b in BENCHES if b.family in families}
    assert set(load_suite("full").benchmarks()) == measuring
    # The burn-in, the copy matrix, the stress and the gates run only when asked for
    # (`accelbench validate --burn SECONDS`, `--level N`, `accelbench qualify`).
    assert set(load_suite("validate").benchmarks()) == checks - {
        "burn-in", "copy-matrix", "stress", "gate"}
    assert set(load_suite("health").benchmarks()) == {"health"}


def test_the_docs_name_every_benchmark_with_its_family() -> None:
    tables = (page("benchmarks.md") + page("validation.md") + page("health.md")
              + page("qualify.md"))
    rows = re.findall(r"^\| (`[^|]+`) \| (\w+) \|", tables, re.M)
    documented = {name: family for names, family in rows
                  for name in re.findall(r"`([^`]+)`", names)}
    for bench in BENCHES:
        assert documented.get(bench.name) == bench.family, bench.name


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    source_version.cache_clear()


def test_version_follows_the_code_not_its_comments(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    entry, shapes = tmp_path / "vbench_entry.py", tmp_path / "vbench_shapes.py"
    _write(entry, "def measure(ctx, params):\n    return 1\n")
    _write(shapes, "SIZES = (1, 2)\n")
    importlib.invalidate_caches()
    bench = Benchmark("v", "micro", "a demo", "vbench_entry:measure", sources=("vbench_shapes",))
    alone = Benchmark("w", "micro", "a demo", "vbench_entry:measure")
    first, first_alone = bench.version, alone.version

    _write(entry, "# a comment\ndef measure(ctx, params):  # and another\n\n    return 1\n")
    assert (bench.version, alone.version) == (first, first_alone)

    _write(entry, "def measure(ctx, params):\n    return 2\n")
    changed, changed_alone = bench.version, alone.version
    assert changed != first and changed_alone != first_alone

    _write(shapes, "SIZES = (1, 2, 3)\n")  # a source of the numbers changed
    assert bench.version not in (first, changed)
    assert alone.version == changed_alone  # not a module it names
    source_version.cache_clear()


def test_benchmarks_of_different_code_have_different_versions() -> None:
    by_code: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for bench in BENCHES:
        by_code.setdefault((bench.module, tuple(sorted(bench.sources))), set()).add(
            bench.version)
    assert all(len(versions) == 1 for versions in by_code.values())
    versions = [next(iter(v)) for v in by_code.values()]
    assert len(set(versions)) == len(versions)


def test_loading_the_registry_and_every_entry_point_does_not_import_torch() -> None:
    code = ("import sys, accelbench.benchmarks as b\n"
            "fns = [x.load() for x in b.REGISTRY]\n"
            "print('torch' in sys.modules)")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
