"""The details a collectives case stores, as a typed record: what the writer stores
round-trips byte for byte, and a damaged or hand-made record reads as the summary has
always read it (a size that is not a number is 0; a missing size is the parameter's)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from accelbench.benchmarks.collectives.details import CollectiveDetails, Peers
from accelbench.benchmarks.collectives.summary import summarize_sweep
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from fakes import stored_measurement

# As `ops.measure` stored a send-recv case on 4 ranks before the record was typed: the
# keys in their order, and the values.
SEND_RECV = {
    "op": "send-recv", "torch_call": "torch.distributed.batch_isend_irecv", "bytes": 1048576,
    "count": 262144, "dtype": "fp32", "reduce": None, "inplace": False, "bus_factor": 1.0,
    "wrong_elements": 0, "world_size": 4, "nodes": 2, "backend": "nccl",
    "library": "RCCL 2.21.5", "rank_median_s": [0.001, 0.0011, 0.00105, 0.00102],
    "rank_spread": 1.1, "time_is": "slowest rank per sample",
    "peers": {"send_to": 2, "recv_from": 2, "rule": "rank + 2 and rank - 2 (mod 4)"},
}
BROADCAST = {
    "op": "broadcast", "torch_call": "torch.distributed.broadcast", "bytes": 96, "count": 24,
    "dtype": "fp32", "reduce": None, "inplace": True, "bus_factor": 1.0, "wrong_elements": 0,
    "world_size": 2, "nodes": 1, "backend": "gloo", "library": "Gloo (PyTorch 2.9.0)",
    "rank_median_s": [2e-05, 2.1e-05], "rank_spread": 1.05, "time_is": "slowest rank per sample",
    "root": 0,
}
BARRIER = {
    "op": "barrier", "torch_call": "torch.distributed.barrier", "bytes": 0, "count": 0,
    "dtype": "fp32", "reduce": None, "inplace": None, "bus_factor": None, "wrong_elements": 0,
    "world_size": 2, "nodes": 1, "backend": "gloo", "library": "Gloo (PyTorch 2.9.0)",
    "rank_median_s": [1e-05, 0.0], "rank_spread": None, "time_is": "slowest rank per sample",
}


def _written(stored: dict[str, Any]) -> CollectiveDetails:
    """The record `ops.measure` builds for `stored`."""
    peers = stored.get("peers")
    return CollectiveDetails(
        op=stored["op"], torch_call=stored["torch_call"], bytes=stored["bytes"],
        count=stored["count"], dtype=stored["dtype"], reduce=stored["reduce"],
        inplace=stored["inplace"], bus_factor=stored["bus_factor"],
        wrong_elements=stored["wrong_elements"], world_size=stored["world_size"],
        nodes=stored["nodes"], backend=stored["backend"], library=stored["library"],
        rank_median_s=tuple(stored["rank_median_s"]), rank_spread=stored["rank_spread"],
        time_is=stored["time_is"], root=stored.get("root"),
        peers=Peers(**peers) if peers else None)


@pytest.mark.parametrize("stored", [SEND_RECV, BROADCAST, BARRIER],
                         ids=["send-recv", "broadcast", "barrier"])
def test_the_writers_record_is_stored_as_before_and_read_back(stored) -> None:
    record = _written(stored)
    assert json.dumps(record.to_dict()) == json.dumps(stored)  # keys, order and values
    again = CollectiveDetails.from_details(json.loads(json.dumps(record.to_dict())))
    assert again == record
    assert json.dumps(again.to_dict()) == json.dumps(stored)


def test_a_record_of_a_few_keys_reads_the_rest_as_absent() -> None:
    found = CollectiveDetails.from_details({"bytes": 64, "library": "Gloo", "nodes": 1})
    assert (found.bytes, found.library, found.nodes) == (64, "Gloo", 1)
    assert found.op is None and found.rank_median_s == () and found.peers is None
    assert CollectiveDetails.from_details({}) == CollectiveDetails()


def test_values_of_another_kind_read_as_absent() -> None:
    found = CollectiveDetails.from_details({
        "op": 3, "count": "24", "inplace": "yes", "bus_factor": True, "world_size": 2.0,
        "nodes": "2", "library": ["RCCL"], "rank_median_s": [1e-3, "slow"],
        "rank_spread": "1.1", "root": None, "peers": [2, 2]})
    assert found == CollectiveDetails()


def _size_read_before(details: dict[str, Any], asked: object) -> int:
    """How `summary` read the size before the record was typed."""
    value = details.get("bytes", asked)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if math.isfinite(value) else 0


def _measured(details: dict[str, Any], asked: object = 4096) -> Any:
    case = Case.make("collectives", "v", "collective",
                     {"op": "all-reduce", "bytes": asked, "dtype": "fp32", "world_size": 2,
                      "backend": "gloo"}, "cpu")
    return stored_measurement(case, "ok", samples=(1e-4,),
                              figures=(Figure("busbw", 1e9, "B/s"), Figure("time", 1e-4, "s",
                                                                           False)),
                              details=details)


@pytest.mark.parametrize("details", [
    {"bytes": 96}, {"bytes": 96.0}, {}, {"bytes": None}, {"bytes": "1M"}, {"bytes": True},
    {"bytes": float("nan")}, {"bytes": float("inf")}, {"bytes": [96]}, {"bytes": -8},
])
def test_a_damaged_size_reads_as_the_summary_read_it(details) -> None:
    [summary] = summarize_sweep([_measured(details)])
    assert summary.small_bytes == summary.min_bytes == _size_read_before(details, 4096)
    assert CollectiveDetails.from_details(details).bytes == (
        _size_read_before(details, None) if "bytes" in details else None)


def test_a_missing_size_falls_back_to_a_parameter_and_a_bad_parameter_to_0() -> None:
    [summary] = summarize_sweep([_measured({}, asked="4K")])
    assert summary.small_bytes == 0


def test_the_summary_reads_library_and_nodes_where_they_are_of_their_kind() -> None:
    [summary] = summarize_sweep([_measured({"bytes": 8, "library": "NCCL 2.21.5", "nodes": 2})])
    assert (summary.library, summary.nodes) == ("NCCL 2.21.5", 2)
    [summary] = summarize_sweep([_measured({"bytes": 8})])
    assert (summary.library, summary.nodes) == (None, None)
    # Of another kind: absent (before, the value was passed on as it was, into a table's
    # text cell or a comparison with a number).
    [summary] = summarize_sweep([_measured({"bytes": 8, "library": 5, "nodes": "2"})])
    assert (summary.library, summary.nodes) == (None, None)
