"""What publishing again costs: a full `accelbench publish` of a store of many runs, then one
more run and `publish` into the same folder, which renders only what changed (the reports
of finished runs are never rendered again).

Fills a SQLite store with RUNS runs over NODES nodes (the synthetic GEMM records of
bench/store_growth.py, written through the Store API), times the full publish and the
republish after one more run through the CLI's own entry point in this process
(`accelbench.cli.main.main`), and prints both times side by side with their ratio.

    python bench/publish_incremental.py [--runs 1000] [--nodes 8] [--cases 10]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import tempfile
import time
from pathlib import Path

from accelbench.cli.main import main
from accelbench.store import Store, StoredRun
from store_growth import BATCH, fleet_runs, measurement


def runs_over_nodes(runs: int, nodes: int, cases: int) -> list[StoredRun]:
    """`runs` runs of `cases` cases, round robin over `nodes` hosts, a minute apart."""
    out = []
    for i, run in enumerate(fleet_runs(runs, cases)):
        host = f"node{i % nodes:02d}"
        record = dataclasses.replace(run.record, host=host, fingerprint_id=f"fp-{host}")
        out.append(dataclasses.replace(run, record=record,
                                       fingerprint={**run.fingerprint, "host": {"hostname": host}}))
    return out


def one_more(last: StoredRun, n: int) -> StoredRun:
    started = last.record.started_at + 60
    record = dataclasses.replace(last.record, id=f"20250616-{n:06d}-beef", started_at=started,
                                 finished_at=started + 60)
    measurements = tuple(measurement(m.case, n, started) for m in last.measurements)
    return StoredRun(record, last.fingerprint, measurements)


def timed_publish(store: str, folder: Path) -> tuple[float, str]:
    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(["publish", "--store", store, "-o", str(folder)])
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"accelbench publish exited {code}: {sink.getvalue()}")
    return seconds, sink.getvalue().strip().split(": ", 1)[-1]


def main_bench() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--cases", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelbench-publish-") as tmp:
        store = str(Path(tmp) / "results.sqlite")
        runs = runs_over_nodes(args.runs, args.nodes, args.cases)
        with Store.open(store) as opened:
            for i in range(0, len(runs), BATCH):
                opened.import_runs(runs[i:i + BATCH])
        print(f"  {args.runs} runs of {args.cases} cases on {args.nodes} nodes stored",
              file=sys.stderr)
        site = Path(tmp) / "site"
        full, full_pages = timed_publish(store, site)
        with Store.open(store) as opened:
            opened.import_run(one_more(runs[-1], args.runs))
        again, again_pages = timed_publish(store, site)
    print("runs | full publish | after one more run | full / incremental")
    print("--- | --- | --- | ---")
    print(f"{args.runs} | {full:.2f} s ({full_pages}) | {again:.2f} s ({again_pages}) | "
          f"{full / again:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_bench())
