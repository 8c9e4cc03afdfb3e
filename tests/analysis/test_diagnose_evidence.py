"""`diagnose` drains a node only on evidence it can trust: a figure measured on a busy host
or a throttled device makes a verdict inconclusive (exit 9 when nothing else fails), the
fleet median is taken from the trustworthy figures, and a case a node was never asked to
run is not missing on it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from analysis_data import add_run, in_processes, rated, with_telemetry

from accelbench.analysis.diagnose import Diagnosis, NodeResult, diagnose
from accelbench.analysis.rules import load_rules
from accelbench.analysis.select import select_runs
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE
from accelbench.store import Store, StoredRun

STACK = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
NODES = ("node0", "node1", "node2", "node3")
GEMM = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "fp32"}, "cuda:0")
COPY = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 256}, "cuda:0")
LAUNCH = Case.make("launch", "l1", "micro", {"mode": "eager"}, "cuda:0")
FLOP = 2 * 4096**3
BUSY = {"format_version": 1, "contended": True,
        "reasons": ["6 other processes busy: python (pid 4242, 31% CPU)",
                    "other work used 1.72 of 2 cores"]}


def gemm(speed: float, rng: np.random.Generator, *, busy: bool = False,
         process_noise: float = 0.01) -> Measurement:
    """GEMM at `speed` times a healthy node's, in three processes; `busy`: measured while
    other work kept the host busy (each process's host report says so)."""
    return in_processes(GEMM, FLOP / (100e12 * speed), FLOP, "FLOP/s", rng=rng,
                        process_noise=process_noise, hosts=(BUSY,) * 3 if busy else ())


def copy(rng: np.random.Generator, speed: float = 1.0) -> Measurement:
    return rated(COPY, 2**29 / (4e12 * speed), 2**29, "B/s", rng=rng, name="bandwidth")


def launch(rng: np.random.Generator) -> Measurement:
    return rated(LAUNCH, 5e-6, 1.0, "call/s", rng=rng)


def fleet(path: Path, gemms: dict[str, Measurement], rng: np.random.Generator) -> None:
    with Store.open(path) as store:
        for i, node in enumerate(NODES):
            add_run(store, host=node, stack=STACK, started_at=1.8e9 + i,
                    measurements=[gemms[node], copy(rng)])


def stored(path: Path) -> list[StoredRun]:
    with Store.open(path) as store:
        return select_runs(store, [])


def by_node(result: Diagnosis) -> dict[str, NodeResult]:
    return {n.node: n for n in result.nodes}


@pytest.fixture
def neighbours(tmp_path: Path) -> Path:
    """Four nodes: node3 really runs GEMM at half speed (its BLAS on a slow code path);
    node1 and node2 measured theirs on a busy host, node1's very noisy, both low."""
    rng = np.random.default_rng(11)
    path = tmp_path / "fleet.sqlite"
    fleet(path, {"node0": gemm(1.0, rng),
                 "node1": gemm(0.40, rng, busy=True, process_noise=0.4),
                 "node2": gemm(0.52, rng, busy=True),
                 "node3": gemm(0.50, rng)}, rng)
    return path


def test_a_slow_node_is_named_and_busy_neighbours_are_inconclusive(neighbours, tmp_path,
                                                                   capsys) -> None:
    """The median of the trustworthy figures (node0, node3) is the baseline: the busy
    nodes' low figures no longer drag it down to node3's, so node3 fails by half, and
    the busy nodes, which would fail against it, are inconclusive, never drained."""
    result = diagnose(stored(neighbours), load_rules())
    nodes = by_node(result)
    assert [n.node for n in result.failing] == ["node3"]
    [slow] = nodes["node3"].findings
    assert slow.rule == "gemm-throughput" and slow.observed == pytest.approx(2 / 3, rel=0.05)
    assert [n.node for n in result.inconclusive] == ["node1", "node2"]
    for name in ("node1", "node2"):
        node = nodes[name]
        assert not node.failed and node.verdict == "inconclusive"
        [unsure] = node.inconclusive
        assert unsure.rule == "gemm-throughput" and "busy host" in unsure.detail
    base = result.baselines[0].cases[GEMM.key]
    assert set(base.outliers) >= {"node1", "node2"}  # left out of the median, and named

    drain = tmp_path / "drain.txt"
    code = main(["diagnose", "--store", str(neighbours), "--drain-list", str(drain)])
    assert code == EXIT_CASE_FAILED
    assert drain.read_text() == "node3 Reason=accelbench:ACCEL_BELOW_BASELINE\n"
    out = capsys.readouterr().out
    assert "1 of 4 nodes fail: node3 (compute)" in out
    assert "2 inconclusive: node1 (compute), node2 (compute)" in out


@pytest.fixture
def one_busy(tmp_path: Path) -> Path:
    """Four healthy nodes; node1 measured GEMM on a busy host, at 60% of the others."""
    rng = np.random.default_rng(5)
    path = tmp_path / "busy.sqlite"
    fleet(path, {n: gemm(0.6 if n == "node1" else 1.0, rng, busy=n == "node1")
                 for n in NODES}, rng)
    return path


def test_a_contended_figure_is_inconclusive_and_exits_9(one_busy, tmp_path, capsys) -> None:
    drain = tmp_path / "drain.txt"
    code = main(["diagnose", "--store", str(one_busy), "--json", "--drain-list", str(drain)])
    assert code == EXIT_INCONCLUSIVE
    assert drain.read_text() == ""
    data = json.loads(capsys.readouterr().out)
    assert data["failing"] == [] and data["inconclusive"] == ["node1"]
    node1 = next(n for n in data["nodes"] if n["node"] == "node1")
    assert (node1["verdict"], node1["failed"], node1["findings"]) == ("inconclusive", False, [])
    [unsure] = node1["inconclusive"]
    assert unsure["rule"] == "gemm-throughput" and unsure["observed"] < 0.9
    assert unsure["detail"].startswith("measured on a busy host: 6 other processes busy")
    assert all(n["verdict"] == "pass" for n in data["nodes"] if n["node"] != "node1")

    assert main(["diagnose", "--store", str(one_busy)]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "no node fails; 1 inconclusive: node1 (compute)" in out
    assert "measured on a busy host" in out


def test_exclude_contended_leaves_busy_figures_out(one_busy, capsys) -> None:
    code = main(["diagnose", "--store", str(one_busy), "--json", "--exclude-contended"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["failing"] == [] and data["inconclusive"] == []
    node1 = next(n for n in data["nodes"] if n["node"] == "node1")
    # Its memory figure and its GEMM's status are judged; its busy GEMM figure is not.
    assert node1["verdict"] == "pass" and node1["checks"] == 3
    assert any("1 figure(s) measured on a busy host are left out" in note
               for note in data["notes"])


def test_a_throttled_figure_is_inconclusive(tmp_path, capsys) -> None:
    rng = np.random.default_rng(3)
    path = tmp_path / "throttled.sqlite"
    fleet(path, {n: with_telemetry(GEMM, FLOP / (100e12 * (0.7 if n == "node2" else 1.0)),
                                   FLOP, "FLOP/s", rng=rng, power_w=600.0,
                                   throttle=n == "node2")
                 for n in NODES}, rng)
    result = diagnose(stored(path), load_rules())
    assert result.failing == [] and [n.node for n in result.inconclusive] == ["node2"]
    [unsure] = by_node(result)["node2"].inconclusive
    assert unsure.detail.startswith("measured while the device throttled")
    assert main(["diagnose", "--store", str(path), "--exclude-throttled"]) == 0
    capsys.readouterr()


def test_a_busy_figure_that_passes_is_a_pass(tmp_path) -> None:
    """Contention slows a figure: one that meets its rule all the same is judged."""
    rng = np.random.default_rng(8)
    path = tmp_path / "fine.sqlite"
    fleet(path, {n: gemm(1.0, rng, busy=n == "node1") for n in NODES}, rng)
    result = diagnose(stored(path), load_rules())
    assert result.failing == [] and result.inconclusive == []


def test_a_median_of_busy_figures_only_makes_a_failure_inconclusive(tmp_path) -> None:
    """Where too few nodes measured a case quietly, the median of all is the baseline,
    and a failure against it cannot be trusted either: the quiet node3 that falls short
    of a median of busy figures is inconclusive, and a note says why."""
    rng = np.random.default_rng(2)
    path = tmp_path / "all-busy.sqlite"
    fleet(path, {n: gemm(0.5 if n == "node3" else 1.0, rng, busy=n != "node3")
                 for n in NODES}, rng)
    result = diagnose(stored(path), load_rules())
    assert result.failing == [] and [n.node for n in result.inconclusive] == ["node3"]
    [unsure] = by_node(result)["node3"].inconclusive
    assert "fleet median" in unsure.detail and "busy host" in unsure.detail
    assert any("busy host or a throttled device" in note for note in result.notes)


# -- a case a node was never asked to run -------------------------------------------------


def request(suite: str = "quick", **fields: Any) -> dict[str, Any]:
    return RunRequest(suite=suite, **fields).to_dict()


EXTRA = [Case.make("gemm", "g1", "micro", {"shape": str(s), "dtype": d}, "cuda:0")
         for s in (1024, 2048, 8192) for d in ("fp16", "bf16")]


def mixed_fleet(path: Path, *, lost: str | None = None) -> None:
    """Five nodes ran the quick suite; n5 also ran the standard suite's extra GEMM
    shapes, and (`lost`) so did that node, whose standard run lost its last case."""
    rng = np.random.default_rng(4)
    with Store.open(path) as store:
        for i in range(1, 6):
            node = f"n{i}"
            add_run(store, host=node, stack=STACK, started_at=1.8e9 + i, request=request(),
                    measurements=[gemm(1.0, rng), copy(rng), launch(rng)])
            if node in ("n5", lost):
                cases: Sequence[Case] = EXTRA[:-1] if node == lost else EXTRA
                add_run(store, host=node, stack=STACK, started_at=1.8e9 + 3600 + i,
                        request=request("standard"),
                        measurements=[rated(c, FLOP / 100e12, FLOP, "FLOP/s", rng=rng)
                                      for c in cases])


def test_one_nodes_extra_cases_fail_no_other_node(tmp_path, capsys) -> None:
    path = tmp_path / "mixed.sqlite"
    mixed_fleet(path)
    result = diagnose(stored(path), load_rules())
    assert result.failing == [] and result.inconclusive == []
    assert any("not asked to run" in note for note in result.notes)
    assert any("6 case(s) on " in note and "fewer than 3 nodes" in note
               for note in result.notes)  # n5's extra cases, judged against itself
    assert main(["diagnose", "--store", str(path)]) == 0
    assert "all 5 nodes pass" in capsys.readouterr().out


def test_a_case_missing_from_a_run_that_asked_for_it_still_fails(tmp_path) -> None:
    path = tmp_path / "lost.sqlite"
    mixed_fleet(path, lost="n2")
    result = diagnose(stored(path), load_rules())
    assert [n.node for n in result.failing] == ["n2"]
    [missing] = result.failing[0].findings
    assert (missing.rule, missing.case, missing.detail) == ("failed-case", EXTRA[-1].label,
                                                            "missing")


def test_the_fleet_page_of_a_mixed_store_is_not_red(tmp_path) -> None:
    from accelbench.core.view import BAD, WARN
    from accelbench.report.site.pages import fleet_page

    path = tmp_path / "mixed.sqlite"
    mixed_fleet(path)
    page = fleet_page(stored(path))
    rows = [row for block in page.blocks for grid in block.tables for row in grid.rows]
    rows += [row for block in page.blocks for plot in block.plots for row in plot.table.rows]
    assert rows and not any(row.style == BAD for row in rows)

    # A busy node's inconclusive verdict is shown as such, not as a failure.
    rng = np.random.default_rng(5)
    busy = tmp_path / "busy.sqlite"
    fleet(busy, {n: gemm(0.6 if n == "node1" else 1.0, rng, busy=n == "node1")
                 for n in NODES}, rng)
    page = fleet_page(stored(busy))
    nodes = {row.key: row for block in page.blocks for grid in block.tables
             for row in grid.rows if row.key.startswith("node:")}
    assert nodes["node:node1"].style == WARN
    assert not any(row.style == BAD for row in nodes.values())

