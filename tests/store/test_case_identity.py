"""Stored records stay comparable: the case key of every record in the corpora of older
formats is the one it was stored with, and the same command planned now plans the key an
older run stored with threads=N: by default on a machine whose affinity set has N + 1 CPUs
(one is left to the harness), and with `--threads N` on any machine, whatever the host's
load (which the older default followed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.cli.main import build_parser
from accelbench.cli.request_options import request_of as build_request
from accelbench.core.case import Case, case_key, identity_params
from accelbench.env import host
from accelbench.env.fingerprint import Fingerprint
from accelbench.env.host import HostReport
from accelbench.runner import capacity
from accelbench.runner.capacity import GIB, NodeResources
from accelbench.runner.plan import validate
from accelbench.runner.session import Supervised
from accelbench.store import Store

FIXTURES = Path(__file__).parent.parent / "fixtures"
EXPORTS = [FIXTURES / "store" / "results-v1.json", FIXTURES / "analysis" / "generations-v1.json",
           FIXTURES / "store" / "results-threads-v2.json"]
STORES = [FIXTURES / "store" / "results-schema1.db",
          FIXTURES / "analysis" / "generations-schema1.db"]
# CPU runs of accelbench 0.1.0 on a 2-CPU host, when the default was the free cores.
THREADS = FIXTURES / "store" / "results-threads-v2.json"


def _runs(path: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text())["runs"]
    return runs


def _cases() -> list[dict[str, Any]]:
    return [m["case"] for path in EXPORTS for run in _runs(path) for m in run["measurements"]]


def _key_now(case: dict[str, Any]) -> str:
    """The key a stored case has now: the one it was stored with, unless it holds a
    parameter that did not apply to it (memory copy's `pinned`), which is no part of its
    identity now."""
    dropped = set(case["params"]) - set(identity_params(case["benchmark"], case["params"]))
    if not dropped:
        return str(case["key"])
    return case_key(case["benchmark"],
                    [(k, v) for k, v in case["params"].items() if k not in dropped])


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["key"])
def test_every_corpus_record_keeps_the_key_it_was_stored_with(case: dict[str, Any]) -> None:
    assert Case.from_dict(case).key == _key_now(case)


def test_the_corpus_holds_cases_whose_key_drops_what_did_not_apply() -> None:
    """The corpus has cases stored with a parameter that did not apply (memory copies with
    `pinned`): those read as the case a run plans now."""
    changed = [c for c in _cases() if _key_now(c) != c["key"]]
    assert changed and {c["benchmark"] for c in changed} == {"memory"}
    planned = REGISTRY.get("memory").case(
        REGISTRY.get("memory").resolve({"op": "copy", "size_mib": 256}), "cuda:0")
    assert {Case.from_dict(c).key for c in changed} == {planned.key}


@pytest.mark.parametrize("path", STORES, ids=lambda p: p.name)
def test_every_stored_case_keeps_its_key(path: Path, tmp_path: Path) -> None:
    """Opened, an old store's keys are rekeyed where a parameter did not apply (migration
    007_case_identity), its queries by key find them, and nothing else changes."""
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    exported = {_key_now(m["case"]) for p in EXPORTS for r in _runs(p) for m in r["measurements"]}
    with Store.open(copy) as store:
        keys = [m.case.key for r in store.list_runs() for m in store.load_run(r.id).measurements]
        assert keys and set(keys) <= exported
        for key in set(keys):
            assert {m.case.key for _, m in store.measurements_for_case(key)} == {key}


def _replan(run: dict[str, Any], extra: list[str] | None = None) -> list[str]:
    """The case keys the run's own command (with `extra` arguments) plans now."""
    args = build_parser().parse_args([*run["run"]["argv"], *(extra or [])])
    valid = validate(build_request(args), REGISTRY)
    _, cases = Supervised(valid).plan(Fingerprint.from_dict(run["fingerprint"]))
    return [c.case.key for c in cases]


def _on(monkeypatch: pytest.MonkeyPatch, cpus: int, busy: bool) -> None:
    """A host whose affinity set has `cpus` CPUs (of 64), idle or with every core busy."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    monkeypatch.setattr(capacity, "node_resources", lambda: NodeResources(cpus, 64 * GIB))
    if busy:
        report = HostReport(cpus=cpus, others_busy_cores=float(cpus), contended=True)
        monkeypatch.setattr(host, "snapshot_quiet", lambda *a, **k: (False, report))


def _stored_keys(run: dict[str, Any]) -> list[str]:
    return [m["case"]["key"] for m in run["measurements"]]


def _threads_of(run: dict[str, Any]) -> int:
    (threads,) = {m["case"]["params"]["threads"] for m in run["measurements"]}
    assert isinstance(threads, int)
    return threads


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_a_default_plan_on_n_plus_one_cpus_has_the_key_of_an_old_idle_run_with_threads_n(
        busy: bool) -> None:
    # The default leaves one CPU to the harness: what an old idle run measured on N CPUs
    # is what a default run now measures on N + 1, and `--threads N` on any machine.
    idle, lowered, _, distributed = _runs(THREADS)
    assert "--threads" not in idle["run"]["argv"] and _threads_of(idle) == 2
    assert _threads_of(lowered) == 1 and _threads_of(distributed) == 1  # 2 CPUs, 2 ranks
    with pytest.MonkeyPatch.context() as mp:
        _on(mp, 3, busy)
        assert _replan(idle) == _stored_keys(idle)
        assert _replan(idle, ["--threads", "2"]) == _stored_keys(idle)
        _on(mp, 2, busy)
        assert _replan(idle) != _stored_keys(idle)
        assert _replan(idle, ["--threads", "2"]) == _stored_keys(idle)
        # The old run a busy host lowered to one thread is a default run on two CPUs now,
        # and so is the old distributed run (one thread for each of its 2 ranks).
        assert _replan(lowered) == _stored_keys(lowered)
        assert _replan(distributed) == _stored_keys(distributed)


@pytest.mark.parametrize("cpus", [1, 2, 16])
def test_an_explicit_threads_run_plans_the_key_it_stored_on_any_machine(cpus: int) -> None:
    chosen = _runs(THREADS)[2]
    assert chosen["run"]["argv"][-2:] == ["--threads", "1"]
    with pytest.MonkeyPatch.context() as mp:
        _on(mp, cpus, busy=True)
        assert _replan(chosen) == _stored_keys(chosen)
