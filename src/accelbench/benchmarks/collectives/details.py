"""The details a `collectives` case stores beside its figures (`ops.measure` writes them,
`summary` reads them back), as one typed record.

`CollectiveDetails.to_dict` writes the keys, values and order that every stored record
of the benchmark has; `from_details` reads a stored record tolerantly: records of older
releases and records put together by hand (a test's, a merge's) hold only some keys, and
each value that is missing or of another kind reads as None (a list as empty), never
raising. The one exception is `bytes`, which readers have always taken as 0 where it is
stored but not a finite number, and from the case's parameters only where it is absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from accelbench.core.stored import finites, integer, mapping, number, text

__all__ = ["CollectiveDetails", "Peers", "size_bytes"]


@dataclass(frozen=True)
class Peers:
    """send-recv: the rank this one sends to and the one it receives from, and the rule."""

    send_to: int | None
    recv_from: int | None
    rule: str | None

    def to_dict(self) -> dict[str, object]:
        return {"send_to": self.send_to, "recv_from": self.recv_from, "rule": self.rule}

    @classmethod
    def from_dict(cls, raw: object) -> Peers | None:
        found = mapping(raw)
        if found is None:
            return None
        return cls(integer(found.get("send_to")), integer(found.get("recv_from")),
                   text(found.get("rule")))


@dataclass(frozen=True)
class CollectiveDetails:
    """What one collective case did: the operation and its call, the size it moved
    (`bytes`, S rounded down to whole elements) in `count` elements of `dtype`, the
    job's shape and library, and each rank's own median time per call."""

    op: str | None = None
    torch_call: str | None = None
    bytes: int | None = None  # None: not stored (the case's parameter is the size then)
    count: int | None = None
    dtype: str | None = None
    reduce: str | None = None  # None for an operation that does not reduce
    inplace: bool | None = None  # None for barrier (no data)
    bus_factor: float | None = None  # None for barrier
    wrong_elements: int | None = None
    world_size: int | None = None
    nodes: int | None = None
    backend: str | None = None
    library: str | None = None
    rank_median_s: tuple[float, ...] = ()
    rank_spread: float | None = None  # slowest over fastest rank's median
    time_is: str | None = None
    root: int | None = None  # stored for rooted operations only
    peers: Peers | None = None  # stored for send-recv only

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "op": self.op,
            "torch_call": self.torch_call,
            "bytes": self.bytes,
            "count": self.count,
            "dtype": self.dtype,
            "reduce": self.reduce,
            "inplace": self.inplace,
            "bus_factor": self.bus_factor,
            "wrong_elements": self.wrong_elements,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "backend": self.backend,
            "library": self.library,
            "rank_median_s": list(self.rank_median_s),
            "rank_spread": self.rank_spread,
            "time_is": self.time_is,
        }
        if self.root is not None:
            data["root"] = self.root
        if self.peers is not None:
            data["peers"] = self.peers.to_dict()
        return data

    @classmethod
    def from_details(cls, details: Mapping[str, object]) -> CollectiveDetails:
        """The details of a stored collectives case, each key it lacks as None."""
        inplace = details.get("inplace")
        return cls(
            op=text(details.get("op")),
            torch_call=text(details.get("torch_call")),
            bytes=size_bytes(details["bytes"]) if "bytes" in details else None,
            count=integer(details.get("count")),
            dtype=text(details.get("dtype")),
            reduce=text(details.get("reduce")),
            inplace=inplace if isinstance(inplace, bool) else None,
            bus_factor=number(details.get("bus_factor")),
            wrong_elements=integer(details.get("wrong_elements")),
            world_size=integer(details.get("world_size")),
            nodes=integer(details.get("nodes")),
            backend=text(details.get("backend")),
            library=text(details.get("library")),
            rank_median_s=finites(details.get("rank_median_s")) or (),
            rank_spread=number(details.get("rank_spread")),
            time_is=text(details.get("time_is")),
            root=integer(details.get("root")),
            peers=Peers.from_dict(details.get("peers")),
        )


def size_bytes(value: object) -> int:
    """A stored size in bytes; 0 where it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if math.isfinite(value) else 0
