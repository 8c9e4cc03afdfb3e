"""Profiles in the store: written with their run, read back by run reference."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from accelbench.errors import UserError
from accelbench.store import Store

RUN_ARGS: dict[str, Any] = dict(fingerprint={"platform": "cpu"}, fingerprint_id="f" * 16,
                generation_key="CPU | PyTorch 2.14", device="cpu", suite="profile",
                argv=["profile", "gemm"], host="h", accelbench_version="0.1.0")


def test_a_profile_round_trips_with_its_run(store_path):
    analysis = {"format_version": 1, "basis": "cpu", "breakdown": {"total_s": 1.0}}
    with Store.open(store_path) as store:
        run_id = store.begin_run(**RUN_ARGS)
        other = store.begin_run(**RUN_ARGS)
        profile_id = store.add_profile(run_id, case_key="k" * 16, benchmark="gemm",
                                       label="gemm shape=64", trace_paths=["/t/a.pt.trace.json.gz"],
                                       analysis=analysis, created_at=5.0)
        (stored,) = store.profiles_for_run(run_id)
        assert store.profiles_for_run("latest") == []  # the later run has none
        assert store.profiles_for_run(other) == []
    assert stored.id == profile_id
    assert (stored.run_id, stored.benchmark, stored.label) == (run_id, "gemm", "gemm shape=64")
    assert stored.trace_paths == ("/t/a.pt.trace.json.gz",)
    assert stored.analysis == analysis and stored.created_at == 5.0


def test_the_profiles_table_comes_from_its_own_migration(store_path):
    with Store.open(store_path):
        pass
    conn = sqlite3.connect(store_path)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(profiles)")]
    finally:
        conn.close()
    assert names[:2] == ["001_initial", "002_profiles"]
    assert columns == ["id", "run_id", "case_key", "benchmark", "label", "trace_paths",
                       "analysis", "created_at"]


def test_profiles_of_an_unknown_run_are_a_user_error(store_path):
    with Store.open(store_path) as store, pytest.raises(UserError, match="no run"):
        store.profiles_for_run("nope")
