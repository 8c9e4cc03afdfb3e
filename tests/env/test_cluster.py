"""The nodes of a job: grouped from every rank's place, stored, checked and shown."""

from __future__ import annotations

import pytest

from accelbench.env.cluster import Cluster, RankPlace
from accelbench.errors import StoreError
from accelbench.report.fingerprint import rows
from accelbench.store.record_schema import validate_export

LINK = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"}


def _two_nodes() -> Cluster:
    # Node rank 1 holds the lower global ranks here: nodes are in node-rank order.
    return Cluster.from_places([
        RankPlace(2, 0, "a", LINK), RankPlace(3, 0, "a", LINK),
        RankPlace(0, 1, "b", {**LINK, "NCCL_IB_HCA": "mlx5_1"}), RankPlace(1, 1, "b", LINK),
    ])


def test_nodes_are_grouped_by_node_rank_with_their_ranks_and_settings():
    cluster = _two_nodes()
    assert cluster.to_dict() == {
        "node_count": 2, "node_names": ["a", "b"], "ranks_per_node": [2, 2],
        "node_ranks": [[2, 3], [0, 1]],
        "interconnect": [LINK, {**LINK, "NCCL_IB_HCA": "mlx5_1"}],
    }
    assert Cluster.from_dict(cluster.to_dict()) == cluster
    assert cluster.describe([3, 0]) == "a (rank 3), b (rank 0)"
    assert cluster.describe([0, 1, 9]) == "b (ranks 0, 1), ranks 9"


def test_without_node_ranks_the_nodes_are_told_apart_by_name():
    cluster = Cluster.from_places([RankPlace(1, None, "y"), RankPlace(0, None, "x"),
                                   RankPlace(2, None, "y")])
    assert [(n.name, n.ranks) for n in cluster.nodes] == [("x", (0,)), ("y", (1, 2))]


def test_show_names_the_nodes_and_what_differs_between_their_settings():
    shown = dict(rows({"cluster": _two_nodes().to_dict()}))
    assert shown["Nodes"] == "2: a (ranks 2-3), b (ranks 0-1)"
    assert shown["Interconnect (every node)"] == ("GLOO_SOCKET_IFNAME=eth0, "
                                                  "NCCL_SOCKET_IFNAME=eth0")
    assert shown["Interconnect (a)"] == "NCCL_IB_HCA=(unset)"
    assert shown["Interconnect (b)"] == "NCCL_IB_HCA=mlx5_1"
    one = dict(rows({"cluster": Cluster.one_node("n", 2, LINK).to_dict()}))
    assert one["Nodes"] == "1: n (ranks 0-1)"
    assert one["Interconnect"] == "GLOO_SOCKET_IFNAME=eth0, NCCL_SOCKET_IFNAME=eth0"


def test_a_fingerprint_from_before_clusters_shows_as_it_did():
    assert not [label for label, _ in rows({"host": {"hostname": "h"}})
                if label.startswith(("Nodes", "Interconnect"))]


def _export(cluster: object) -> dict[str, object]:
    run = {"id": "r1", "started_at": 1.0, "status": "complete", "device": "cpu",
           "generation_key": "CPU", "fingerprint_id": "f"}
    return {"format": "accelbench-results", "format_version": 1,
            "runs": [{"run": run, "fingerprint": {"cluster": cluster}, "measurements": []}]}


def test_an_import_with_a_malformed_cluster_is_refused_with_its_path():
    validate_export(_export(_two_nodes().to_dict()), "x.json")
    with pytest.raises(StoreError, match=r"runs\[0\]\.fingerprint\.cluster\.node_names\[0\]"):
        validate_export(_export({**_two_nodes().to_dict(), "node_names": [3, "b"]}), "x.json")
    with pytest.raises(StoreError, match="missing field 'node_count'"):
        validate_export(_export({"node_names": []}), "x.json")
