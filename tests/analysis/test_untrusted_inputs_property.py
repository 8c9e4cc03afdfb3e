"""Generated hostile inputs: every command either succeeds and leaves a store that every
read command reads, or fails with one line, a documented exit code and the store
byte-for-byte as it was (not even created)."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from analysis_data import FLEET_STACK, add_run, node_measurements
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_diagnose import RULES

from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED, EXIT_STORE, EXIT_USAGE
from accelbench.store import Store, export_json

DROP = object()  # a mutation that removes the key or item
FIXTURE_CHECKS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, Any]:
    """Two one-node stores of one stack, the export of the second, and a baseline file."""
    folder = tmp_path_factory.mktemp("base")
    stores = []
    for i, host in enumerate(("node01", "node02", "node03")):
        path = folder / f"{host}.sqlite"
        with Store.open(path) as store:
            add_run(store, host=host, stack=FLEET_STACK, started_at=1.75e9 + 60 * i,
                    measurements=node_measurements(host, np.random.default_rng(i))[:4])
        stores.append(path)
    with Store.open(stores[2], create=False) as store:
        export = json.loads(json.dumps(export_json([store.load_run("latest")])))
    fleet = folder / "fleet.sqlite"
    assert main(["merge", *map(str, stores), "--into", str(fleet)]) == 0
    baseline = folder / "baseline.json"
    assert main(["baseline", "--store", str(fleet), "-o", str(baseline)]) == 0
    return {"store": stores[0], "fleet": fleet, "export": export,
            "baseline": json.loads(baseline.read_text())}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, child in items:
        yield from _paths(child, (*path, key))


def _deep(n: int) -> str:
    return f"__DEEP_{n}__"


REPLACEMENTS = st.one_of(
    st.just(DROP), st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70), st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["../../x", "/abs/path", "..", "yesterday", "nan"]),
    st.integers(min_value=1, max_value=30_000).map(_deep),
    st.lists(st.integers() | st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers() | st.none(), max_size=3),
)


def _mutate(data: Any, data_draw: Any, count: int) -> Any:
    data = json.loads(json.dumps(data))
    paths = list(_paths(data))
    for _ in range(count):
        path = data_draw(st.sampled_from(paths))
        value = data_draw(REPLACEMENTS)
        if not path:
            data = None if value is DROP else value
            continue
        parent = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            if value is DROP:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    return data


def _json_text(data: Any) -> str:
    """JSON, with the deep-nesting markers expanded (json.dumps would not nest so far)."""
    text = json.dumps(data)
    for n in {int(t.split("_")[0]) for t in text.split('"__DEEP_')[1:]}:
        text = text.replace(f'"__DEEP_{n}__"', "[" * n + "]" * n)
    return text


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def _refused(code: int, capsys: Any, allowed: tuple[int, ...]) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert code in allowed, err
    assert len(err) == 1 and err[0].startswith("accelbench: error: "), err


def _readable(store: Path, workdir: Path, capsys: Any) -> None:
    """Every read command reads the store, exit 0 (diagnose: 0 or 1, a failing node)."""
    s = ["--store", str(store)]
    with Store.open(store, create=False) as opened:
        ids = [r.id for r in opened.list_runs()]
    commands = [["runs", *s], ["runs", *s, "--json"], ["export", *s, "-o", str(workdir / "e")],
                ["export", *s, "--format", "csv", "-o", str(workdir / "c")],
                ["report", *s, "-o", str(workdir / "r.html"), *ids],
                ["report", *s, "-o", str(workdir / "r.md"), "latest"],
                ["baseline", *s, "-o", str(workdir / "b.json")]]
    commands += [["show", *s, i] for i in ids] + [["show", *s, "--json", ids[0]],
                                                  ["show", *s, "--env", ids[0]],
                                                  ["history", *s, "gemm"],
                                                  ["generations", *s]]
    if len(ids) > 1:
        commands.append(["compare", *s, ids[0], ids[1]])
    for argv in commands:
        code = main(argv)
        assert code == 0, (argv, capsys.readouterr().err)
    assert main(["diagnose", *s, "--json"]) in (0, EXIT_CASE_FAILED)
    capsys.readouterr()


@FIXTURE_CHECKS
@given(data=st.data(), count=st.integers(min_value=0, max_value=3),
       existing=st.booleans())
@pytest.mark.slow
def test_merge_of_a_generated_export(base, capsys, data, count, existing) -> None:
    export = _mutate(base["export"], data.draw, count)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = work / "export.json"
        source.write_text(_json_text(export))
        target = work / "store" / "all.sqlite"
        if existing:
            target.parent.mkdir()
            shutil.copyfile(base["store"], target)
        before = _digest(target)
        code = main(["merge", str(source), "--into", str(target)])
        if code == 0:
            capsys.readouterr()
            _readable(target, work, capsys)
        else:
            _refused(code, capsys, (EXIT_STORE,))
            assert _digest(target) == before


def _rules_text(data_draw: Any, count: int) -> str:
    rules = _mutate(yaml.safe_load(RULES), data_draw, count)
    text = yaml.safe_dump(rules) if count else RULES
    for n in {int(t.split("_")[0]) for t in text.split("__DEEP_")[1:]}:
        text = text.replace(f"__DEEP_{n}__", "[" * n + "]" * n)
    cut = data_draw(st.integers(min_value=0, max_value=len(text)) | st.none())
    return text if cut is None else text[:cut]


@pytest.mark.slow
@FIXTURE_CHECKS
@given(data=st.data(), count=st.integers(min_value=0, max_value=3))
def test_diagnose_with_a_generated_rules_file(base, capsys, data, count) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.yaml"
        rules.write_text(_rules_text(data.draw, count))
        before = _digest(base["fleet"])
        code = main(["diagnose", "--store", str(base["fleet"]), "--rules", str(rules),
                     "--allow-unmatched", "--json"])
        if code in (0, EXIT_CASE_FAILED):
            json.loads(capsys.readouterr().out)
        else:
            _refused(code, capsys, (EXIT_USAGE,))
        assert _digest(base["fleet"]) == before


@pytest.mark.slow
@FIXTURE_CHECKS
@given(data=st.data(), count=st.integers(min_value=0, max_value=3))
def test_diagnose_with_a_generated_baseline_file(base, capsys, data, count) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "baseline.json"
        path.write_text(_json_text(_mutate(base["baseline"], data.draw, count)))
        before = _digest(base["fleet"])
        code = main(["diagnose", "--store", str(base["fleet"]), "--baseline", str(path),
                     "--json"])
        if code in (0, EXIT_CASE_FAILED):
            json.loads(capsys.readouterr().out)
        else:
            _refused(code, capsys, (EXIT_USAGE,))
        assert _digest(base["fleet"]) == before
