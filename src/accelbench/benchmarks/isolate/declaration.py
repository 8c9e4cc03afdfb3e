"""The `isolate` benchmark declaration: one case measures every pair of nodes and every
pair of ranks within a node, in passes until its naming holds still, and names the slow
node or link (see `pairs` for what is measured, `schedule` for the rounds, `verdict` for
the rule, `settle` for when it is sure)."""

from __future__ import annotations

from accelbench.benchmarks.collectives.sweep import SizeParam
from accelbench.benchmarks.isolate.pairs import IsolateParams
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

BENCHMARK = Benchmark(
    name="isolate",
    family="isolate",
    summary="Send/recv latency and bandwidth and all-reduce bus bandwidth over every pair of "
    "nodes and of ranks within a node, checked on known data; names the slow node or link",
    entry="accelbench.benchmarks.isolate.pairs:measure",
    params=(
        SizeParam("bytes", "int", 4 << 20,
                  help="message of the bandwidth figures (send/recv both ways at once, "
                  "all-reduce); K/M/G suffixes", minimum=4),
        SizeParam("latency_bytes", "int", 8,
                  help="message of the ping-pong latency; K/M/G suffixes", minimum=4),
        Param("samples", "int", 5, help="timed samples per pair and figure", minimum=1),
        Param("iters", "int", 0,
              help="calls per sample; 0: as many as fill the timing policy's block time, "
              "agreed by the two ranks of a pair", minimum=0),
        Param("warmup", "int", 2, help="calls before timing, per pair and figure", minimum=0),
        Param("serial", "bool", False,
              help="measure one pair at a time (default: rounds of disjoint pairs at once, "
              "which share the fabric)"),
        Param("agree", "int", 3,
              help="passes over every pair in a row that must name the same nodes and "
              "links for the naming to be conclusive", minimum=1, maximum=100),
        Param("max_passes", "int", 10, help="passes at most before it says inconclusive",
              minimum=1, maximum=1000),
        Param("budget", "float", 120.0,
              help="seconds of passes: no pass is begun that would end past it (one "
              "always is), and a naming not settled by then is inconclusive",
              minimum=1.0),
        Param("min_busbw", "float", 0.0,
              help="B/s: a pair below this bandwidth is a slow link (0: no floor; the only "
              "way to call the one link of two nodes slow)", minimum=0.0),
    ),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    distributed=True,
    min_ranks=2,
    sources=("accelbench.benchmarks.isolate.schedule", "accelbench.benchmarks.isolate.verdict",
             "accelbench.benchmarks.isolate.settle"),
    views=("accelbench.benchmarks.isolate.view:sections",),
    typed=IsolateParams,
)
