"""`diagnose` judges each node on its newest measurement of each case, whichever run it
came from, and names the run of every judged figure: a newer run of other cases (a
validate run after a quick run) does not hide what the quick run found."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from analysis_data import add_run, rated

from accelbench.analysis import baseline as baselines
from accelbench.analysis.diagnose import NodeResult, diagnose
from accelbench.analysis.rules import load_rules
from accelbench.analysis.select import select_runs
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.errors import EXIT_CASE_FAILED
from accelbench.store import Store, StoredRun
from fakes import check_measurement

STACK = "NVIDIA H200 | CUDA 12.6 | PyTorch 2.7.0"
UPGRADED = "NVIDIA H200 | CUDA 12.8 | PyTorch 2.8.0"
NODES = ("n1", "n2", "n3", "n4")
SLOW = "n4"
GEMM = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
COPY = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 256}, "cuda:0")
LAUNCH = Case.make("launch", "l1", "micro", {"mode": "eager"}, "cuda:0")
FLOP = 2 * 4096**3


def quick(speed: float, seed: int, cases: Sequence[Case] = (GEMM, COPY, LAUNCH)
          ) -> list[Measurement]:
    """The quick suite's cases, measured at `speed` times a healthy node's."""
    rng = np.random.default_rng(seed)
    made = {
        GEMM: lambda: rated(GEMM, FLOP / (600e12 * speed), FLOP, "FLOP/s", rng=rng),
        COPY: lambda: rated(COPY, 2**29 / (4e12 * speed), 2**29, "B/s", rng=rng,
                            name="bandwidth"),
        LAUNCH: lambda: rated(LAUNCH, 5e-6 / speed, 1.0, "call/s", rng=rng),
    }
    return [made[case]() for case in cases]


def validate(bf16: str = "ok") -> list[Measurement]:
    """The validate suite's checks: cases of their own, none of the quick suite's."""
    return [
        check_measurement("numerics", {"op": "matmul", "dtype": "fp32"}, error=1e-5,
                          tolerance=2e-4, device="cuda:0"),
        check_measurement("numerics", {"op": "matmul", "dtype": "bf16"}, bf16,
                          error=0.01 if bf16 == "ok" else 0.5, tolerance=0.2,
                          reason=None if bf16 == "ok" else "wrong result", device="cuda:0"),
    ]


def fleet(store: Store, *, validated: bool = True) -> dict[str, dict[str, str]]:
    """A quick run on each of 4 nodes, n4 at half speed, then (`validated`) a newer
    validate run on each, all checks passing. Returns node -> suite -> run id."""
    ids: dict[str, dict[str, str]] = {}
    for i, node in enumerate(NODES):
        speed = 0.5 if node == SLOW else 1.0 + 0.01 * i
        ids[node] = {"quick": add_run(store, host=node, stack=STACK, started_at=1.8e9 + i,
                                      measurements=quick(speed, seed=i))}
        if validated:
            ids[node]["validate"] = add_run(store, host=node, stack=STACK,
                                            started_at=1.8e9 + 3600 + i,
                                            measurements=validate())
    return ids


def stored(path: Path) -> list[StoredRun]:
    with Store.open(path) as store:
        return select_runs(store, [])


def by_node(nodes: Sequence[NodeResult]) -> dict[str, NodeResult]:
    return {n.node: n for n in nodes}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


@pytest.mark.parametrize("validated", [False, True])
def test_a_newer_run_of_other_cases_does_not_hide_a_slow_node(store_path, validated) -> None:
    with Store.open(store_path) as store:
        ids = fleet(store, validated=validated)
    result = diagnose(stored(store_path), load_rules())
    assert [n.node for n in result.failing] == [SLOW]
    slow = result.failing[0]
    assert {f.rule for f in slow.findings} == {"gemm-throughput", "memory-bandwidth"}
    assert all(f.run == ids[SLOW]["quick"] for f in slow.findings)
    assert all(f.observed == pytest.approx(0.5, rel=0.05) for f in slow.findings)
    suites = ("quick", "validate") if validated else ("quick",)
    for node in result.nodes:
        assert node.runs == tuple(ids[node.node][s] for s in suites)
        assert node.run_id == ids[node.node][suites[-1]]
    healthy = by_node(result.nodes)["n1"]
    # The 3 quick cases' status and ratio to the fleet, and the 2 checks' verdicts.
    assert healthy.checks == 3 + 3 + (2 if validated else 0)


def test_the_fleet_baseline_holds_each_nodes_older_cases(store_path) -> None:
    with Store.open(store_path) as store:
        ids = fleet(store)
    base = baselines.fleet_median(stored(store_path))
    labels = {c.label for c in base.cases.values()}
    assert {GEMM.label, COPY.label, LAUNCH.label} <= labels and len(labels) == 5
    gemm = base.cases[GEMM.key]
    assert gemm.nodes == 4
    assert gemm.figures["throughput"].value == pytest.approx(600e12 * 1.015, rel=0.01)
    assert base.runs == tuple(ids[n][s] for n in NODES for s in ("quick", "validate"))
    assert base.source == "fleet median of 4 nodes"


def test_the_newest_measurement_of_a_case_is_the_one_judged(store_path) -> None:
    with Store.open(store_path) as store:
        ids = fleet(store)
        # n4 is repaired and reruns GEMM alone; n1 slows down in a rerun of its memory.
        fixed = add_run(store, host=SLOW, stack=STACK, started_at=1.8e9 + 7200,
                        measurements=quick(1.0, seed=9, cases=(GEMM,)))
        slowed = add_run(store, host="n1", stack=STACK, started_at=1.8e9 + 7300,
                         measurements=quick(0.5, seed=10, cases=(COPY,)))
    nodes = by_node(diagnose(stored(store_path), load_rules()).nodes)
    assert [(f.rule, f.run) for f in nodes[SLOW].findings] == [
        ("memory-bandwidth", ids[SLOW]["quick"])]
    assert nodes[SLOW].runs == (ids[SLOW]["quick"], ids[SLOW]["validate"], fixed)
    assert nodes[SLOW].run_id == fixed
    assert [(f.rule, f.run) for f in nodes["n1"].findings] == [("memory-bandwidth", slowed)]
    assert not nodes["n2"].failed and not nodes["n3"].failed


def test_a_case_no_run_of_the_node_measured_is_missing(store_path) -> None:
    with Store.open(store_path) as store:
        for i, node in enumerate(NODES):
            cases = (GEMM, LAUNCH) if node == "n3" else (GEMM, COPY, LAUNCH)
            add_run(store, host=node, stack=STACK, started_at=1.8e9 + i,
                    measurements=quick(1.0, seed=i, cases=cases))
            add_run(store, host=node, stack=STACK, started_at=1.8e9 + 3600 + i,
                    measurements=validate())
    result = diagnose(stored(store_path), load_rules())
    assert [n.node for n in result.failing] == ["n3"]
    [missing] = result.failing[0].findings
    assert (missing.rule, missing.case, missing.detail, missing.run) == (
        "failed-case", COPY.label, "missing", None)
    assert missing.to_dict()["run"] is None


def test_checks_are_judged_on_their_newest_verdict(store_path) -> None:
    with Store.open(store_path) as store:
        ids = fleet(store)
        # n2 fails bf16 numerics, then passes it; n3 passes it, then fails it.
        add_run(store, host="n2", stack=STACK, started_at=1.8e9 + 5000,
                measurements=validate("failed"))
        add_run(store, host="n2", stack=STACK, started_at=1.8e9 + 6000,
                measurements=validate())
        broke = add_run(store, host="n3", stack=STACK, started_at=1.8e9 + 6000,
                        measurements=validate("failed"))
    nodes = by_node(diagnose(stored(store_path), load_rules()).nodes)
    assert not nodes["n2"].failed
    [check] = nodes["n3"].findings
    assert (check.rule, check.detail, check.run) == ("validation numerics", "wrong result",
                                                     broke)
    assert nodes["n3"].runs == (ids["n3"]["quick"], broke)


def test_runs_on_another_stack_than_the_nodes_newest_are_not_judged(store_path) -> None:
    with Store.open(store_path) as store:
        ids = fleet(store, validated=False)
        upgraded = add_run(store, host=SLOW, stack=UPGRADED, started_at=1.8e9 + 3600,
                           measurements=validate())
    result = diagnose(stored(store_path), load_rules())
    slow = by_node(result.nodes)[SLOW]
    assert (slow.generation_key, slow.runs, slow.failed) == (UPGRADED, (upgraded,), False)
    assert ids[SLOW]["quick"] not in {i for b in result.baselines for i in b.runs}
    assert "1 run(s) of 1 node(s) on a stack other than the node's newest run's are not " \
           "judged" in result.notes


def test_a_host_on_several_devices_keeps_its_node_names(store_path) -> None:
    with Store.open(store_path) as store:
        fleet(store)
        on_1 = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:1")
        rng = np.random.default_rng(5)
        add_run(store, host="n1", stack=STACK, started_at=1.8e9 + 9000, device="cuda:1",
                measurements=[rated(on_1, FLOP / 600e12, FLOP, "FLOP/s", rng=rng)])
    names = [n.node for n in diagnose(stored(store_path), load_rules()).nodes]
    assert names == ["n1/cuda:0", "n1/cuda:1", "n2", "n3", "n4"]


def test_the_command_names_the_slow_node_and_its_runs(tmp_path, capsys) -> None:
    """Each node wrote its own store; merged, a validate run newest on every node."""
    merged = tmp_path / "merged.sqlite"
    sources: list[str] = []
    ids: dict[str, tuple[str, str]] = {}
    for i, node in enumerate(NODES):
        path = tmp_path / f"{node}.sqlite"
        speed = 0.5 if node == SLOW else 1.0
        with Store.open(path) as own:
            ids[node] = (add_run(own, host=node, stack=STACK, started_at=1.8e9 + i,
                                 measurements=quick(speed, seed=i)),
                         add_run(own, host=node, stack=STACK, started_at=1.8e9 + 3600 + i,
                                 measurements=validate()))
        sources.append(str(path))
    assert main(["merge", *sources, "--into", str(merged)]) == 0
    capsys.readouterr()
    store = ["--store", str(merged)]
    assert main(["diagnose", *store]) == EXIT_CASE_FAILED
    out = capsys.readouterr().out
    assert "1 of 4 nodes fail: n4 (compute, memory)" in out
    assert ids[SLOW][0] in out and "Runs judged" in out
    assert main(["diagnose", *store, "--json"]) == EXIT_CASE_FAILED
    data = json.loads(capsys.readouterr().out)
    assert data["failing"] == [SLOW]
    nodes = {n["node"]: n for n in data["nodes"]}
    assert {f["run"] for f in nodes[SLOW]["findings"]} == {ids[SLOW][0]}
    assert all(n["runs"] == list(ids[name]) and n["run"] == ids[name][1]
               for name, n in nodes.items())
    out_file = tmp_path / "base.json"
    assert main(["baseline", *store, "-o", str(out_file), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["nodes"], summary["cases"]) == (4, 5)
    assert baselines.read_baseline(out_file).runs == tuple(i for n in NODES for i in ids[n])
    assert main(["diagnose", *store, "--baseline", str(out_file), "--json"]) == EXIT_CASE_FAILED
    assert json.loads(capsys.readouterr().out)["failing"] == [SLOW]
