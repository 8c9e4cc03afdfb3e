"""`accelbench isolate` for real: 4 Gloo CPU ranks on this node through torchrun, every
local pair measured, checked and stored, in passes until the naming settles; and its bad
input. Real timing on a shared CPU is noisy (four ranks time-share two cores), so nothing
here asserts which pair is faster: only that two runs never name two different things
without one of them saying it is not sure."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import EXIT_INCONCLUSIVE, EXIT_NODES, EXIT_USAGE
from accelbench.store import Store

pytestmark = pytest.mark.slow

SAMPLES = 3
PASSES = 4


def _isolate(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelbench", "isolate", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    folder = tmp_path_factory.mktemp("isolate")
    store, report = folder / "results.sqlite", folder / "isolate.html"
    done = _isolate("--nproc-per-node", "4", "--device", "cpu", "--oversubscribe",
                    "--bytes", "16K", "--samples", str(SAMPLES), "--max-passes", str(PASSES),
                    "--store", str(store), "--report", str(report), "--json")
    assert done.returncode in (0, 1, EXIT_INCONCLUSIVE), done.stderr[-3000:]
    out = json.loads(done.stdout)
    with Store.open(store, create=False) as s:
        stored = s.load_run(out["run_id"])
    return done, out, stored, report


def test_every_local_pair_is_measured_checked_and_stored(four_ranks) -> None:
    stored = four_ranks[2]
    (m,) = stored.measurements
    assert m.case.benchmark == "isolate" and m.ok, m.reason
    d = m.details
    assert d["world_size"] == 4 and d["ranks_per_node"] == [4] and len(d["nodes"]) == 1
    node = d["nodes"][0]
    pairs = d["pairs"]
    assert sorted(tuple(p["ranks"]) for p in pairs) == list(itertools.combinations(range(4), 2))
    assert {p["kind"] for p in pairs} == {"local"} and {p["node"] for p in pairs} == {node}
    assert d["rounds"] == 3  # 4 ranks: 3 rounds of 2 disjoint pairs
    for r in range(3):
        ranks = [x for p in pairs if p["round"] == r for x in p["ranks"]]
        assert sorted(ranks) == [0, 1, 2, 3]
    passes = d["passes"]
    assert 1 <= passes <= PASSES
    for p in pairs:
        for name in ("latency_s", "p2p_s", "allreduce_s"):
            assert len(p[name]) == SAMPLES * passes and all(t > 0 for t in p[name])
        assert set(p["figures"]) == {"busbw", "p2p_bw", "latency"}
        assert len(p["figures_by_pass"]) == passes
    assert d["bytes"] == 16 << 10 and d["latency_bytes"] == 8
    settled = d["verdict"]["settled"]
    assert len(settled["passes"]) == passes and settled["conclusive"] == d["conclusive"]


def test_the_matrices_are_complete_and_the_exit_code_follows_the_verdict(four_ranks) -> None:
    done, out, stored, _ = four_ranks
    (verdict,) = out["verdicts"]
    (fabric,) = verdict["fabrics"]
    assert fabric["kind"] == "local" and len(fabric["members"]) == 4
    for rows in fabric["matrices"].values():
        assert len(rows) == 4
        for i, j in itertools.product(range(4), repeat=2):
            assert (rows[i][j] is None) == (i == j)
            assert rows[i][j] == rows[j][i]
    assert out["named"] == stored.measurements[0].details["named"]
    if not verdict["conclusive"]:
        assert done.returncode == EXIT_INCONCLUSIVE and out["named"] == []
        assert any(line.startswith("inconclusive: ") for line in verdict["lines"])
    else:
        assert done.returncode == (1 if out["named"] else 0)
    assert verdict["lines"]


@pytest.mark.pinned_only  # two more runs of the pairs the test above runs on the floor
def test_two_runs_name_the_same_or_one_says_it_is_not_sure(four_ranks, tmp_path) -> None:
    """The stability case: a second run on the same noisy host."""
    first = four_ranks[1]["verdicts"][0]
    again = _isolate("--nproc-per-node", "4", "--device", "cpu", "--oversubscribe",
                     "--bytes", "16K", "--samples", str(SAMPLES), "--max-passes", str(PASSES),
                     "--store", str(tmp_path / "again.sqlite"), "--no-report", "--json")
    assert again.returncode in (0, 1, EXIT_INCONCLUSIVE), again.stderr[-3000:]
    second = json.loads(again.stdout)["verdicts"][0]
    if first["conclusive"] and second["conclusive"]:
        named = [[n["name"] for f in v["fabrics"] for n in f["named"]] for v in (first, second)]
        assert sorted(set(named[0])) == sorted(set(named[1]))


def test_the_report_holds_the_heat_maps(four_ranks) -> None:
    page = Path(four_ranks[3]).read_text()
    assert 'id="run-1-isolate"' in page
    assert page.count('data-chart="') >= 2


@pytest.mark.parametrize(("args", "code", "message"), [
    ((), EXIT_NODES, "isolate measures pairs, and one rank on one node makes none"),
    (("--nproc-per-node", "1"), EXIT_NODES, "give --nproc-per-node 2 or more"),
    (("--nproc-per-node", "2", "--backend", "nccl2"), EXIT_USAGE, "invalid choice: 'nccl2'"),
    (("--nproc-per-node", "2", "--bytes", "lots"), EXIT_USAGE, "bytes"),
])
def test_bad_input_is_one_line_and_touches_no_store(tmp_path: Path, args: tuple[str, ...],
                                                    code: int, message: str) -> None:
    store = tmp_path / "results.sqlite"
    done = _isolate("--device", "cpu", "--store", str(store), *args, timeout=60)
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error: ")
    assert message in lines[0]
    assert not store.exists()
