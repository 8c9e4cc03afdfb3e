"""Does accelbench's engine path slow down what it measures?

Two comparisons on one small BERT in the same process, alternating rounds so that drift
of the machine hits both alike:

1. Latency: accelbench's `infer-engine` case with `engine=onnxruntime` (export, session,
   parity check, single synchronised calls; its p50) against a plain loop of
   `InferenceSession.run` written here, on a session of the same model exported the same
   way, timed call by call (its median). The ratio is in speed: plain p50 / accelbench p50.
2. Offline throughput: accelbench's `serve` case in LoadGen's Offline scenario with
   `engine=onnxruntime` (samples/s as LoadGen reports it) against a plain loop of the same
   batched session calls over the same number of samples.

Prints both figures per round, the ratio accelbench / plain, and the medians (goal: at
least 0.97 for each), with each method's spread across rounds.

    python bench/engines_overhead.py [--rounds 5] [--threads 1] [--seconds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _rounds import alternate, measured, verdict

TARGET = 0.97
MODEL = "bert-base"
SHAPE = "layers=2,hidden=256,heads=4,intermediate=1024"  # BERT-base's layout, narrower
OFFLINE_BATCH = 8


def plain_session(batch: int, seq: int, folder: Path) -> tuple[Any, dict[str, Any]]:
    """A session of the model, exported by torch.onnx as accelbench exports it, and its
    inputs: the plain side of both comparisons."""
    import onnxruntime as ort
    import torch

    from accelbench.benchmarks.models import tasks, zoo
    from accelbench.benchmarks.models.engines.onnxrt import quiet  # the exporter's chatter
    from accelbench.benchmarks.models.engines.wrap import TensorModule

    spec = zoo.get_spec(MODEL, SHAPE)
    torch.manual_seed(0)
    module = TensorModule(spec, zoo.build(spec).eval()).eval()
    ids = tasks.make_batch(torch, spec, batch, seq, 224, torch.device("cpu"), torch.float32,
                           seed=1000).tensors["input_ids"]
    path = folder / f"plain-{batch}.onnx"
    with quiet(), torch.no_grad():
        torch.onnx.export(module, (ids,), str(path), dynamo=True, verbose=False,
                          input_names=["input_ids"], output_names=["output"])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session, {"input_ids": ids.numpy()}


def plain_latency(session: Any, feeds: dict[str, Any], seconds: float) -> float:
    """Calls per second: 1 / the median of single timed session.run calls."""
    for _ in range(5):
        session.run(None, feeds)
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 10:
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 1.0 / statistics.median(times)


def plain_offline(session: Any, feeds: dict[str, Any], seconds: float) -> float:
    """Samples per second of back-to-back batched calls."""
    for _ in range(3):
        session.run(None, feeds)
    calls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        session.run(None, feeds)
        calls += 1
    return calls * OFFLINE_BATCH / (time.perf_counter() - start)


def accelbench_case(name: str, given: dict[str, Any], seconds: float, figure: str) -> float:
    from accelbench.benchmarks import REGISTRY
    from accelbench.core.case import Case
    from accelbench.core.device import DeviceInfo
    from accelbench.core.timing import TimingPolicy
    from accelbench.runner.plan import PlannedCase

    bench = REGISTRY.get(name)
    params = bench.resolve({k: str(v) for k, v in given.items()})
    cpu = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
    case = Case.make(bench.name, bench.version, bench.family, params, "cpu")
    value, _ = measured(PlannedCase(bench, case, params), cpu,
                        TimingPolicy(max_time=2 * seconds, warmup_time=0.2), figure)
    return 1.0 / value if figure == "p50" else value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="per method per round")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    common = {"model": MODEL, "config": SHAPE, "seq": args.seq, "engine": "onnxruntime"}
    with tempfile.TemporaryDirectory() as folder:
        single, single_feeds = plain_session(1, args.seq, Path(folder))
        batched, batched_feeds = plain_session(OFFLINE_BATCH, args.seq, Path(folder))
        print(f"{MODEL} with {SHAPE}, seq {args.seq}, ONNX Runtime on the CPU, "
              f"{args.threads} thread(s); {args.rounds} rounds")
        print("latency, batch 1 (calls/s: 1 / p50)")
        print(f"{'round':>5} {'accelbench':>20} {'plain run loop':>20} {'ratio':>7}")
        ours_l, plain_l = alternate(
            args.rounds,
            lambda: accelbench_case("infer-engine", {**common, "batch": 1}, args.seconds,
                                    "p50"),
            lambda: plain_latency(single, single_feeds, args.seconds))
        code = verdict(ours_l, plain_l, TARGET)
        print(f"offline throughput, batch {OFFLINE_BATCH} (sample/s)")
        print(f"{'round':>5} {'accelbench (LoadGen)':>20} {'plain loop':>20} {'ratio':>7}")
        ours_o, plain_o = alternate(
            args.rounds,
            lambda: accelbench_case("serve", {**common, "scenario": "offline",
                                              "offline_batch": OFFLINE_BATCH,
                                              "min_duration": f"{args.seconds}s"},
                                    args.seconds, "throughput"),
            lambda: plain_offline(batched, batched_feeds, args.seconds))
        code = max(code, verdict(ours_o, plain_o, TARGET))
    return code


if __name__ == "__main__":
    sys.exit(main())
