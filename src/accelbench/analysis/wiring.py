"""A node wired differently from its peers: the GPU/NIC wiring each node's newest
`health check=topology` stored (its signature, the matrix without addresses), against
the wiring most nodes of the same stack have. Pure: stored records in, findings out.

A wiring is judged only where at least three nodes of a stack stored one and more than
half of them agree: with fewer, or no majority, there is nothing to call "the fleet's".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.analysis.latest import NodeState

HEALTH, TOPOLOGY = "health", "topology"
MIN_NODES = 3
RULE = "health wiring"
SHOWN = 400  # characters of a stored signature kept in a finding


def signature(state: NodeState) -> tuple[str, str, str] | None:
    """(signature, case label, case key) of the node's newest wiring; None without one."""
    for m in state.measurements:
        if m.case.benchmark != HEALTH or m.case.param_dict.get("check") != TOPOLOGY:
            continue
        wiring: Any = m.details.get("topology") if isinstance(m.details, dict) else None
        found = wiring.get("signature") if isinstance(wiring, Mapping) else None
        if isinstance(found, str) and found:
            return found, m.case.label, m.case.key
    return None


def odd_wiring(nodes: Sequence[tuple[str, NodeState]]) -> dict[str, tuple[str, str, str, str]]:
    """Node name -> (its signature, the majority's, the case label, the case key), for
    each node wired unlike most nodes of its stack."""
    by_stack: dict[str, list[tuple[str, NodeState, tuple[str, str, str]]]] = {}
    for name, state in nodes:
        found = signature(state)
        if found is not None:
            by_stack.setdefault(state.generation_key, []).append((name, state, found))
    odd: dict[str, tuple[str, str, str, str]] = {}
    for group in by_stack.values():
        if len(group) < MIN_NODES:
            continue
        (common, count), = Counter(found[0] for _, _, found in group).most_common(1)
        if count * 2 <= len(group):
            continue
        for name, _, (own, label, key) in group:
            if own != common:
                odd[name] = (own[:SHOWN], common[:SHOWN], label, key)
    return odd
