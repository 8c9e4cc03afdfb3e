"""GPU links on a partitioned MI300X node. In DPX, QPX or CPX mode amdsmi gives one
processor handle per compute partition (CPX: eight per GPU, a GPU's partitions together),
and only the first partition of each GPU reads the device's XGMI link states: the others
answer N/A, as a state the binding does not name or as a call that is not supported
(amd-smi xgmi --link-status prints N/A for both). N/A is no link state: it must not count
as links down."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_gpu_health import by_subject, gpu, not_passing, read_amd

from accelbench.benchmarks.health.findings import FAIL, PASS
from accelbench.benchmarks.health.gpu import GpuLink, GpuRead, findings
from gpu_fakes import load_node

CPX = 8  # partitions per MI300X in CPX mode, one per XCD

# What a secondary partition answers for its XGMI link states.
NOT_NAMED = {"amdsmi_get_gpu_xgmi_link_status": {"status": ["N/A"] * 8, "total_links": 8}}
NOT_SUPPORTED = {"amdsmi_get_gpu_xgmi_link_status": {"raises": "AMDSMI_STATUS_NOT_SUPPORTED"}}


def cpx_node(secondary: dict[str, Any]) -> dict[str, Any]:
    """The healthy 8 x MI300X node in CPX mode: each GPU's recording repeated for its
    partitions in amdsmi's order, the partition number in the PCI function as amd-smi list
    shows it, and `secondary`'s answers for every partition but the first."""
    node = load_node("mi300x-healthy")
    partitions = []
    for device in node["gpus"]:
        for number in range(CPX):
            entry = copy.deepcopy(device)
            entry["amdsmi_get_gpu_device_bdf"] = device["amdsmi_get_gpu_device_bdf"][:-1] + str(
                number)
            if number:
                entry.update(copy.deepcopy(secondary))
            partitions.append(entry)
    node["gpus"] = partitions
    return node


@pytest.mark.parametrize("secondary", [NOT_NAMED, NOT_SUPPORTED],
                         ids=["states-not-named", "status-not-supported"])
def test_partitions_whose_link_states_read_na_are_not_links_down(
        secondary: dict[str, Any]) -> None:
    read, _ = read_amd(cpx_node(secondary))
    assert len(read.gpus) == 8 * CPX and read.missing is None
    assert not_passing(read)["links"] == []
    links = by_subject(findings(read)["links"])
    assert links["gpu8"].message == "7 of 7 XGMI links up"  # the second GPU's primary
    partition = links["gpu9"]
    assert partition.level == PASS and "states not reported (N/A)" in partition.message
    assert partition.reading["active"] == 0 and partition.reading["not_reported"] >= 7


def test_a_link_down_on_a_partitioned_gpu_still_fails() -> None:
    node = cpx_node(NOT_NAMED)
    node["gpus"][2 * CPX]["amdsmi_get_gpu_xgmi_link_status"]["status"][4] = "D"
    read, _ = read_amd(node)
    bad = by_subject(not_passing(read)["links"])
    assert set(bad) == {"gpu16", "gpu16 xgmi4"}
    assert bad["gpu16"].message == "6 of 7 XGMI links up, where another GPU of the node has 7"
    assert bad["gpu16 xgmi4"].level == FAIL
    assert bad["gpu16 xgmi4"].message.startswith("missing XGMI link: xgmi4 is down")


def test_a_gpu_has_fewer_links_only_if_its_unreported_ones_cannot_make_up_the_count() -> None:
    def links(*states: str | None) -> tuple[GpuLink, ...]:
        return tuple(GpuLink("xgmi", i, state) for i, state in enumerate(states))

    full = gpu(index=0, vendor="amd", links=links(*["up"] * 7, "disabled"))
    one_unknown = gpu(index=1, vendor="amd", links=links(*["up"] * 6, None, "disabled"))
    down_and_unknown = gpu(index=2, vendor="amd", links=links(*["up"] * 5, "down", None))
    found = by_subject(findings(GpuRead("amdsmi", (full, one_unknown, down_and_unknown)))[
        "links"])
    assert found["gpu1"].level == PASS
    assert found["gpu1"].message == "6 of 7 XGMI links up, 1 not reported (N/A)"
    assert found["gpu2"].level == FAIL
    assert found["gpu2"].message == ("5 of 7 XGMI links up, 1 not reported (N/A), where "
                                     "another GPU of the node has 7")
