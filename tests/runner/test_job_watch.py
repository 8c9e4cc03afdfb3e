"""The side channel of a job under the user's torchrun, on an in-process store."""

from __future__ import annotations

import threading

import pytest

from accelbench.env.cluster import Cluster, RankPlace
from accelbench.runner.job_watch import Channel
from accelbench.runner.rank_session import _first_sentence, failure_reason


def _channels(world: int) -> list[Channel]:
    import torch.distributed as dist

    store = dist.HashStore()  # type: ignore[attr-defined]
    return [Channel(store, rank, world) for rank in range(world)]


@pytest.mark.slow
def test_the_probe_names_the_ranks_that_do_not_answer():
    zero, one, _silent = _channels(3)
    stop = threading.Event()

    def answering() -> None:
        while not stop.wait(0.01):
            one.answer()

    thread = threading.Thread(target=answering)
    thread.start()
    try:
        assert zero.probe(wait_s=3.0) == [2]
    finally:
        stop.set()
        thread.join()


def test_failures_broken_and_settled_are_seen_by_every_rank():
    zero, one = _channels(2)
    assert not zero.broken() and not one.settled() and not one.left()
    one.fail_case(4, "RuntimeError: wrong")
    one.say_broken()
    assert zero.broken()
    assert zero.failures(4) == {1: "RuntimeError: wrong"}
    assert zero.failures(3) == {}
    zero.settle()
    zero.leave()
    assert one.settled() and one.left()


def test_the_reason_names_lost_nodes_else_a_rank_s_own_failure():
    cluster = Cluster.from_places([RankPlace(0, 0, "node0"), RankPlace(1, 1, "node1"),
                                   RankPlace(2, 1, "node1")])
    assert (failure_reason(cluster, [1, 2], {0: "x"}, "timed out after 20 s")
            == "node1 (ranks 1, 2) stopped answering (timed out after 20 s)")
    assert failure_reason(cluster, [], {2: "ValueError: bad", 1: "b"}, "t") == "rank 1: b"
    assert failure_reason(cluster, [], {}, "timed out after 5 s") == "timed out after 5 s"
    assert _first_sentence("Read error: Connection reset by peer. This is typically caused "
                           "by a remote worker hanging") == "Read error: Connection reset by peer"
