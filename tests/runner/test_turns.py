"""Two processes taking turns (runner.turns), here two threads with the same pipes: they
never sample at the same time, each hands the turn over after a slice, both start
sampling together after their set-up, a partner that finishes (or is released by the
supervisor) lets the other go on alone, and the CPUs of a pair are chosen."""

from __future__ import annotations

import itertools
import os
import threading
import time

import pytest

from accelbench.runner.turns import TurnPair, Turns, pair_cpus, pin


def _run(turns: Turns, log: list[tuple[str, float, float]], name: str, setup: float,
         samples: int, sample_s: float = 0.004) -> None:
    turns.begin()
    time.sleep(setup)  # set-up and warm-up, with the turn
    turns.sampling()
    for _ in range(samples):
        start = time.perf_counter()
        time.sleep(sample_s)
        log.append((name, start, time.perf_counter()))
        turns.slowest(sample_s)
    turns.end()


def _pair(tmp_path, slice_s: float = 0.02) -> tuple[Turns, Turns]:
    pair = TurnPair(tmp_path, "t")
    a = pair.spec("a", first=True)
    b = pair.spec("b", first=False)
    return (Turns(type(a)(a.mine, a.theirs, a.first, slice_s)),
            Turns(type(b)(b.mine, b.theirs, b.first, slice_s)))


def _both(a: Turns, b: Turns, log: list[tuple[str, float, float]],
          setups: tuple[float, float], samples: tuple[int, int]) -> None:
    """A and B taking turns, each in a thread, to the end."""
    threads = [threading.Thread(target=_run, args=(turns, log, name, setup, n))
               for turns, name, setup, n in zip((a, b), "ab", setups, samples, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)


def test_the_two_never_sample_at_once_and_hand_over_after_each_slice(tmp_path) -> None:
    a, b = _pair(tmp_path)
    log: list[tuple[str, float, float]] = []
    _both(a, b, log, (0.05, 0.2), (40, 40))
    spans = sorted(log, key=lambda e: e[1])
    for (_, _, end), (_, start, _) in itertools.pairwise(spans):
        assert start >= end - 1e-4  # one at a time
    switches = sum(1 for x, y in itertools.pairwise(spans) if x[0] != y[0])
    assert switches >= 10 and a.handovers >= 5 and b.handovers >= 5
    # B's long set-up came before either sampled: A's first sample follows it.
    first_a = min(s for n, s, _ in log if n == "a")
    first_b = min(s for n, s, _ in log if n == "b")
    assert abs(first_a - first_b) < 0.1


def test_a_partner_that_finishes_lets_the_other_go_on_alone(tmp_path) -> None:
    a, b = _pair(tmp_path)
    log: list[tuple[str, float, float]] = []
    _both(a, b, log, (0.0, 0.0), (5, 60))
    assert sum(1 for n, _, _ in log if n == "b") == 60


def test_the_supervisor_releases_a_process_whose_partner_is_lost(tmp_path) -> None:
    pair = TurnPair(tmp_path, "t")
    b = Turns(pair.spec("b", first=False))
    done = threading.Event()

    def second() -> None:
        b.begin()  # waits for a partner that never starts
        done.set()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.1)
    assert not done.is_set()
    pair.release("b")
    thread.join(timeout=10)
    assert done.is_set()
    b.end()
    pair.remove()
    assert not list(tmp_path.glob("*.turn"))


def test_a_pair_runs_on_the_last_cpus_this_process_may_use() -> None:
    usable = sorted(os.sched_getaffinity(0))
    assert pair_cpus(1) == (usable[-1],)
    assert pair_cpus(len(usable)) == tuple(usable)
    assert pair_cpus(len(usable) + 1) is None and pair_cpus(None) is None


def test_pin_moves_every_thread_of_the_process() -> None:
    before = os.sched_getaffinity(0)
    target = (sorted(before)[-1],)
    started = threading.Event()
    stop = threading.Event()

    def idle() -> None:
        started.set()
        stop.wait(5)

    thread = threading.Thread(target=idle)
    thread.start()
    started.wait(5)
    try:
        pin(target)
        for tid in os.listdir("/proc/self/task"):
            assert os.sched_getaffinity(int(tid)) == set(target)
    finally:
        stop.set()
        thread.join()
        pin(tuple(before))


@pytest.mark.parametrize("side", ["a", "b"])
def test_specs_name_each_others_pipes(tmp_path, side: str) -> None:
    pair = TurnPair(tmp_path, "x")
    mine = pair.spec(side, first=side == "a", cpus=(0,))
    other = pair.spec("b" if side == "a" else "a", first=side != "a")
    assert (mine.mine, mine.theirs) == (other.theirs, other.mine)
    assert mine.cpus == (0,)
