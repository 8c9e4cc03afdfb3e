"""isolate's naming rule on golden fabrics: a slow node, a slow link, two nodes, equal,
noisy but fine, a MAD of 0."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from accelbench.benchmarks.isolate.schedule import LOCAL, NODE, Pair, local_member
from accelbench.benchmarks.isolate.verdict import (
    MIN_SLOWNESS,
    PairFigures,
    Verdict,
    judge,
    pair_figures,
)

FAST = 10e9  # B/s
LATENCY = 5e-6  # s


def fabric(n: int, bw: Callable[[int, int], float] = lambda i, j: FAST,
           latency: Callable[[int, int], float] = lambda i, j: LATENCY) -> list[PairFigures]:
    """Every pair of nodes n0..n{n-1}, with the figures the functions give."""
    return [PairFigures(Pair(NODE, f"n{i}", f"n{j}", (i, j)),
                        {"busbw": bw(i, j), "p2p_bw": bw(i, j), "latency": latency(i, j)})
            for i, j in itertools.combinations(range(n), 2)]


def slow_node(k: int, factor: float = 1000.0) -> Callable[[int, int], float]:
    return lambda i, j: FAST / factor if k in (i, j) else FAST


@pytest.mark.parametrize(("n", "k"), [(3, 2), (3, 0), (4, 1), (8, 5)])
def test_one_slow_node_is_named_and_nothing_else(n: int, k: int) -> None:
    verdict = judge(fabric(n, slow_node(k)))
    assert verdict.names() == [f"n{k}"]
    named = verdict.named
    assert {x.metric for x in named} == {"busbw", "p2p_bw"}  # the latency is equal
    for x in named:
        assert x.what == "node"
        assert x.slow_pairs == x.pairs == n - 1  # all of its pairs are slow
        assert x.slowness > 100
        assert x.z is not None and x.z < -5


def test_a_node_slow_by_latency_is_named_by_latency() -> None:
    verdict = judge(fabric(4, latency=lambda i, j: LATENCY * (50 if 3 in (i, j) else 1)))
    assert verdict.names() == ["n3"]
    assert [x.metric for x in verdict.named] == ["latency"]


@pytest.mark.parametrize("n", [3, 4, 8])
def test_one_slow_pair_between_fine_nodes_is_the_link(n: int) -> None:
    verdict = judge(fabric(n, lambda i, j: FAST / 1000 if (i, j) == (0, 1) else FAST))
    assert verdict.names() == ["n0-n1"]
    assert {x.what for x in verdict.named} == {"link"}
    assert not any(x.ends_unknown for x in verdict.named)


def test_two_nodes_cannot_tell_which_end_and_name_nothing_without_a_floor() -> None:
    results = fabric(2, slow_node(1))
    verdict = judge(results)
    assert verdict.names() == []
    (nodes,) = verdict.fabrics
    assert "which end is slow could not be told" in nodes.notes[0]
    floored = judge(results, min_busbw=1e9)
    assert floored.names() == ["n0-n1"]
    assert all(x.ends_unknown and x.what == "link" and x.z is None for x in floored.named)
    assert judge(fabric(2), min_busbw=1e9).names() == []  # above the floor


def test_all_equal_names_nothing() -> None:
    assert judge(fabric(8)).names() == []


def test_noisy_but_fine_names_nothing() -> None:
    jitter = [1.0, 0.93, 1.08, 0.97, 1.1, 0.9, 1.04, 0.95, 1.06]

    def noisy(i: int, j: int) -> float:
        return FAST * jitter[(3 * i + 5 * j) % len(jitter)]

    assert judge(fabric(8, noisy, lambda i, j: LATENCY / noisy(i, j) * FAST)).names() == []


def test_mad_of_zero_names_only_a_large_enough_effect() -> None:
    # All but one node equal: the MAD is 0, so any difference is many robust SD away;
    # only one beyond the minimum effect is named.
    small = 1 / (MIN_SLOWNESS * 0.9)
    assert judge(fabric(5, slow_node(4, factor=1 / small))).names() == []
    assert judge(fabric(5, slow_node(4, factor=MIN_SLOWNESS * 1.2))).names() == ["n4"]


def test_a_fast_node_is_not_named() -> None:
    assert judge(fabric(5, slow_node(2, factor=0.1))).names() == []


def test_local_pairs_are_judged_per_node_and_name_a_rank() -> None:
    def local(node: str, base: int, slow: int | None) -> list[PairFigures]:
        out = []
        for i, j in itertools.combinations(range(4), 2):
            bw = FAST / 100 if slow in (i, j) else FAST
            out.append(PairFigures(
                Pair(LOCAL, local_member(node, i), local_member(node, j), (base + i, base + j),
                     node), {"busbw": bw, "p2p_bw": bw, "latency": LATENCY}))
        return out

    verdict = judge(fabric(2) + local("n0", 0, None) + local("n1", 4, 3))
    assert [f.name for f in verdict.fabrics] == ["nodes", "n0", "n1"]
    assert verdict.names() == ["n1:3"]
    assert {x.what for x in verdict.named} == {"rank"}
    n1 = verdict.fabrics[2]
    assert n1.members == ("n1:0", "n1:1", "n1:2", "n1:3")
    busbw = n1.matrices["busbw"]
    assert busbw[3][0] == busbw[0][3] == FAST / 100 and busbw[3][3] is None


def test_matrices_are_complete_and_symmetric_and_the_verdict_round_trips() -> None:
    verdict = judge(fabric(4, slow_node(1)))
    (nodes,) = verdict.fabrics
    for rows in nodes.matrices.values():
        for i in range(4):
            for j in range(4):
                assert (rows[i][j] is None) == (i == j)
                assert rows[i][j] == rows[j][i]
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    with pytest.raises(ValueError, match="format"):
        Verdict.from_dict({**verdict.to_dict(), "format_version": 99})


def test_pair_figures_from_samples() -> None:
    pair = Pair(NODE, "a", "b", (0, 1))
    got = pair_figures(pair, [1e-6, 2e-6, 3e-6], [1e-3, 2e-3, 9e-3], [4e-3, 4e-3], 1000, 1.0)
    assert got.figures == {"busbw": 1000 / 4e-3, "p2p_bw": 1000 / 2e-3, "latency": 2e-6}
