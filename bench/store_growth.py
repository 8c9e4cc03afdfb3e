"""How the store's cost grows with the fleet: SQLite and PostgreSQL, 10 to 1,000 nodes.

Fills a store with one run per node (distinct host names, one stack, CASES cases each,
synthetic but valid records written through the Store API), then times, through the
CLI's own entry point in this process (`accelbench.cli.main.main`, output discarded):
`runs`, `report` of the latest run, `diagnose` over the whole fleet and `history` of one
case. Prints the seconds (best of REPEATS) and the growth factor per tenfold of nodes;
linear growth is a factor of about 10, and the goal is no worse.

PostgreSQL runs on a throwaway cluster this script starts and removes (bench/_pgcluster.py;
the server binaries of Debian's postgresql, run as the `postgres` user when root).

    python bench/store_growth.py [--nodes 10 100 1000] [--cases 50] [--backend sqlite ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _pgcluster
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.timing import Timing
from accelbench.store import RunRecord, Store, StoredRun

STACK = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
REPEATS = 3
BATCH = 50  # runs per import transaction


def measurement(case: Case, node: int, started_at: float) -> Measurement:
    base = 1e-3 * (1 + 0.002 * ((node * 7919 + hash(case.key)) % 11 - 5))
    samples = tuple(base * (1 + 0.001 * ((i * 31 + node) % 7 - 3)) for i in range(20))
    median = sorted(samples)[len(samples) // 2]
    figures = (Figure("throughput", 2 * 4096**3 / median, "FLOP/s", True, 1.3e15),
               Figure("time", median, "s", higher_is_better=False))
    timing = Timing(samples, 10, 0, "converged", 0.95)
    return Measurement(case, "ok", timings=(timing,), time_name="", measured=figures,
                       started_at=started_at, duration_s=0.5)


def fleet_runs(nodes: int, cases: int) -> list[StoredRun]:
    case_list = [Case.make("gemm", "g1", "micro", {"shape": 256 * (i + 1), "dtype": "bf16"},
                           "cuda:0") for i in range(cases)]
    runs = []
    for node in range(nodes):
        host = f"node{node:04d}"
        started = 1.75e9 + 60 * node
        record = RunRecord(
            id=f"20250615-{node:06d}-{node % 65536:04x}", started_at=started,
            finished_at=started + 60, status="complete", suite="quick", argv=("run",),
            device="cuda:0", generation_key=STACK, host=host, accelbench_version="0.1.0",
            fingerprint_id=f"fp-{host}", n_ok=cases, n_failed=0, n_skipped=0,
        )
        fingerprint = {"format_version": 1, "platform": "rocm",
                       "device": {"name": "AMD Instinct MI300X", "type": "cuda"},
                       "host": {"hostname": host}}
        runs.append(StoredRun(record, fingerprint,
                              tuple(measurement(c, node, started) for c in case_list)))
    return runs


def fill(location: str, nodes: int, cases: int) -> None:
    runs = fleet_runs(nodes, cases)
    with Store.open(location) as store:
        for i in range(0, len(runs), BATCH):
            store.import_runs(runs[i:i + BATCH])


def timed(argv: list[str]) -> float:
    best = math.inf
    for _ in range(REPEATS):
        sink = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = main(argv)
        best = min(best, time.perf_counter() - start)
        if code not in (0, 1):
            raise SystemExit(f"accelbench {' '.join(argv)} exited {code}: {sink.getvalue()}")
    return best


def operations(location: str) -> dict[str, list[str]]:
    store = ["--store", location]
    return {
        "runs": ["runs", *store, "--limit", "20"],
        "report latest": ["report", "latest", *store, "-o", "-"],
        "diagnose fleet": ["diagnose", *store],
        "history 1 case": ["history", "gemm shape=2560", *store, "--limit", "100000"],
    }


def measure(backend: str, new_location: Callable[[int], str], sizes: list[int],
            cases: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    for nodes in sizes:
        location = new_location(nodes)
        start = time.perf_counter()
        fill(location, nodes, cases)
        print(f"  {backend}: {nodes} nodes x {cases} cases filled in "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
        for name, argv in operations(location).items():
            times.setdefault(name, []).append(timed(argv))
    return times


def table(results: dict[str, dict[str, list[float]]], sizes: list[int]) -> str:
    head = ["backend", "operation", *(f"{n} nodes" for n in sizes),
            *(f"x{sizes[i + 1] // sizes[i]} growth" for i in range(len(sizes) - 1))]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for backend, times in results.items():
        for name, row in times.items():
            growth = [row[i + 1] / row[i] if row[i] else math.inf for i in range(len(row) - 1)]
            lines.append(" | ".join([backend, name, *(f"{t:.3f} s" for t in row),
                                     *(f"{g:.1f}" for g in growth)]))
    return "\n".join(lines)


def main_bench() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--backend", nargs="+", choices=("sqlite", "postgresql"),
                        default=["sqlite", "postgresql"])
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="accelbench-growth-") as tmp:
        if "sqlite" in args.backend:
            results["sqlite"] = measure(
                "sqlite", lambda n: str(Path(tmp) / f"fleet-{n}.sqlite"), args.nodes,
                args.cases)
        if "postgresql" in args.backend:
            cluster = _pgcluster.start()
            try:
                results["postgresql"] = measure(
                    "postgresql", lambda n: cluster.url(cluster.create_database(f"fleet{n}")),
                    args.nodes, args.cases)
            finally:
                cluster.stop()
    print(table(results, args.nodes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_bench())
