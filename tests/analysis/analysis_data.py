"""Synthetic stored runs for the analysis tests: a fleet of nodes, a history of runs."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.store import Store
from fakes import stored_measurement

CORPUS = Path(__file__).parents[1] / "fixtures" / "analysis"
FLEET_STACK = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
GEMM_FLOP = 2 * 8192**3
COPY_BYTES = 2 * 1024 * 2**20
SIZES = (2**20, 2**24, 2**28)


def corpus_store(tmp_path: Path) -> Path:
    """A copy of the committed corpus store: opening one may write beside it."""
    path = tmp_path / "generations.sqlite"
    shutil.copyfile(CORPUS / "generations-schema1.db", path)
    return path


def rated(
    case: Case, per_call_s: float, amount: float, unit: str, *, rng: np.random.Generator,
    n: int = 20, noise: float = 0.005, name: str = "throughput", peak: float | None = None,
    extra: Sequence[tuple[str, float, str]] = (),
) -> Measurement:
    """A measurement whose samples scatter around `per_call_s` with relative `noise`."""
    samples = tuple(float(v) for v in per_call_s * (1 + noise * rng.standard_normal(n)))
    median = float(np.median(samples))
    figures = [Figure(name, amount / median, unit, True, peak)]
    figures += [Figure(n2, a / median, u, True) for n2, a, u in extra]
    figures.append(Figure("time", median, "s", higher_is_better=False))
    return stored_measurement(case=case, status="ok", samples=samples, number=10,
                       figures=tuple(figures))


def with_telemetry(
    case: Case, per_call_s: float, amount: float, unit: str, *, rng: np.random.Generator,
    power_w: float | None = None, throttle: bool = False, n: int = 20, noise: float = 0.005,
    name: str = "throughput", processes: int = 1, process_noise: float = 0.005,
) -> Measurement:
    """A measurement as the harness stores it: samples around `per_call_s` and the work
    of one call, so its figures are derived, with each process's telemetry beside it
    (power `power_w`, a throttle bit set in the timed part when `throttle`); no telemetry
    when `power_w` is None. With several `processes`, each scatters by `process_noise`
    around `per_call_s`."""
    from accelbench.core.measurement import Rate
    from accelbench.core.telemetry import GFX_CLOCK_MHZ, POWER_W, THROTTLE, Series
    from accelbench.core.timing import Timing

    timings = []
    for _ in range(processes):
        level = per_call_s * (float(np.exp(process_noise * rng.standard_normal()))
                              if processes > 1 else 1.0)
        samples = tuple(float(v) for v in level * (1 + noise * rng.standard_normal(n)))
        timings.append(Timing(samples, 10, 0, "converged", 0.95))
    telemetry: tuple[dict[str, object], ...] = ()
    if power_w is not None:
        bits = (0, 0, 4, 4, 0, 0) if throttle else (0,) * 6
        series = Series(interval_s=0.05, t=tuple(0.05 * i for i in range(6)),
                        channels={POWER_W: (90.0, *(power_w,) * 4, 90.0),
                                  GFX_CLOCK_MHZ: (2100.0,) * 6, THROTTLE: bits},
                        sources=("nvml",), throttle_names={2: "power cap"},
                        window=(0.05, 0.2))
        telemetry = (series.to_dict(),) * processes
    return Measurement(case, "ok", timings=tuple(timings), rates=(Rate(name, amount, unit),),
                       telemetry=telemetry)


def add_run(store: Store, *, host: str, stack: str, started_at: float,
            measurements: Sequence[Measurement], device: str = "cuda:0",
            request: dict[str, object] | None = None) -> str:
    """One finished run of `measurements`; `request` is what it was asked for (a
    RunRequest's JSON form), None as for a run stored before requests were."""
    fingerprint = {"format_version": 1, "platform": "rocm",
                   "device": {"name": stack.split(" | ")[0], "type": "cuda"},
                   "host": {"hostname": host}}
    run_id = store.begin_run(
        fingerprint=fingerprint, fingerprint_id=f"fp-{host}", generation_key=stack,
        device=device, suite="quick", argv=["run"], host=host, accelbench_version="0.1.0",
        started_at=started_at, request=request,
    )
    for m in measurements:
        store.add_measurement(run_id, m)
    store.finish_run(run_id, "complete", finished_at=started_at + 60)
    return run_id


# -- a fleet of 16 nodes, two of them bad ------------------------------------------------

SLOW_GEMM_NODE = "node05"  # GEMM 20% slow: a compute fault (thermal throttling, clocks)
BAD_NETWORK_NODE = "node12"  # all-reduce bus bandwidth 40% low and unsteady: a link fault


def node_measurements(node: str, rng: np.random.Generator) -> list[Measurement]:
    spread = 1.0 + 0.01 * rng.standard_normal()  # healthy nodes differ by about 1%
    gemm_speed = spread * (0.80 if node == SLOW_GEMM_NODE else 1.0)
    net_speed = spread * (0.60 if node == BAD_NETWORK_NODE else 1.0)
    net_noise = 0.15 if node == BAD_NETWORK_NODE else 0.01
    out = []
    for dtype, rate in (("bf16", 700e12), ("fp16", 720e12)):
        case = Case.make("gemm", "g1", "micro", {"shape": "8192", "dtype": dtype, "batch": 1},
                         "cuda:0")
        out.append(rated(case, GEMM_FLOP / (rate * gemm_speed), GEMM_FLOP, "FLOP/s", rng=rng,
                         peak=1307e12))
    case = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 1024, "pinned": True},
                     "cuda:0")
    out.append(rated(case, COPY_BYTES / (4.0e12 * spread), COPY_BYTES, "B/s", rng=rng,
                     name="bandwidth", peak=5.3e12))
    for size in SIZES:
        busbw = 300e9 * size / (size + 2**22) * net_speed
        case = Case.make("collectives", "c1", "collective",
                         {"op": "all-reduce", "bytes": size, "dtype": "bf16"}, "cuda:0")
        out.append(rated(case, size * 1.75 / busbw, size * 1.75, "B/s", rng=rng, n=15,
                         noise=net_noise, name="busbw", extra=(("algbw", size, "B/s"),)))
    case = Case.make("train", "t1", "model", {"model": "resnet50", "dtype": "bf16", "batch": 256},
                     "cuda:0")
    out.append(rated(case, 256 / (3000 * spread), 256, "sample/s", rng=rng, n=10))
    return out


def make_fleet(path: str | Path, nodes: int = 16, seed: int = 7) -> list[str]:
    """A store (a path or a postgresql:// URL) with one run per node, node01..node16, on one
    stack. Returns the hosts."""
    rng = np.random.default_rng(seed)
    hosts = [f"node{i:02d}" for i in range(1, nodes + 1)]
    with Store.open(path) as store:
        for i, host in enumerate(hosts):
            add_run(store, host=host, stack=FLEET_STACK, started_at=1.75e9 + 60 * i,
                    measurements=node_measurements(host, rng))
    return hosts


# -- a history with known steps ----------------------------------------------------------

HISTORY_STACK = "AMD Instinct MI250X | ROCm 6.2 | PyTorch 2.5.1"
# Level of GEMM throughput per run: improved by 8% at run 12, regressed by 12% at run 24.
HISTORY_LEVELS = [1.0] * 12 + [1.08] * 12 + [1.08 * 0.88] * 8
HISTORY_IMPROVED_AT = 12
HISTORY_REGRESSED_AT = 24


def make_history(path: Path, seed: int = 3) -> list[str]:
    """A store of 32 nightly runs of one machine; returns the run ids, oldest first."""
    rng = np.random.default_rng(seed)
    ids = []
    with Store.open(path) as store:
        for i, level in enumerate(HISTORY_LEVELS):
            run_level = level * (1 + 0.005 * rng.standard_normal())
            gemm = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16",
                                                     "batch": 1}, "cuda:0")
            flop = 2 * 4096**3
            copy = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 256,
                                                       "pinned": True}, "cuda:0")
            ms = [rated(gemm, flop / (150e12 * run_level), flop, "FLOP/s", rng=rng),
                  rated(copy, 2**29 / (1.3e12 * (1 + 0.005 * rng.standard_normal())), 2**29,
                        "B/s", rng=rng, name="bandwidth")]
            ids.append(add_run(store, host="mi250x-07", stack=HISTORY_STACK,
                               started_at=1.7e9 + 86400 * i, measurements=ms))
        # The same case on another stack: a series of its own, not part of this one.
        add_run(store, host="mi250x-07", stack="AMD Instinct MI250X | ROCm 6.3 | PyTorch 2.6.0",
                started_at=1.7e9 + 86400 * 40,
                measurements=[rated(gemm, flop / 170e12, flop, "FLOP/s", rng=rng)])
    return ids


# -- runs measured in several processes, as the suites measure them ----------------------


def in_processes(
    case: Case, per_call_s: float, amount: float, unit: str, *, rng: np.random.Generator,
    processes: int = 3, n: int = 20, noise: float = 0.005, process_noise: float = 0.01,
    name: str = "throughput", over: str = "median", settled: bool = True,
    hosts: Sequence[dict[str, object]] = (),
) -> Measurement:
    """A measurement as the harness stores a case measured in `processes` worker
    processes: each process's samples scatter by `noise` around its own level, which
    scatters by `process_noise` around `per_call_s`; its figures are derived (a rate of
    `amount` per call, and the time)."""
    from accelbench.core.measurement import Rate
    from accelbench.core.timing import Timing

    timings = []
    for _ in range(processes):
        level = per_call_s * float(np.exp(process_noise * rng.standard_normal()))
        samples = tuple(float(v) for v in level * (1 + noise * rng.standard_normal(n)))
        timings.append(Timing(samples, 10, 0, "converged", 0.95, settled))
    return Measurement(case, "ok", timings=tuple(timings), rates=(Rate(name, amount, unit,
                                                                       over=over),),
                       details={"processes": processes}, hosts=tuple(dict(h) for h in hosts))


def gemm_case(dtype: str = "bf16", shape: str = "4096") -> Case:
    return Case.make("gemm", "g1", "micro", {"shape": shape, "dtype": dtype, "batch": 1},
                     "cuda:0")


# B differs from A by these factors in speed, each case measured in three processes with
# 1% between them (the noisy case: 12%).
PROCESS_EFFECTS = {"bf16": 0.90, "fp16": 1.03, "fp32": 1.00, "fp8": 1.12, "int8": 0.94,
                   "fp64": 1.08}
NOISY_DTYPE = "fp64"


def process_pair(path: Path, seed: int = 13) -> tuple[str, str]:
    """A store with run A and run B of one node, B changed by PROCESS_EFFECTS."""
    rng = np.random.default_rng(seed)
    flop = 2 * 4096**3
    ids = []
    with Store.open(path) as store:
        for i, side in enumerate(("a", "b")):
            ms = []
            for dtype, effect in PROCESS_EFFECTS.items():
                speed = effect if side == "b" else 1.0
                spread = 0.12 if dtype == NOISY_DTYPE else 0.01
                ms.append(in_processes(gemm_case(dtype), flop / (100e12 * speed), flop,
                                       "FLOP/s", rng=rng, process_noise=spread))
            ids.append(add_run(store, host="mi300x-01", stack=FLEET_STACK,
                               started_at=1.76e9 + 3600 * i, measurements=ms))
    return ids[0], ids[1]
