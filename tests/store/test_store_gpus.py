"""The GPUs of each run (migration 010_run_gpus, store.gpus) on both back-ends: written with
the run from its fingerprint, read back by GPU whichever node it was in, given to runs
stored before the table was, carried by a merge, and read as untrusted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from store_data import RUN_ARGS, sample_measurements

from accelbench.store import Store, ddl, gpus
from accelbench.store.export import export_json, load_json
from postgres import sql

SERIAL = "1654923001005"
DAY = 86400.0


def _fingerprint(host: str, serials: list[str | None]) -> dict[str, Any]:
    return {**RUN_ARGS["fingerprint"], "host": {"hostname": host},
            "gpus": [{"index": i, "key": s, "uuid": f"GPU-{i}-{host}" if s is None else
                      f"GPU-{s}", "serial": s, "bus_id": f"0000:{24 + i:02x}:00.0",
                      "product": "NVIDIA H100 80GB HBM3", "matched_by": "pci"}
                     for i, s in enumerate(serials)]}


def _run(store: Store, host: str, serials: list[str | None], started_at: float) -> str:
    run_id = store.begin_run(**{**RUN_ARGS, "host": host, "fingerprint_id": f"fp-{host}",
                                "fingerprint": _fingerprint(host, serials),
                                "started_at": started_at})
    for m in sample_measurements():
        store.add_measurement(run_id, m)
    store.finish_run(run_id, "complete", finished_at=started_at + 60)
    return run_id


def test_a_gpu_that_moved_to_another_node_keeps_one_key(store_location: str) -> None:
    with Store.open(store_location) as store:
        first = _run(store, "node-a", [SERIAL, "OTHER-1"], 1.75e9)
        second = _run(store, "node-a", [SERIAL, "OTHER-1"], 1.75e9 + DAY)
        moved = _run(store, "node-b", ["OTHER-2", SERIAL], 1.75e9 + 9 * DAY)
    with Store.open(store_location, create=False) as store:
        found = {g.key: g for g in store.gpus()}
        rows = store.run_gpus([moved])
        measured = store.gpu_measurements(SERIAL)
    assert set(found) == {SERIAL, "OTHER-1", "OTHER-2"}
    gpu = found[SERIAL]
    assert [(s.host, s.first_seen, s.last_seen, s.runs) for s in gpu.stays] == [
        ("node-a", 1.75e9, 1.75e9 + DAY, 2), ("node-b", 1.75e9 + 9 * DAY, 1.75e9 + 9 * DAY, 1)]
    assert gpu.host == "node-b" and gpu.serial == SERIAL and gpu.uuid == f"GPU-{SERIAL}"
    assert [(r.device_index, r.key, r.host, r.bus_id) for r in rows] == [
        (0, "OTHER-2", "node-b", "0000:18:00.0"), (1, SERIAL, "node-b", "0000:19:00.0")]
    assert sorted({record.id for record, _ in measured}) == sorted([first, second, moved])
    assert sql(store_location, "SELECT count(*) FROM run_gpus") == [(6,)]


def test_a_run_that_read_only_the_uuid_is_the_same_gpu(store_location: str) -> None:
    """Without the vendor library a run records PyTorch's UUID alone, and keys the GPU by
    it: it is the GPU other runs recorded with that UUID and a serial."""
    with Store.open(store_location) as store:
        _run(store, "node-a", [SERIAL], 1.75e9)
        fingerprint = _fingerprint("node-b", [None])
        fingerprint["gpus"][0].update(key=f"GPU-{SERIAL}", uuid=f"gpu-{SERIAL}")
        bare = store.begin_run(**{**RUN_ARGS, "host": "node-b", "fingerprint_id": "fp-b",
                                  "fingerprint": fingerprint, "started_at": 1.75e9 + DAY})
        store.add_measurement(bare, sample_measurements()[0])
    with Store.open(store_location, create=False) as store:
        (gpu,) = store.gpus()
        assert gpu.key == SERIAL and gpu.serial == SERIAL
        assert [s.host for s in gpu.stays] == ["node-a", "node-b"]
        assert [(r.run_id, r.key) for r in store.run_gpus([bare])] == [(bare, SERIAL)]
        assert bare in {record.id for record, _ in store.gpu_measurements(SERIAL)}


def test_migration_010_gives_runs_stored_before_it_their_gpus(store_location: str,
                                                              monkeypatch) -> None:
    with monkeypatch.context() as older:
        older.setattr(ddl, "MIGRATIONS", ddl.MIGRATIONS[:-1])
        older.setattr(ddl, "POSTGRES_MIGRATIONS", ddl.POSTGRES_MIGRATIONS[:-1])
        older.setattr(ddl, "TABLES", ddl.TABLES - {"run_gpus"})
        older.setattr(gpus, "rows_of", lambda *args: [])  # as accelbench wrote before
        with Store.open(store_location) as store:
            run_id = _run(store, "node-a", [SERIAL, None], 1.75e9)
            plain = store.begin_run(**{**RUN_ARGS, "started_at": 1.75e9 + 1})
        assert "run_gpus" not in [r[0] for r in sql(
            store_location, "SELECT name FROM migrations")]
    assert ddl.MIGRATIONS[-1][0] == "010_run_gpus"
    with Store.open(store_location, create=False) as store:
        rows = store.run_gpus()
    assert [(r.run_id, r.device_index, r.key, r.serial) for r in rows] == [
        (run_id, 0, SERIAL, SERIAL), (run_id, 1, "GPU-1-node-a", None)]
    assert plain not in {r.run_id for r in rows}


def test_merging_and_importing_a_run_bring_its_gpus(store_location: str, tmp_path) -> None:
    source = tmp_path / "source.sqlite"
    with Store.open(source) as store:
        run_id = _run(store, "node-a", [SERIAL], 1.75e9)
        stored = store.load_run(run_id)
    with Store.open(store_location) as store:
        assert store.import_runs([stored]) == [True]
        assert [(g.key, g.host) for g in store.gpus()] == [(SERIAL, "node-a")]
    exported = json.loads(json.dumps(export_json([stored])))
    with Store.open(tmp_path / "other.sqlite") as other:
        other.import_runs(load_json(exported))
        assert [(r.run_id, r.key) for r in other.run_gpus()] == [(run_id, SERIAL)]


@pytest.mark.parametrize("listed", [
    "not a list", [1, "x", None], [{"index": -1, "key": "K"}], [{"index": True, "key": "K"}],
    [{"index": 0}], [{"index": 0, "key": 12}], [{"index": 10**9, "key": "K"}],
])
def test_gpus_that_are_not_as_written_are_left_out(listed: object) -> None:
    assert gpus.rows_of("r", "h", {"gpus": listed}) == []


def test_stored_gpu_text_is_clipped_and_printable() -> None:
    listed = [{"index": 0, "key": "K" * 5000, "serial": "S\x1b[31m1\n", "product": 7},
              {"index": 0, "key": "again"},  # the same index twice: the first kept
              {"index": 1, "serial": "only-serial"}, {"index": 2, "uuid": "only-uuid"}]
    rows = gpus.rows_of("r", "h", {"gpus": listed})
    assert [(r[1], r[2][:3], len(r[2])) for r in rows] == [
        (0, "KKK", gpus.MAX_TEXT), (1, "onl", 11), (2, "onl", 9)]
    assert rows[0][4] == "S [31m1" and rows[0][7] is None
