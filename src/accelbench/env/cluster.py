"""The nodes of a distributed job: their names, their ranks and their interconnect settings.

Kept in the fingerprint of a run whose cases ran on the ranks of a job ("cluster"), so a
multi-node result says which nodes it crossed and with which transport settings, and a
difference between the nodes' settings is visible. The dict form:

    {"node_count": 2, "node_names": ["node0", "node1"], "ranks_per_node": [2, 2],
     "node_ranks": [[0, 1], [2, 3]],
     "interconnect": [{"NCCL_SOCKET_IFNAME": "eth0"}, {"NCCL_SOCKET_IFNAME": "eth1"}]}

with the nodes in node-rank order (torchrun's GROUP_RANK). Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RankPlace:
    """What one rank says of itself when the job starts."""

    rank: int
    node_rank: int | None  # torchrun's GROUP_RANK; None when not started by torchrun
    node: str
    interconnect: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Node:
    name: str
    ranks: tuple[int, ...]
    interconnect: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]

    @classmethod
    def from_places(cls, places: Iterable[RankPlace]) -> Cluster:
        """The nodes of a job from every rank's place: grouped by node rank (by name where
        there is none), in node-rank order; a node's settings are its lowest rank's."""
        groups: dict[object, list[RankPlace]] = {}
        for place in sorted(places, key=lambda p: p.rank):
            key = place.node_rank if place.node_rank is not None else place.node
            groups.setdefault(key, []).append(place)

        def order(key: object) -> tuple[int, int]:
            members = groups[key]
            return (key if isinstance(key, int) else 1 << 30, members[0].rank)

        return cls(tuple(
            Node(groups[k][0].node, tuple(p.rank for p in groups[k]),
                 dict(groups[k][0].interconnect))
            for k in sorted(groups, key=order)))

    @classmethod
    def one_node(cls, name: str, ranks: int, interconnect: Mapping[str, str]) -> Cluster:
        return cls((Node(name, tuple(range(ranks)), dict(interconnect)),))

    def node_of(self, rank: int) -> Node | None:
        return next((n for n in self.nodes if rank in n.ranks), None)

    def describe(self, ranks: Iterable[int]) -> str:
        """ "node1 (ranks 2, 3)", per node, for the ranks given."""
        wanted = sorted(set(ranks))
        parts = []
        for node in self.nodes:
            mine = [r for r in wanted if r in node.ranks]
            if mine:
                word = "rank" if len(mine) == 1 else "ranks"
                parts.append(f"{node.name} ({word} {', '.join(map(str, mine))})")
        unplaced = [r for r in wanted if self.node_of(r) is None]
        if unplaced:
            parts.append(f"ranks {', '.join(map(str, unplaced))}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_count": len(self.nodes),
            "node_names": [n.name for n in self.nodes],
            "ranks_per_node": [len(n.ranks) for n in self.nodes],
            "node_ranks": [list(n.ranks) for n in self.nodes],
            "interconnect": [dict(n.interconnect) for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cluster:
        names = d.get("node_names") or []
        ranks = d.get("node_ranks") or []
        settings = d.get("interconnect") or []
        return cls(tuple(
            Node(str(name), tuple(int(r) for r in (ranks[i] if i < len(ranks) else ())),
                 dict(settings[i]) if i < len(settings) else {})
            for i, name in enumerate(names)))


def shared_settings(nodes: Sequence[Node]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The settings every node has alike, and per node those that differ from them (a
    setting one node lacks is "(unset)" there)."""
    if not nodes:
        return {}, []
    first = dict(nodes[0].interconnect)
    common = {k: v for k, v in first.items()
              if all(n.interconnect.get(k) == v for n in nodes[1:])}
    names = sorted({k for n in nodes for k in n.interconnect} - set(common))
    differing = [{k: n.interconnect.get(k, "(unset)") for k in names} for n in nodes]
    return common, differing
