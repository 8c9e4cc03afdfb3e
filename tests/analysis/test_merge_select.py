"""Merging node stores into one, and choosing runs and cases by what a person types."""

from __future__ import annotations

import json

import pytest
from analysis_data import FLEET_STACK, add_run, corpus_store, node_measurements

from accelbench.analysis.select import matching_records, parse_case_pattern
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.errors import EXIT_STORE, UserError
from accelbench.store import Store, export_json


def _node_store(path, host: str, seed: int) -> str:
    import numpy as np

    with Store.open(path) as store:
        return add_run(store, host=host, stack=FLEET_STACK, started_at=1.75e9 + seed,
                       measurements=node_measurements(host, np.random.default_rng(seed)))


def test_merge_node_stores_and_exports_idempotently(tmp_path, capsys) -> None:
    a, b, target = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "all.sqlite"
    id_a = _node_store(a, "node01", 1)
    id_b = _node_store(b, "node02", 2)
    export = tmp_path / "b.json"
    with Store.open(b, create=False) as store:
        export.write_text(json.dumps(export_json([store.load_run(id_b)])))
    assert main(["merge", str(a), str(export), "--into", str(target), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 2
    assert main(["merge", str(a), str(b), "--into", str(target)]) == 0
    assert "Merged 0 run(s)" in capsys.readouterr().out
    with Store.open(target, create=False) as merged, Store.open(a, create=False) as source:
        assert {r.id for r in merged.list_runs()} == {id_a, id_b}
        assert merged.load_run(id_a) == source.load_run(id_a)
        assert merged.list_runs()[0].n_ok == len(source.load_run(id_a).measurements)


def test_merge_refuses_what_is_not_results(tmp_path, capsys) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not results")
    target = tmp_path / "all.sqlite"
    assert main(["merge", str(notes), "--into", str(target)]) == EXIT_STORE
    assert "neither a result store nor a JSON export" in capsys.readouterr().err
    assert not target.exists()
    assert main(["merge", str(tmp_path / "absent.sqlite"), "--into", str(target)]) == EXIT_STORE
    capsys.readouterr()


def test_run_references(tmp_path) -> None:
    with Store.open(corpus_store(tmp_path), create=False) as store:
        records = store.list_runs()
    pick = lambda ref: [r.id for r in matching_records(records, ref)]  # noqa: E731
    assert pick("latest") == [records[0].id]
    assert pick(records[1].id[:10]) == [records[1].id]
    assert len(pick("*MI250X*")) == 2
    assert len(pick("AMD Instinct MI250X | ROCm 5.3 | PyTorch 1.12.1")) == 2
    assert len(pick("host=mi250x-01,status=complete")) == 2
    assert pick("host=nobody") == []
    with pytest.raises(UserError, match="ambiguous"):
        pick("2022")
    with pytest.raises(UserError, match="no run or stack matches"):
        pick("*TPU*")
    with pytest.raises(UserError, match="bad run filter"):
        pick("colour=red")


def test_case_patterns() -> None:
    case = Case.make("gemm", "v", "micro", {"shape": "4096", "dtype": "bf16", "batch": 1},
                     "cuda:0")
    pinned = Case.make("memory", "v", "micro", {"op": "h2d", "pinned": True}, "cuda:0")
    assert parse_case_pattern("gemm").matches(case)
    assert parse_case_pattern("gemm dtype=bf16 shape=4096").matches(case)
    assert parse_case_pattern("GEMM DTYPE=BF*").matches(case)
    assert parse_case_pattern("dtype=bf16").matches(case)
    assert not parse_case_pattern("gemm dtype=fp16").matches(case)
    assert not parse_case_pattern("gemm model=x").matches(case)
    assert parse_case_pattern("memory pinned=yes").matches(pinned)
    assert parse_case_pattern("memory pinned=true").matches(pinned)
    with pytest.raises(UserError):
        parse_case_pattern("  ")
