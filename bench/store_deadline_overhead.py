"""What the statement deadline costs a store that a run writes into, on PostgreSQL.

Every statement on a PostgreSQL store runs under a client-side deadline (a watch thread
per connection, armed and disarmed around each statement; store/postgres.py). This
times `Store.add_measurement`, one transaction per case as a run writes them, through
two connections to one throwaway server: one as accelbench runs, one whose watch is
replaced by one that does nothing. The two alternate round by round, so that warm-up and
the machine's drift favour neither, and the script prints each round's writes per second
and the ratio (watched / unwatched). The target: at least 0.9.

    python bench/store_deadline_overhead.py [--rounds 10] [--writes 200]
"""

from __future__ import annotations

import argparse
import sys
import time

import _pgcluster
from _rounds import alternate, verdict
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.timing import Timing
from accelbench.store import Store

TARGET = 0.9


class _NoWatch:
    """The deadline's interface, doing nothing."""

    expired = False

    def __enter__(self) -> _NoWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def renew(self) -> None:
        pass

    def close(self) -> None:
        pass


def _measurement() -> Measurement:
    case = Case.make("gemm", "g1", "micro", {"shape": 4096, "dtype": "bf16"}, "cuda:0")
    samples = tuple(1e-3 * (1 + 0.001 * (i % 7 - 3)) for i in range(20))
    figures = (Figure("throughput", 2 * 4096**3 / 1e-3, "FLOP/s", True, 1.3e15),)
    return Measurement(case, "ok", timings=(Timing(samples, 10, 0, "converged", 0.95),),
                       time_name="", measured=figures, started_at=time.time(), duration_s=0.5)


def _writer(store: Store, writes: int) -> float:
    run_id = store.begin_run(fingerprint={"format_version": 1}, fingerprint_id="fp",
                             generation_key="bench", device="cuda:0", suite=None,
                             argv=["bench"], host="bench", accelbench_version="0")
    m = _measurement()
    started = time.perf_counter()
    for _ in range(writes):
        store.add_measurement(run_id, m)
    return writes / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    cluster = _pgcluster.start()
    try:
        url = cluster.url(cluster.create_database("deadline"))
        with Store.open(url) as watched, Store.open(url) as unwatched:
            unwatched._backend._watch = _NoWatch()  # type: ignore[attr-defined]
            print(f"{args.writes} writes per round, one transaction each, on PostgreSQL "
                  f"{cluster.bin.parent.name}")
            print(f"{'round':>5} {'watched (writes/s)':>20} {'unwatched (writes/s)':>20} "
                  f"{'ratio':>7}")
            ours, plain = alternate(args.rounds, lambda: _writer(watched, args.writes),
                                    lambda: _writer(unwatched, args.writes))
        return verdict(ours, plain, TARGET, names=("watched", "unwatched"))
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
