"""The GPU check's measuring part: its stages, by value, each under its own deadline, and
always a figures table at the end, whatever failed along the way.

scripts/gpu-check.sh sets up the Python that runs accelbench, then calls this. The stages,
most valuable first, with their time limits (each also held to what the budget has left):

  1. fingerprint                 30 s   accelbench env
  2. health                      60 s   accelbench qualify --prologue: the node's health
                                        and its GPU model's level-1 gates, stored
  3. headline figures           150 s   GEMM 8192³ in bf16, fp16, fp8 and tf32; device and
                                        pinned and pageable host copies; eager launch and
                                        graph replay (one worker process per case)
  4. training and inference     120 s   bert-base training in bf16 with its MFU, GPT-2
                                        small inference (the quick suite's GPU cases)
  5. reference and energy        90 s   bench/gpu_reference.py: the headline figures again
                                        with plain PyTorch; the energy counter against the
                                        power integral on a 2 s and a 10 s window; stored
  6. GPU tests                  180 s   pytest -m gpu tests/gpu tests/qualify, but FSDP
  7. (--extended) LLM serving    60 s   a 1B LLaMA under eight concurrent streams
  8. (--extended) FSDP          180 s   tests/gpu/test_gpu_scale.py: FSDP2 on one GPU

then the figures table (bench/gpu_figures.py) of everything in the store, each figure
beside its published peak or the range expected for the device, out-of-range figures
marked. Everything measured goes to OUT/results.sqlite (merge it into another store with
`accelbench merge`); each stage's log to OUT/*.log; the stages' results to
OUT/stages.json; the table to OUT/figures.md.

--dry-run runs the same stages under the same deadlines on the CPU, with a GEMM of 256³
and PyTorch's CUDA calls of the reference faked on the CPU, so the check cannot rot
between chances to run it on a GPU.

    python bench/gpu_check.py --out DIR [--budget S] [--dry-run] [--extended]

ACCELBENCH_GPU_CHECK_STRETCH=F makes every deadline and the budget F times longer (a dry
run on a loaded machine).

Exit codes: 0 every stage passed and every figure is in range; 1 a stage failed, ran out
of time or was not reached, or a figure is out of range; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from gpu_stages import Stage, render, run_stages, write

ROOT = Path(__file__).resolve().parents[1]
EXIT_FAILED, EXIT_USAGE = 1, 2
RESERVE_S = 20.0  # kept for the figures table
DRY_GEMM = "256"  # the dry run's GEMM edge: 8192³ would take a CPU minutes per call
# Every deadline times this factor: for a dry run on a slow or loaded machine (the tests'),
# whose stages must not fail for the machine's speed.
STRETCH = "ACCELBENCH_GPU_CHECK_STRETCH"

HEADLINE_DTYPES = ("bf16", "fp16", "fp8", "tf32")
# One worker process per case and half a second of sampling: the check's figures are a
# health reading, not a study (the quick suite takes three processes a case).
CHECK_TIMING = {"processes": 1, "max_time": 0.5, "warmup_time": 0.1}


def requests(device: str, dry_run: bool) -> dict[str, dict[str, object]]:
    """The runs of stages 3 and 4, as `accelbench run --request` reads them: the quick
    suite's GPU cases (its CPU cases in a dry run), trimmed."""
    from accelbench.core.request import RunRequest

    headline = RunRequest(
        benches=("gemm", "memory", "launch"), dtypes=HEADLINE_DTYPES,
        overrides={"shape": (DRY_GEMM if dry_run else "8192",)}, device=device,
        timing=CHECK_TIMING, no_report=True)
    # memory and launch have no dtype: the dtypes narrow the GEMMs alone
    models = RunRequest(benches=("train", "infer"), device=device,
                        timing={**CHECK_TIMING, "max_time": 1.0}, no_report=True)
    return {"headline": headline.to_dict(), "models": models.to_dict()}


def plan(py: str, out: Path, *, dry_run: bool, extended: bool) -> list[Stage]:
    store = str(out / "results.sqlite")
    device = "cpu" if dry_run else "cuda"
    ab = (py, "-m", "accelbench")
    run_line = r"^\d+ cases, "
    pytest = (py, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider")
    pytest_line = r"(passed|failed|skipped|error|no tests ran)"
    stages = [
        Stage("fingerprint", 30, (*ab, "env", "--device", device), "env.log", r"^Stack: "),
        Stage("health (qualify level 1)", 60,
              (*ab, "qualify", "--prologue", "--device", device, "--store", store),
              "health.log", r"^accelbench qualify level 1: "),
        Stage("headline figures", 150,
              (*ab, "run", "--request", str(out / "headline.json"), "--store", store),
              "headline.log", run_line),
        Stage("training and inference", 120,
              (*ab, "run", "--request", str(out / "models.json"), "--store", store),
              "models.log", run_line),
        Stage("reference and energy", 90,
              (py, str(ROOT / "bench" / "gpu_reference.py"), "--store", store, "--run", "any",
               "--json", str(out / "reference.json"), *(("--dry-run",) if dry_run else ())),
              "reference.log", r"^GPU figures: "),
        Stage("GPU tests (pytest -m gpu)", 180,
              (*pytest, str(ROOT / "tests" / "gpu"), str(ROOT / "tests" / "qualify"),
               "--ignore", str(ROOT / "tests" / "gpu" / "test_gpu_scale.py")),
              "pytest.log", pytest_line),
    ]
    if extended:
        stages += [
            Stage("LLM serving (serve-llm)", 60,
                  (*ab, "run", "--bench", "serve-llm", "-p",
                   "model=llama-tiny" if dry_run else "model=llama-1b",
                   "-p", "dtype=bf16", "-p", "requests=32", "-p", "concurrency=8",
                   "-p", "input_len=256", "-p", "output_len=64", "--device", device,
                   "--store", store, "--no-report"),
                  "serving.log", run_line),
            Stage("training at scale (FSDP2)", 180,
                  (*pytest, str(ROOT / "tests" / "gpu" / "test_gpu_scale.py")),
                  "scale.log", pytest_line),
        ]
    return stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the results folder")
    parser.add_argument("--budget", type=float, default=450.0,
                        help="seconds for every stage and the table (default 450)")
    parser.add_argument("--dry-run", action="store_true",
                        help="the same stages on the CPU, with the GPU calls faked")
    parser.add_argument("--extended", action="store_true",
                        help="add LLM serving and FSDP training at scale at the end")
    args = parser.parse_args(argv)
    if args.budget < 60:
        print("gpu_check: --budget must be 60 seconds or more", file=sys.stderr)
        return EXIT_USAGE
    import json

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.dry_run else "cuda"
    for name, request in requests(device, args.dry_run).items():
        (out / f"{name}.json").write_text(json.dumps(request, indent=2) + "\n",
                                          encoding="utf-8")
    stages = plan(sys.executable, out, dry_run=args.dry_run, extended=args.extended)
    stretch = _stretch()
    if stretch != 1.0:  # a loaded or slow machine: every deadline in proportion
        stages = [dataclasses.replace(s, cap=s.cap * stretch) for s in stages]
        print(f"gpu-check: every deadline stretched {stretch:g}x ({STRETCH})")
    results = run_stages(stages, out, args.budget * stretch, RESERVE_S)
    write(results, out / "stages.json")
    table_ok = _figures(out)
    print()
    print("\n".join(render(results)))
    failed = [r.name for r in results if not r.ok]
    if args.dry_run:  # the CPU's figures: the stages ran or not, nothing is judged
        table_ok = True
        print("\ngpu-check: DRY RUN: the figures are the CPU's and are not judged")
    if failed or not table_ok:
        print(f"\ngpu-check: FAILED ({', '.join(failed) or 'a figure is out of range'})")
        return EXIT_FAILED
    print("\ngpu-check: passed")
    return 0


def _stretch() -> float:
    """The factor of STRETCH (default 1): how much longer every deadline is."""
    raw = os.environ.get(STRETCH, "1")
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 1.0 <= value <= 100.0:
        raise SystemExit(f"gpu_check: {STRETCH} must be a number from 1 to 100, not {raw!r}")
    return value


def _figures(out: Path) -> bool:
    """Print and keep the figures table; whether every figure in it is in range. A table
    that cannot be made says why and counts as a failure."""
    from gpu_figures import figures_table

    try:
        lines, ok = figures_table(out / "results.sqlite")
    except Exception as exc:  # the stages' own table must still print
        lines, ok = [f"figures: could not be read: {type(exc).__name__}: {exc}"], False
    print()
    print("\n".join(lines))
    (out / "figures.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ok


if __name__ == "__main__":
    sys.exit(main())
