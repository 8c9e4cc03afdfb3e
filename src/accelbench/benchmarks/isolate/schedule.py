"""Which ranks `isolate` pairs, and in which rounds (pure; every rank works it out alike).

The ranks of a job are grouped by node name (the first rank of each node leads it).
Node pairs join the leaders of two nodes, so every pair crosses the fabric between
them; local pairs join two ranks of one node (two GPUs). Pairs are measured in rounds of
disjoint pairs: the round-robin "circle" schedule gives every pair of n members exactly
once in n - 1 rounds (n rounds when n is odd, each member sitting out one), not one
pair at a time. The local pairs of different nodes share a round. Pairs of one round
run at the same time and so share the fabric (a switch, a node's PCIe or xGMI links);
`serial` measures one pair at a time instead, each in a round of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NODE = "node"
LOCAL = "local"


def circle_rounds(n: int) -> list[list[tuple[int, int]]]:
    """Every pair (i, j), i < j, of members 0..n-1 exactly once, in rounds of disjoint
    pairs: member 0 stays put while the others turn around it."""
    if n < 2:
        return []
    slots: list[int | None] = [*range(n), *([None] if n % 2 else [])]
    size = len(slots)
    rounds = []
    for _ in range(size - 1):
        pairs = []
        for i in range(size // 2):
            a, b = slots[i], slots[size - 1 - i]
            if a is not None and b is not None:  # None: the bye of an odd count
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return rounds


@dataclass(frozen=True)
class Layout:
    """The job's nodes, in the order of their first rank, with the ranks on each."""

    nodes: tuple[str, ...]
    ranks: tuple[tuple[int, ...], ...]  # global ranks per node, ascending

    @classmethod
    def from_names(cls, names: Sequence[str]) -> Layout:
        """From every rank's node name, by rank."""
        by_node: dict[str, list[int]] = {}
        for rank, name in enumerate(names):
            by_node.setdefault(name, []).append(rank)
        return cls(tuple(by_node), tuple(tuple(r) for r in by_node.values()))

    def leader(self, node: int) -> int:
        return self.ranks[node][0]


@dataclass(frozen=True)
class Pair:
    """Two ranks measured together. Members are node names for a node pair, and
    "NODE:I" (the I-th rank of NODE, its local rank) for a local pair."""

    kind: str  # NODE or LOCAL
    a: str
    b: str
    ranks: tuple[int, int]
    node: str | None = None  # the node a local pair is on

    @property
    def label(self) -> str:
        return f"{self.a}-{self.b}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "a": self.a, "b": self.b, "ranks": list(self.ranks),
                "node": self.node}


def local_member(node: str, index: int) -> str:
    return f"{node}:{index}"


def plan_rounds(layout: Layout, serial: bool = False) -> list[list[Pair]]:
    """The node pairs' rounds, then the local pairs' rounds."""
    rounds: list[list[Pair]] = [
        [Pair(NODE, layout.nodes[i], layout.nodes[j], (layout.leader(i), layout.leader(j)))
         for i, j in pairs]
        for pairs in circle_rounds(len(layout.nodes))
    ]
    local: list[list[Pair]] = []
    for node, ranks in zip(layout.nodes, layout.ranks, strict=True):
        for r, pairs in enumerate(circle_rounds(len(ranks))):
            if r == len(local):
                local.append([])
            local[r] += [Pair(LOCAL, local_member(node, i), local_member(node, j),
                              (ranks[i], ranks[j]), node) for i, j in pairs]
    rounds += local
    if serial:
        return [[pair] for pairs in rounds for pair in pairs]
    return rounds
