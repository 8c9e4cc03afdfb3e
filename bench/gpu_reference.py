"""Do accelbench's GPU headline figures agree with plain PyTorch, and with the device?

Reads a stored run of the quick suite (`accelbench run --suite quick`), measures the same
operations again with plain PyTorch on the same GPU (CUDA events around back-to-back
calls, the median over blocks), and prints each headline figure beside its reference,
their ratio and the range expected for the device (gpu_expectations.py):

- bf16 GEMM 8192³ (torch.matmul into an output buffer, B column-major as nn.Linear's
  weight, as accelbench lays it out), FLOP/s;
- device-to-device copy of 1 GiB (tensor.copy_; read and write both counted), B/s;
- pinned host-to-device copy of 256 MiB (tensor.copy_, non_blocking), B/s;
- eager launch latency (x.add_(1) on a one-element tensor), s per launch;
- CUDA/HIP graph replay latency (the same op captured in a graph), s per replay;

and then the device's energy counter against the integral of its power readings on a 2 s
and a 10 s window of bf16 GEMM load (gpu_energy.py; skipped by --no-energy).

Every figure it prints is also stored, in the same store, as a run of its own: the
reference figures (`gpu-reference` cases, each with accelbench's figure, their ratio and
the verdict) and the energy windows (`gpu-energy` cases).

    python bench/gpu_reference.py --store RESULTS.sqlite [--run latest|any|RUN]
        [--json FILE] [--no-energy] [--dry-run]

--run any takes each headline figure from the newest run in the store that has its case.
--dry-run measures on the CPU with PyTorch's CUDA calls faked (gpu_dry.py), small sizes
and short energy windows of a faked constant draw, and judges nothing: it checks that the
check runs.

Exit codes: 0 every figure passes (a dry run: it ran); 1 a figure is out of range,
disagrees with the reference or is missing; 2 the store or run cannot be used; 4 PyTorch
sees no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_energy import EnergyWindow, measure_energy
from gpu_expectations import (
    COPY_MIB,
    GEMM_N,
    H2D_MIB,
    HEADLINES,
    RATIO_HIGH,
    RATIO_LOW,
    Headline,
    Judgement,
    Row,
    accelbench_figures,
    judge,
    judge_energy,
    product_for,
    render,
    to_dict,
)

EXIT_FAILED, EXIT_INPUT, EXIT_NO_GPU = 1, 2, 4
MIB = 1 << 20
WARMUP_S = 0.2  # seconds of calls before timing: clocks ramp up, libraries pick kernels
BLOCK_S = 0.02  # each block of back-to-back calls lasts about this long
BLOCKS = 9


@dataclass(frozen=True)
class Sizes:
    """The reference's operands: the quick suite's GPU sizes, or a dry run's."""

    gemm_n: int = GEMM_N
    copy_mib: int = COPY_MIB
    h2d_mib: int = H2D_MIB


# A dry run's sizes: the GEMM of the dry run's headline request, the quick suite's CPU
# copy; its windows of energy are short and its draw faked.
DRY_SIZES = Sizes(gemm_n=256, copy_mib=64, h2d_mib=16)
DRY_WINDOWS_S = (1.0, 2.0)
DRY_SETTLE_S = 0.1
DRY_GEMM_N = 128


def per_call(torch: Any, fn: Callable[[], Any]) -> float:
    """Seconds per call: the median over BLOCKS blocks of back-to-back calls, each timed
    by CUDA (HIP) events on the current stream, after WARMUP_S of warm-up calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() - began < WARMUP_S:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) / 1e3, 1e-7)
    number = max(1, min(100_000, math.ceil(BLOCK_S / one)))
    blocks = []
    for _ in range(BLOCKS):
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        blocks.append(start.elapsed_time(end) / 1e3 / number)
    return float(statistics.median(blocks))


def gemm_flops(torch: Any, device: Any, sizes: Sizes) -> float:
    n = sizes.gemm_n
    # Uniform in [-1, 1) as accelbench's inputs (the data moves a power-capped GPU's clock).
    a = torch.rand(n, n, device=device, dtype=torch.bfloat16).mul_(2).sub_(1)
    weight = torch.rand(n, n, device=device, dtype=torch.bfloat16).mul_(2).sub_(1)
    b = weight.t()  # column-major, as accelbench's gemm (and nn.Linear) hands it to BLAS
    out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
    return 2.0 * n**3 / per_call(torch, lambda: torch.matmul(a, b, out=out))


def copy_bandwidth(torch: Any, device: Any, sizes: Sizes) -> float:
    count = sizes.copy_mib * MIB // 4
    src = torch.ones(count, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    return 2.0 * sizes.copy_mib * MIB / per_call(torch, lambda: dst.copy_(src))


def h2d_bandwidth(torch: Any, device: Any, sizes: Sizes) -> float:
    count = sizes.h2d_mib * MIB // 4
    host = torch.ones(count, dtype=torch.float32, pin_memory=True)
    dev = torch.empty(count, device=device, dtype=torch.float32)
    return float(sizes.h2d_mib * MIB) / per_call(
        torch, lambda: dev.copy_(host, non_blocking=True))


def eager_latency(torch: Any, device: Any, sizes: Sizes) -> float:
    x = torch.zeros(1, device=device, dtype=torch.int64)
    return per_call(torch, lambda: x.add_(1))


def graph_latency(torch: Any, device: Any, sizes: Sizes) -> float:
    x = torch.zeros(1, device=device, dtype=torch.int64)
    side = torch.cuda.Stream()  # warm up on a side stream before capture, as documented
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x.add_(1)
    return per_call(torch, graph.replay)


REFERENCES: dict[str, Callable[[Any, Any, Sizes], float]] = {
    "gemm_bf16": gemm_flops,
    "d2d_copy": copy_bandwidth,
    "h2d_pinned": h2d_bandwidth,
    "launch_eager": eager_latency,
    "launch_graph": graph_latency,
}


def measure_references(torch: Any, device: Any, sizes: Sizes = Sizes(),
                       keys: Sequence[str] = tuple(REFERENCES)
                       ) -> tuple[dict[str, float | None], dict[str, str]]:
    """Every reference figure of `keys`; one that fails is None, with the error as its
    note."""
    figures: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    for key in keys:
        try:
            figures[key] = REFERENCES[key](torch, device, sizes)
            torch.cuda.synchronize()
        except Exception as exc:  # one failing reference must not hide the others
            figures[key] = None
            first = (str(exc).splitlines() or [""])[0][:200]
            notes[key] = f"reference: {type(exc).__name__}: {first}"
        finally:
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()  # the buffers of one reference are gone before the next
    return figures, notes


def dry_headlines() -> tuple[Headline, ...]:
    """The headline figures a dry run has on the CPU: the GEMM at its size, the quick
    suite's CPU copy and eager launch (a CPU has no host-to-device copy or graph)."""
    resized: dict[str, tuple[str, dict[str, Any]]] = {
        "gemm_bf16": (f"bf16 GEMM {DRY_SIZES.gemm_n}³", {"shape": str(DRY_SIZES.gemm_n)}),
        "d2d_copy": (f"copy {DRY_SIZES.copy_mib} MiB", {"size_mib": DRY_SIZES.copy_mib}),
    }
    kept = [h for h in HEADLINES if h.key in ("gemm_bf16", "d2d_copy", "launch_eager")]
    return tuple(dataclasses.replace(h, label=resized[h.key][0],
                                     params={**h.params, **resized[h.key][1]})
                 if h.key in resized else h for h in kept)


def newest_first(store: Any, ref: str) -> list[Any]:
    """The stored runs to take the headline figures from: `ref`'s alone, or with "any"
    every run of the store, newest first."""
    if ref != "any":
        return [store.load_run(ref)]
    runs = [store.load_run(r.id) for r in store.list_runs()]
    return sorted(runs, key=lambda r: r.record.started_at, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store the quick suite ran into")
    parser.add_argument("--run", default="latest",
                        help="the run to check (default latest; any: the newest run that has "
                             "each figure)")
    parser.add_argument("--json", metavar="FILE", help="also write the verdict as JSON")
    parser.add_argument("--no-energy", action="store_true",
                        help="skip the energy counter's check (about 20 s of load)")
    parser.add_argument("--dry-run", action="store_true",
                        help="on the CPU, with PyTorch's CUDA calls faked; judges nothing")
    args = parser.parse_args(argv)

    from accelbench.core.device import DeviceInfo
    from accelbench.errors import UserError
    from accelbench.store import Store
    from accelbench.store.location import redact_word

    headlines = dry_headlines() if args.dry_run else HEADLINES
    shown_store = redact_word(args.store)  # a postgresql:// URL's password never printed
    try:
        with Store.open(args.store, create=False) as store:
            runs = newest_first(store, args.run)
    except UserError as exc:
        print(f"gpu_reference: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    measurements = [m for run in runs for m in run.measurements]
    benchmarks = {h.benchmark for h in headlines}
    stored = runs[0] if args.run != "any" else next(
        (r for r in runs if any(m.case.benchmark in benchmarks for m in r.measurements)), None)
    if stored is None:
        print(f"gpu_reference: error: no run of {shown_store} ({args.run}) has a headline "
              "case", file=sys.stderr)
        return EXIT_INPUT
    device = DeviceInfo.from_dict(stored.fingerprint["device"])
    if device.type != "cuda" and not args.dry_run:
        print(f"gpu_reference: error: run {stored.record.id} was measured on {device.name} "
              f"({device.torch_device}), not on a GPU", file=sys.stderr)
        return EXIT_INPUT

    if args.dry_run:
        from gpu_dry import dry_power, dry_torch

        torch: Any = dry_torch()
    else:
        import torch

    if not torch.cuda.is_available():
        print("gpu_reference: no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return EXIT_NO_GPU
    index = device.index or 0
    if not args.dry_run:
        here = torch.cuda.get_device_name(index) if index < torch.cuda.device_count() else None
        if here != device.name:
            print(f"gpu_reference: error: run {stored.record.id} was measured on "
                  f"{device.name} ({device.torch_device}); here that device is "
                  f"{here or 'absent'}", file=sys.stderr)
            return EXIT_INPUT
    torch.cuda.set_device(index)
    sizes = DRY_SIZES if args.dry_run else Sizes()
    plain, plain_notes = measure_references(torch, torch.device("cuda", index), sizes,
                                            [h.key for h in headlines])
    ours, notes = accelbench_figures(measurements, headlines)
    both = {key: "; ".join(n for n in (notes.get(key), plain_notes.get(key)) if n)
            for key in {*notes, *plain_notes}}
    product = None if args.dry_run else product_for(device)
    judgement = judge(product, ours, plain, both, headlines)
    if not args.no_energy:
        if args.dry_run:
            windows, why_none = measure_energy(torch, index, source=dry_power(),
                                               windows=DRY_WINDOWS_S, gemm_n=DRY_GEMM_N,
                                               settle=DRY_SETTLE_S)
        else:
            windows, why_none = measure_energy(torch, index)
        judgement = dataclasses.replace(judgement, energy=judge_energy(windows, why_none))
    else:
        windows = []
    shown = judgement.product or "no expected ranges"
    title = (f"accelbench on {device.name} ({device.torch_device}; {shown}) beside plain "
             f"PyTorch {torch.__version__}")
    if args.dry_run:
        title = "DRY RUN, CPU figures, not judged: " + title
    print(render(judgement, title))
    try:
        with Store.open(args.store) as store:
            run_id = store_reference(store, stored, judgement, headlines, plain, windows,
                                     argv=sys.argv if argv is None else ["gpu_reference.py",
                                                                         *argv])
    except UserError as exc:
        print(f"gpu_reference: error: could not store the figures: {exc}", file=sys.stderr)
        return EXIT_INPUT
    print(f"reference figures stored in {shown_store} as run {run_id}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"run_id": stored.record.id, "reference_run_id": run_id,
                       "device": device.to_dict(), "torch": torch.__version__,
                       "dry_run": args.dry_run, **to_dict(judgement)}, out, indent=2)
    return 0 if judgement.ok or args.dry_run else EXIT_FAILED


def store_reference(store: Any, checked: Any, judgement: Judgement,
                    headlines: Sequence[Headline], plain: dict[str, float | None],
                    windows: Sequence[EnergyWindow], argv: Sequence[str]) -> str:
    """Store the reference's figures and the energy windows as a run of their own, on
    the stack of the run they were checked against; its id."""
    import os
    import socket

    from accelbench.core.case import Case
    from accelbench.core.measurement import STATUS_FAILED, STATUS_OK, Figure, Measurement
    from accelbench.core.names import RUN_COMPLETE, RUN_FAILED
    from accelbench.version import __version__

    record = checked.record
    run_id = store.begin_run(
        fingerprint=checked.fingerprint, fingerprint_id=record.fingerprint_id,
        generation_key=record.generation_key, device=record.device, suite=None,
        argv=[os.path.basename(a) if i == 0 else a for i, a in enumerate(argv)],
        host=socket.gethostname(), accelbench_version=__version__)
    now = time.time()
    rows = dict(zip((h.key for h in headlines), judgement.rows, strict=False))
    failed = 0
    for headline in headlines:
        row = rows[headline.key]
        value = plain.get(headline.key)
        figures: tuple[Figure, ...] = () if value is None else (
            Figure("reference", value, headline.unit, headline.higher_is_better),)
        if row.ours is not None:
            figures += (Figure("accelbench", row.ours, headline.unit,
                               headline.higher_is_better),)
        if row.ratio is not None:
            figures += (Figure("ratio", row.ratio, "", True),)
        expected = f"ratio {RATIO_LOW} to {RATIO_HIGH}" + (
            f"; accelbench {row.expected}" if row.expected != "-" else "")
        details = {"label": f"reference: {headline.label}", "verdict": _verdict_text(row),
                   "expected": expected, "problems": list(row.problems),
                   "notes": list(row.notes)}
        case = Case.make("gpu-reference", "1", "reference",
                         {"figure": headline.key, **dict(headline.params)}, record.device)
        ok = bool(figures)
        failed += not ok
        store.add_measurement(run_id, Measurement(
            case, STATUS_OK if ok else STATUS_FAILED,
            None if ok else "; ".join(row.problems) or "no figure", measured=figures,
            details=details, started_at=now))
    for window, (reading, integral) in (
            (w, pair) for w in windows
            for pair in (("instant", w.instant_j), ("averaged", w.average_j))):
        energy_row = next((r for r in judgement.energy
                    if r.label == f"{reading} power, {window.seconds:.0f} s"), None)
        ratio = window.over(integral)
        figures = tuple(Figure(name, v, unit) for name, v, unit in (
            ("counter", window.counter_j, "J"), ("integral", integral, "J"),
            ("counter/integral", ratio, "")) if v is not None)
        case = Case.make("gpu-energy", "1", "reference",
                         {"reading": reading, "window_s": round(window.seconds, 1)},
                         record.device)
        details = {"label": f"energy: {reading} power, {window.seconds:.1f} s",
                   "verdict": _verdict_text(energy_row) if energy_row is not None else "-",
                   "expected": (f"counter/integral {energy_row.expected}" if energy_row is not None
                                else "-")}
        store.add_measurement(run_id, Measurement(case, STATUS_OK, None, measured=figures,
                                                  details=details, started_at=now))
    store.finish_run(run_id, RUN_FAILED if failed else RUN_COMPLETE)
    return str(run_id)


def _verdict_text(row: Row) -> str:
    verdict = "ok" if row.ok else "FAIL: " + "; ".join(row.problems)
    return verdict + (" (" + "; ".join(row.notes) + ")" if row.notes else "")


if __name__ == "__main__":
    sys.exit(main())
