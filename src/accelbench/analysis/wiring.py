"""A node wired differently from its peers: the GPU/NIC wiring each node's newest
`health check=topology` stored (its signature, the matrix without addresses), or, for a
node without one, the wiring its newest run's fingerprint keeps (every run reads it),
against the wiring most nodes of the same stack have. Pure: stored records in, findings
out.

A wiring is judged only where at least three nodes of a stack stored one and more than
half of them agree: with fewer, or no majority, there is nothing to call "the fleet's".

Direct GPU links (NVLink, XGMI) are part of the signature, so a node that lost one is
wired unlike its peers. They are compared only among nodes whose direct links were read:
a node whose GPU library could not be read (or a record stored before direct links were
read) is compared by its PCI wiring alone with the PCI wiring most nodes have, never
called odd for the library it lacks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelbench.analysis.latest import NodeState
from accelbench.core.topology import TOPOLOGY, TopologyRecord

HEALTH = "health"
MIN_NODES = 3
RULE = "health wiring"
SHOWN = 400  # characters of a stored signature kept in a finding
_ROWS = "; "


@dataclass(frozen=True)
class Wiring:
    """One node's stored wiring: `signature` with its direct links where they were read
    (`direct_read`), `pci` the PCI tree's alone."""

    signature: str
    pci: str
    direct_read: bool
    label: str
    key: str
    run: str | None = None  # the run whose fingerprint it is; None: the case's own run


def wiring_of(state: NodeState) -> Wiring | None:
    """The node's newest wiring: its newest topology check's, else its newest run's
    fingerprint's; None without either."""
    for m in state.measurements:
        if m.case.benchmark != HEALTH or m.case.param_dict.get("check") != TOPOLOGY:
            continue
        found = _read(TopologyRecord.from_details(m.details), m.case.label, m.case.key)
        if found is not None:
            return found
    fingerprint = state.run.fingerprint
    return _read(TopologyRecord.from_dict(fingerprint.get(TOPOLOGY))
                 if isinstance(fingerprint, Mapping) else None,
                 "the run's fingerprint", "", state.run.record.id)


def _read(wiring: TopologyRecord | None, label: str, key: str,
          run: str | None = None) -> Wiring | None:
    if wiring is None or not wiring.signature:
        return None
    return Wiring(wiring.signature, wiring.pci_signature or wiring.signature,
                  wiring.direct_read, label, key, run)


def signature(state: NodeState) -> tuple[str, str, str] | None:
    """(signature, case label, case key) of the node's newest wiring; None without one."""
    found = wiring_of(state)
    return None if found is None else (found.signature, found.label, found.key)


def odd_wiring(nodes: Sequence[tuple[str, NodeState]]
               ) -> dict[str, tuple[str, str, Wiring]]:
    """Node name -> (its wiring, the majority's, where its wiring was read), for each node
    wired unlike most nodes of its stack; where the two have the same rows, only the rows
    that differ are given."""
    by_stack: dict[str, list[tuple[str, Wiring]]] = {}
    for name, state in nodes:
        found = wiring_of(state)
        if found is not None:
            by_stack.setdefault(state.generation_key, []).append((name, found))
    odd: dict[str, tuple[str, str, Wiring]] = {}
    for group in by_stack.values():
        if len(group) < MIN_NODES:
            continue
        full = _majority([w.signature for _, w in group if w.direct_read])
        pci = _majority([w.pci for _, w in group])
        for name, w in group:
            if w.direct_read and full is not None:
                own, common = w.signature, full
            elif pci is not None:
                own, common = w.pci, pci
            else:
                continue
            if own != common:
                own, common = _differing(own, common)
                odd[name] = (own[:SHOWN], common[:SHOWN], w)
    return odd


def _majority(signatures: Sequence[str]) -> str | None:
    """The signature more than half of at least MIN_NODES share; None without one."""
    if len(signatures) < MIN_NODES:
        return None
    (common, count), = Counter(signatures).most_common(1)
    return common if count * 2 > len(signatures) else None


def _differing(own: str, common: str) -> tuple[str, str]:
    """The rows of two signatures that differ, where both name the same rows; the whole
    signatures otherwise (a device missing or added)."""
    mine, theirs = own.split(_ROWS), common.split(_ROWS)
    names = [row.split(":", 1)[0] for row in mine]
    if names != [row.split(":", 1)[0] for row in theirs]:
        return own, common
    pairs = [(a, b) for a, b in zip(mine, theirs, strict=True) if a != b]
    return _ROWS.join(a for a, _ in pairs), _ROWS.join(b for _, b in pairs)
