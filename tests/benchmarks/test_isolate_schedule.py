"""isolate's pair schedule: every pair exactly once, disjoint within a round."""

from __future__ import annotations

import itertools

import pytest

from accelbench.benchmarks.isolate.schedule import (
    LOCAL,
    NODE,
    Layout,
    circle_rounds,
    plan_rounds,
)


@pytest.mark.parametrize("n", range(0, 10))
def test_circle_rounds_give_every_pair_once_in_disjoint_rounds(n: int) -> None:
    rounds = circle_rounds(n)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))
    for r in rounds:
        members = [m for p in r for m in p]
        assert len(members) == len(set(members))  # disjoint
    expected_rounds = 0 if n < 2 else (n - 1 if n % 2 == 0 else n)
    assert len(rounds) == expected_rounds
    if n >= 2:
        # An even count pairs everyone every round; an odd one gives one bye per round.
        assert all(len(r) == n // 2 for r in rounds)


def test_one_and_two_members() -> None:
    assert circle_rounds(1) == []
    assert circle_rounds(2) == [[(0, 1)]]


def test_layout_groups_ranks_by_node_in_order_of_their_first_rank() -> None:
    layout = Layout.from_names(["b", "b", "a", "a", "c"])
    assert layout.nodes == ("b", "a", "c")
    assert layout.ranks == ((0, 1), (2, 3), (4,))
    assert [layout.leader(i) for i in range(3)] == [0, 2, 4]


def test_plan_node_pairs_of_leaders_then_local_pairs_of_all_nodes_together() -> None:
    layout = Layout.from_names(["n0", "n0", "n0", "n1", "n1", "n1", "n2", "n2", "n2"])
    rounds = plan_rounds(layout)
    node_rounds = [r for r in rounds if r[0].kind == NODE]
    local_rounds = [r for r in rounds if r[0].kind == LOCAL]
    assert rounds == node_rounds + local_rounds
    assert len(node_rounds) == 3 and len(local_rounds) == 3  # 3 nodes, 3 ranks each: odd
    node_pairs = sorted(p.ranks for r in node_rounds for p in r)
    assert node_pairs == [(0, 3), (0, 6), (3, 6)]
    assert sorted((p.a, p.b) for r in node_rounds for p in r) == [
        ("n0", "n1"), ("n0", "n2"), ("n1", "n2")]
    local = [p for r in local_rounds for p in r]
    assert sorted(p.ranks for p in local) == sorted(
        (base + i, base + j) for base in (0, 3, 6) for i, j in itertools.combinations(range(3), 2))
    assert {p.node for p in local if p.ranks == (3, 4)} == {"n1"}
    assert [p.label for p in local if p.ranks == (3, 4)] == ["n1:0-n1:1"]
    for r in rounds:
        ranks = [x for p in r for x in p.ranks]
        assert len(ranks) == len(set(ranks))
    # Every node's local pairs share each round with the other nodes'.
    assert all(len({p.node for p in r}) == 3 for r in local_rounds)


def test_serial_is_one_pair_per_round_in_the_same_order() -> None:
    layout = Layout.from_names(["a", "a", "b", "b"])
    together = plan_rounds(layout)
    serial = plan_rounds(layout, serial=True)
    assert all(len(r) == 1 for r in serial)
    assert [r[0] for r in serial] == [p for r in together for p in r]


def test_a_lone_rank_has_no_pairs_and_a_node_of_one_rank_no_local_pairs() -> None:
    assert plan_rounds(Layout.from_names(["a"])) == []
    rounds = plan_rounds(Layout.from_names(["a", "b", "b"]))
    assert [(p.kind, p.ranks) for r in rounds for p in r] == [(NODE, (0, 1)), (LOCAL, (1, 2))]
