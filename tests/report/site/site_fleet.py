"""A generated fleet to publish: a few hundred runs over nodes and stacks, written through
the Store API, with a step in one series, a busy host, a failed check, a slow node, an
isolate run and hostile text; and the committed corpora."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.store import RunRecord, Store, StoredRun
from fakes import stored_measurement

FIXTURES = Path(__file__).parents[2] / "fixtures"
GENERATIONS_DB = FIXTURES / "analysis" / "generations-schema1.db"
RESULTS_DB = FIXTURES / "store" / "results-schema1.db"

HOSTILE = "<script>document.documentElement.setAttribute('data-pwned','1')</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"
STACK_A = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
STACK_B = "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.4.0"
NODES_A = ("n01", "n02", "n03", "n04", "n05")
NODES_B = ("n06", "n07", "n08", "n09", HOSTILE)
RUNS_PER_NODE = 28
SHAPES = (1024, 2048, 4096)
STEPPED = ("n02", 1024, 20)  # node, shape, first run of a level 20% lower
BUSY = ("n03", 2048, 10)  # node, shape, run measured on a busy host
DAY = 86400.0
START = 1.75e9


def kern(shape: int, **extra: object) -> Case:
    """A case of a family no view draws for (its run's report is quick to render)."""
    return Case.make("kern", "k1", "synthetic", {"shape": shape, "dtype": "bf16", **extra},
                     "cuda:0")


def _figure(value: float, unit: str = "FLOP/s", higher: bool = True) -> Figure:
    return Figure("throughput" if higher else "time", value, unit, higher, None,
                  value * 0.99, value * 1.01)


def _value(node: int, shape: int, i: int) -> float:
    wobble = 1 + 0.003 * (((node * 7 + shape // 1024 * 3 + i * 5) % 7) - 3)
    return 1e12 * shape / 1024 * (1 + 0.02 * node) * wobble


def _record(run_id: str, host: str, stack: str, started: float, n: int,
            suite: str = "quick", failed: int = 0) -> RunRecord:
    return RunRecord(id=run_id, started_at=started, finished_at=started + 60,
                     status="complete", suite=suite, argv=("run",), device="cuda:0",
                     generation_key=stack, host=host, accelbench_version="0.1.0",
                     fingerprint_id=f"fp-{stack[:3]}", n_ok=n - failed, n_failed=failed,
                     n_skipped=0)


def fleet_runs() -> list[StoredRun]:
    runs = []
    for index, (host, stack) in enumerate(itertools.chain(
            ((h, STACK_A) for h in NODES_A), ((h, STACK_B) for h in NODES_B))):
        for i in range(RUNS_PER_NODE):
            started = START + i * DAY + index * 60
            ms: list[Measurement] = []
            for shape in SHAPES:
                value = _value(index, shape, i)
                if (host, shape) == STEPPED[:2] and i >= STEPPED[2]:
                    value *= 0.8
                hosts = ({"contended": True, "reasons": ["another process used 4 cores"]},) \
                    if (host, shape, i) == BUSY else ()
                ms.append(stored_measurement(kern(shape), "ok", samples=(0.001,) * 5,
                                             figures=(_figure(value),), hosts=hosts,
                                             started_at=started))
            if host == HOSTILE:
                ms.append(stored_measurement(kern(64, tag=HOSTILE_IMG), "ok",
                                             samples=(0.001,) * 5,
                                             figures=(_figure(1e11),), started_at=started))
            failed = 0
            if i == RUNS_PER_NODE - 1:
                # Every node's newest run times a launch: n05's is twice the others'.
                launch = Case.make("launch", "l1", "micro", {"mode": "eager"}, "cuda:0")
                seconds = 1e-5 if host == "n05" else 5e-6 * (1 + 0.01 * index)
                ms.append(stored_measurement(launch, "ok", samples=(seconds,) * 5,
                                             figures=(_figure(seconds, "s", False),),
                                             started_at=started))
                if host == "n04":
                    check = Case.make("numerics", "v1", "validation",
                                      {"op": "matmul", "dtype": "fp32"}, "cuda:0")
                    ms.append(stored_measurement(check, "failed",
                                                 reason="error 0.02 over tolerance 0.001",
                                                 started_at=started))
                    failed = 1
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
            run_id = f"{stamp}-{index:04x}"
            runs.append(StoredRun(_record(run_id, host, stack, started, len(ms),
                                          failed=failed),
                                  {"format_version": 1, "platform": "cuda"}, tuple(ms)))
    runs.append(isolate_run())
    return runs


def isolate_run() -> StoredRun:
    """An `isolate` run across three nodes that named n2 slow (as its tests build it)."""
    from accelbench.benchmarks.isolate.schedule import NODE, Pair
    from accelbench.benchmarks.isolate.settle import SETTLED, settle
    from accelbench.benchmarks.isolate.verdict import PairFigures, judge

    results = [PairFigures(Pair(NODE, f"n{i}", f"n{j}", (i, j)),
                           {"busbw": 1e7 if 2 in (i, j) else 1e10, "p2p_bw": 2e10,
                            "latency": 5e-6})
               for i, j in itertools.combinations(range(3), 2)]
    verdict = replace(judge(results), settled=settle([["n2"]] * 3, ["n2"], SETTLED, 3))
    case = Case.make("isolate", "v1", "collective", {"bytes": 1 << 20, "world_size": 3,
                                                      "backend": "gloo"}, "cpu",
                     ["bytes", "world_size", "backend"])
    m = stored_measurement(case, "ok", figures=(Figure("slowest busbw", 1e7, "B/s"),),
                           details={"nodes": ["n0", "n1", "n2"], "bytes": 1 << 20,
                                    "verdict": verdict.to_dict(), "named": verdict.names()})
    started = START + RUNS_PER_NODE * DAY
    record = replace(_record("20250701-000000-1501", "n0", "CPU | PyTorch 2.6.0", started, 1,
                             suite="isolate"), device="cpu", fingerprint_id="fp-cpu")
    return StoredRun(record, {"format_version": 1, "platform": "cpu"}, (m,))


def fill(location: str | Path, runs: list[StoredRun]) -> None:
    with Store.open(location) as store:
        for i in range(0, len(runs), 100):
            store.import_runs(runs[i:i + 100])
