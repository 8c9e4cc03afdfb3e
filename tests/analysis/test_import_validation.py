"""What `merge` imports is checked against the record format before anything is written;
stored run ids never make `report` write outside its reports folder."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from analysis_data import FLEET_STACK, add_run, node_measurements

from accelbench.cli.main import main
from accelbench.errors import EXIT_STORE, StoreError, UserError
from accelbench.report.files import default_report_path
from accelbench.store import Store, export_json, load_json
from accelbench.store.record_schema import SCHEMA, validate_export

CORPUS = Path(__file__).parent.parent / "fixtures"


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "node.sqlite"
    with Store.open(path) as store:
        add_run(store, host="node01", stack=FLEET_STACK, started_at=1.75e9,
                measurements=node_measurements("node01", np.random.default_rng(1)))
    return path


@pytest.fixture
def export(source: Path) -> dict[str, Any]:
    with Store.open(source, create=False) as store:
        data: dict[str, Any] = json.loads(json.dumps(export_json([store.load_run("latest")])))
    return data


def test_the_schema_is_draft_2020_12_and_accepts_what_accelbench_writes(export) -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validate_export(export, "node.json")
    for corpus in (CORPUS / "store" / "results-v1.json",
                   CORPUS / "analysis" / "generations-v1.json"):
        data = json.loads(corpus.read_text())
        validate_export(data, corpus.name)  # format 1 records, as they were written
        validate_export(json.loads(json.dumps(export_json(load_json(data)))), corpus.name)


def test_telemetry_of_a_shared_package_round_trips_through_an_export(export) -> None:
    from accelbench.core.telemetry import POWER_AVG_S, POWER_W, Series

    series = Series(0.05, (0.0, 0.05), {POWER_W: (410.0, 415.0), POWER_AVG_S: (1.0, 1.0)},
                    shared_by={POWER_W: ("0000:c1:00.0", "0000:c2:00.0")})
    export["runs"][0]["measurements"][0]["telemetry"] = [series.to_dict()]
    validate_export(export, "node.json")
    (back,) = load_json(export)[0].measurements[0].telemetry
    assert Series.from_dict(back).shared_by == series.shared_by


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["runs"][0]["measurements"].__setitem__(3, [1, 2]),
         "node.json: runs[0].measurements[3]: a list of 2 item(s) is not of type 'object'"),
        (lambda d: d["runs"][0]["measurements"][0]["timings"][0].__setitem__("samples", "abc"),
         "runs[0].measurements[0].timings[0].samples: 'abc' is not of type 'array'"),
        (lambda d: d["runs"][0]["measurements"][0]["timings"][0]["samples"].__setitem__(1, "abc"),
         "runs[0].measurements[0].timings[0].samples[1]: 'abc' is not of type 'number'"),
        (lambda d: d["runs"][0]["run"].__setitem__("started_at", "yesterday"),
         "runs[0].run.started_at: 'yesterday' is not of type 'number'"),
        (lambda d: d["runs"][0]["run"].__setitem__("started_at", float("nan")),
         "runs[0].run.started_at: nan is not a finite number"),
        (lambda d: d["runs"][0]["run"].__setitem__("status", "x" * 1000),
         "runs[0].run.status: '" + "x" * 60 + "...' is not one of 'running'"),
        (lambda d: d["runs"][0]["measurements"][1].__setitem__("confidence", 5),
         "runs[0].measurements[1].confidence: 5 is out of range"),
        (lambda d: d["runs"][0]["measurements"][1]["case"].pop("params"),
         "runs[0].measurements[1].case: missing field 'params'"),
        (lambda d: d["runs"][0]["run"].__setitem__("id", "../../x"),
         "runs[0].run.id: '../../x' is not of the form"),
        (lambda d: d["runs"][0]["run"].__setitem__("id", "/abs/path"),
         "runs[0].run.id: '/abs/path' is not of the form"),
        (lambda d: d["runs"][0]["run"].__setitem__("id", "a..b"),
         "runs[0].run.id: 'a..b' is not of the form"),
        (lambda d: d["runs"][0]["measurements"][0]["measured"].append(
            {"name": "x", "value": float("nan"), "unit": "s"}),
         "runs[0].measurements[0].measured[2].value: nan is not a finite number"),
        (lambda d: d["runs"][0]["measurements"][0]["case"]["params"].__setitem__(
            "threads", float("inf")),
         "runs[0].measurements[0].case.params.threads: inf is not a finite number"),
    ],
)
def test_a_bad_export_is_refused_with_the_path_of_the_value(export, mutate, message) -> None:
    mutate(export)
    with pytest.raises(StoreError) as info:
        load_json(export, "node.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_merge_of_a_bad_export_writes_nothing(export, tmp_path, capsys) -> None:
    bad = copy.deepcopy(export)
    bad["runs"][0]["measurements"][2]["timings"][0]["samples"] = ["1", "2"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    target = tmp_path / "all.sqlite"
    assert main(["merge", str(path), "--into", str(target)]) == EXIT_STORE
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"accelbench: error: {path}: runs[0].measurements[2].timings[0].samples[0]:"
                   " '1' is not of type 'number'"]
    assert not target.exists()


def _hostile(source: Path, tmp_path: Path, sql: str, *params: object) -> Path:
    path = tmp_path / "hostile.sqlite"
    shutil.copyfile(source, path)
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)
    return path


@pytest.mark.parametrize(
    ("sql", "params", "message"),
    [
        ("UPDATE runs SET started_at = 'yesterday'", (), "'yesterday' is not of type 'number'"),
        ("UPDATE runs SET id = '../../x'", (), "'../../x' is not of the form"),
        ("UPDATE runs SET finished_at = 'later'", (), "runs[0].run.finished_at: 'later' is not"),
        ("UPDATE runs SET argv = '[1, 2]'", (), "runs[0].run.argv[0]: 1 is not of type"),
        ("UPDATE measurements SET record = json_set(record, '$.hosts', json('[[1]]'))", (),
         "cannot read measurement"),
        ("UPDATE measurements SET record = json_set(record, '$.hosts', json('[{\"reasons\": 7}]'))",
         (), "hosts[0].reasons: 7 is not of type 'array'"),
        ("UPDATE measurements SET record = json_set(record, '$.status', 'exploded')", (),
         "'exploded' is not one of 'ok'"),
        ("UPDATE measurements SET record = json_set(record, '$.confidence', 1e300)", (),
         "out of range"),
        ("UPDATE measurements SET record = json_set(record, '$.timings[0].samples',"
         " json('[\"nan\"]'))", (), "nan is not a finite number"),
        ("UPDATE measurements SET record = ?", ("[" * 5000 + "]" * 5000,), "cannot read"),
        ("UPDATE fingerprints SET data = '[1]'", (), "is not of type 'object'"),
    ],
)
def test_merge_refuses_a_hostile_store_and_writes_nothing(
        source, tmp_path, capsys, sql, params, message) -> None:
    hostile = _hostile(source, tmp_path, sql, *params)
    target = tmp_path / "all.sqlite"
    with Store.open(target) as store:  # an existing store, with one run already
        add_run(store, host="node02", stack=FLEET_STACK, started_at=1.76e9,
                measurements=node_measurements("node02", np.random.default_rng(2))[:2])
    before = _digest(target)
    code = main(["merge", str(hostile), "--into", str(target)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_STORE and len(err) == 1 and message in err[0], err
    assert _digest(target) == before


def test_a_report_never_leaves_the_reports_folder(source, tmp_path, capsys) -> None:
    store_dir = tmp_path / "fleet"
    store_dir.mkdir()
    for run_id in ("../../escaped", "/abs/path", "..", "a/../../b"):
        path = store_dir / "results.sqlite"
        shutil.copyfile(source, path)
        with sqlite3.connect(path) as conn:  # written directly, as a hostile merge might
            conn.execute("UPDATE runs SET id = ?", (run_id,))
        assert main(["report", "--store", str(path)]) == 0
        out = capsys.readouterr().out
        written = Path(out.split("Report: ")[1].strip())
        assert written.resolve().parent == (store_dir / "reports").resolve()
        assert written.exists()
    reports = store_dir / "reports"
    assert sorted(p.name for p in reports.iterdir()) == [
        "_.._escaped.html", "_abs_path.html", "a_.._.._b.html", "report.html"]
    assert [p for p in tmp_path.rglob("*.html") if p.parent != reports] == []
    assert default_report_path(store_dir, "20250523-113320-564c").name == (
        "20250523-113320-564c.html")


def test_a_report_path_through_a_link_out_of_the_folder_is_refused(tmp_path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "run1.html").symlink_to(tmp_path / "elsewhere.html")
    with pytest.raises(UserError, match="would not be in"):
        default_report_path(tmp_path, "run1")


def _merge_export(data: dict[str, Any], tmp_path: Path, name: str = "in.json") -> tuple[int, Path]:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    target = tmp_path / "all.sqlite"
    return main(["merge", str(path), "--into", str(target)]), target


def test_a_run_id_ending_in_a_line_break_is_refused(export, tmp_path, capsys) -> None:
    """JSON Schema's "$" also matches before a final line break: checked again."""
    export["runs"][0]["run"]["id"] = "20261201-000000-abcd\n"
    code, target = _merge_export(export, tmp_path)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_STORE and len(err) == 1 and "run.id" in err[0], err
    assert not target.exists()


def test_a_fingerprint_no_command_could_show_is_refused(export, tmp_path, capsys) -> None:
    export["runs"][0]["fingerprint"]["device"]["memory_bytes"] = "lots"
    export["runs"][0]["run"]["fingerprint_id"] = "fp-lots"
    code, target = _merge_export(export, tmp_path)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_STORE and len(err) == 1 and "its fingerprint cannot be read" in err[0]
    assert not target.exists()


def test_a_fingerprint_id_bound_to_other_content_is_refused_and_nothing_merged(
        export, source, tmp_path, capsys) -> None:
    """Two sources: the first is new, the second reuses the stored fingerprint's id with
    other content. The merge is one transaction: neither is written."""
    target = tmp_path / "all.sqlite"
    assert main(["merge", str(source), "--into", str(target)]) == 0
    before = _digest(target)
    fresh = copy.deepcopy(export)
    fresh["runs"][0]["run"]["id"] = "20261201-000000-0001"
    fresh["runs"][0]["run"]["fingerprint_id"] = "fp-new"
    forged = copy.deepcopy(export)
    forged["runs"][0]["run"]["id"] = "20261201-000000-0002"
    forged["runs"][0]["fingerprint"]["host"]["hostname"] = "someone-else"
    paths = []
    for name, data in (("fresh.json", fresh), ("forged.json", forged)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["merge", *map(str, paths), "--into", str(target)]) == EXIT_STORE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "with other content" in err[0], err
    with Store.open(target, create=False) as store:
        assert len(store.list_runs()) == 1
    assert _digest(target) == before


def test_a_store_merged_from_elsewhere_is_never_upgraded_in_place(tmp_path) -> None:
    """An older store given to merge is read from an upgraded copy in memory."""
    older = tmp_path / "old.sqlite"
    shutil.copyfile(CORPUS / "analysis" / "generations-schema1.db", older)
    before = _digest(older)
    assert main(["merge", str(older), "--into", str(tmp_path / "all.sqlite")]) == 0
    assert _digest(older) == before
