"""Does `accelbench ab` decide, within a budget, without crying wolf? Three checks on the
quick suite, each an `accelbench ab` on this machine with a budget of 3x the quick suite's
own time, measured first in the same run of this script (one `accelbench run`):

- `aa`: the same environment as both sides. Target: at least 90% of the cases whose
  pairs take turns decided "same", none faster or slower, and `--fail-on-regression 5`
  over those cases exits 0 (the others, which a 2-vCPU host cannot pair steadily, are
  named and their verdicts printed).
- `power`: B's processes lose a tenth of their CPU time (`bench/ab_slowdown.c`, loaded
  with LD_PRELOAD: every millisecond of a process's CPU time, it spins for a ninth of
  what the process ran since), so that whatever B computes takes 1/0.9 as long and its
  speed is 0.9 of A's, in every case alike. Target: at least 90% of the compute-bound
  cases (GEMM, convolution, attention, the models) decided "slower", and no case
  decided "faster". (A CPU cgroup's quota, used before, slowed the cases unevenly: the
  kernel enforces it at its tick, 4 ms at 250 Hz, so 85% of a core in every 10 ms slowed
  one case 4% and the next 13%, and 85% of every 2 ms slowed them all by 30%.)
- `drift`: A/A with two spinning processes started a third of the way through the budget
  and stopped at two thirds (both cores busy for a while). Target: no case faster or
  slower.

It prints each case's verdict, pairs and noise, the shares, and each target as met or
not; with `--busy N`, N more processes spin beside the whole check (a busy host).

    python bench/ab_targets.py aa
    python bench/ab_targets.py power
    python bench/ab_targets.py drift
    python bench/ab_targets.py aa --busy 2
    python bench/ab_targets.py aa --quick-time 170     # skip measuring the quick suite
    python bench/ab_targets.py aa --budget-factor 8    # what a larger budget decides
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

GOAL_SAME = 0.9
GOAL_SLOWER = 0.9
BUDGET_FACTOR = 3.0
SLOWDOWN = 0.10  # the share of B's CPU time taken in the power check
SHIM = Path(__file__).with_name("ab_slowdown.c")
COMPUTE_BOUND = ("gemm", "conv", "attention", "train", "infer", "infer-engine")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("check", choices=("aa", "power", "drift"))
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--quick-time", type=float, metavar="S",
                        help="the suite's time in seconds, instead of measuring it")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N processes spinning beside the whole check")
    parser.add_argument("--max-rounds", type=int, default=20)
    parser.add_argument("--budget-factor", type=float, default=BUDGET_FACTOR, metavar="X",
                        help=f"the budget in times the suite's time (default "
                        f"{BUDGET_FACTOR:g}, the target's)")
    parser.add_argument("--slowdown", type=float, default=100 * SLOWDOWN, metavar="PCT",
                        help=f"power: the share of B's CPU time taken (default "
                        f"{100 * SLOWDOWN:g}%%)")
    parser.add_argument("--accelbench", default=f"{shlex.quote(sys.executable)} -m accelbench",
                        help="the command that runs accelbench (default: this Python's)")
    args = parser.parse_args(argv)
    cli = shlex.split(args.accelbench)
    spinners = [_spinner() for _ in range(args.busy)]
    try:
        with tempfile.TemporaryDirectory(prefix="accelbench-ab-") as tmp:
            return _check(args, cli, Path(tmp))
    finally:
        for spinner in spinners:
            spinner.terminate()


def _check(args: argparse.Namespace, cli: list[str], tmp: Path) -> int:
    store = tmp / "results.sqlite"
    quick = args.quick_time or _suite_time(cli, args.suite, store)
    budget = args.budget_factor * quick
    print(f"{args.suite} suite: {quick:.0f} s; budget {args.budget_factor:g}x: {budget:.0f} s"
          + (f"; {args.busy} spinning process(es) beside" if args.busy else ""), flush=True)
    ab = [*cli, "ab", "--suite", args.suite, "--store", str(store), "--budget", f"{budget:.0f}",
          "--max-rounds", str(args.max_rounds), "--fail-on-regression", "5", "--json",
          "--no-report"]
    stop_drift = None
    if args.check == "power":
        ab += ["--b", str(_slow_python(tmp, args.slowdown / 100))]
    elif args.check == "drift":
        stop_drift = _drift(budget)
    started = time.monotonic()
    done = subprocess.run(ab, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - started
    if stop_drift is not None:
        stop_drift.set()
    if not done.stdout.strip():
        print(done.stderr, file=sys.stderr)
        return 2
    data = json.loads(done.stdout)
    return _report(args.check, data, done.returncode, elapsed, budget)


def _report(check: str, data: dict[str, Any], code: int, elapsed: float,
            budget: float) -> int:
    cases = data["cases"]
    compared = [c for c in cases if c["verdict"] != "not compared"]
    print(f"{data['rounds_run']} rounds in {elapsed:.0f} s (stopped: {data['stopped']}); "
          f"gate exit code {code}")
    print(f"{'case':58} {'verdict':12} {'pairs':>5} {'sd':>7} {'B/A speed':>9} "
          f"{'needed':>6} {'paired':>8} {'s':>5}")
    for c in cases:
        sd = f"{100 * c['sd']:.1f}%" if c.get("sd") is not None else "-"
        speed = f"{c['speedup']:.3f}" if c.get("speedup") is not None else "-"
        seconds = f"{c['seconds']:.0f}" if c.get("seconds") is not None else "-"
        print(f"{c['label'][:58]:58} {c['verdict']:12} {c.get('pairs', '-')!s:>5} {sd:>7} "
              f"{speed:>9} {c.get('pairs_needed') or '-'!s:>6} {c.get('pairing') or '-':>8} "
              f"{seconds:>5}")
    counts: dict[str, int] = {}
    for c in compared:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    print("verdicts: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
          + f" of {len(compared)} compared ({len(cases) - len(compared)} not compared)")
    called = counts.get("faster", 0) + counts.get("slower", 0)
    met = True
    if check in ("aa", "drift"):
        if check == "aa":
            # The cases whose pairs cannot take turns on the same CPUs (a protocol of
            # their own, or two ranks a side) are not counted: on a 2-vCPU host, what the
            # host does between their two processes is in their pairs.
            apart = [c for c in compared if c.get("pairing") in ("sequence", "jobs")]
            steady = [c for c in compared if c not in apart]
            same = sum(1 for c in steady if c["verdict"] == "same")
            share = same / max(1, len(steady))
            print(f"not counted, their pairs one after the other ({len(apart)}): "
                  + ", ".join(f"{c['label'].split()[0]} ({c['pairing']})" for c in apart))
            met &= _target(f"decided same: {same} of {len(steady)} paired in turns = "
                           f"{share:.0%} (target >= {GOAL_SAME:.0%}); of all compared: "
                           f"{counts.get('same', 0)} of {len(compared)}", share >= GOAL_SAME)
            # The gate over the counted cases (what `--fail-on-regression 5` exits with
            # for them alone); the command's own code, over all cases, is printed above.
            steady_code = _gate(steady, data)
            met &= _target(f"gate over the {len(steady)} cases paired in turns: exit code "
                           f"{steady_code} (target 0; over all {len(compared)}: {code})",
                           steady_code == 0)
        met &= _target(f"faster or slower: {called} (target 0)", called == 0)
    else:
        bound = [c for c in compared if c["family"] in ("micro", "models")
                 and c["label"].split()[0] in COMPUTE_BOUND]
        slower = sum(1 for c in bound if c["verdict"] == "slower")
        share = slower / max(1, len(bound))
        met &= _target(f"compute-bound cases decided slower: {slower} of {len(bound)} = "
                       f"{share:.0%} (target >= {GOAL_SLOWER:.0%})", share >= GOAL_SLOWER)
        faster = counts.get("faster", 0)
        met &= _target(f"faster: {faster} (target 0)", faster == 0)
    print(f"time used: {elapsed:.0f} s of a {budget:.0f} s budget")
    return 0 if met else 1


def _gate(cases: list[dict[str, Any]], data: dict[str, Any]) -> int:
    """What `--fail-on-regression` exits with over these cases alone, from the cases the
    command's gate named: 1 where one regressed, else 9 where one may have, else 0."""
    labels = {c["label"] for c in cases}
    if labels & set(data["regressions"]):
        return 1
    return 9 if labels & set(data["undecided"]) else 0


def _target(text: str, ok: bool) -> bool:
    print(f"{'MET' if ok else 'NOT MET'}: {text}", flush=True)
    return ok


def _suite_time(cli: list[str], suite: str, store: Path) -> float:
    started = time.monotonic()
    subprocess.run([*cli, "run", "--suite", suite, "--store", str(store), "--no-report"],
                   capture_output=True, check=False, stdin=subprocess.DEVNULL)
    return time.monotonic() - started


def _slow_python(tmp: Path, fraction: float) -> Path:
    """An interpreter whose processes lose `fraction` of their CPU time: a wrapper that
    preloads `bench/ab_slowdown.c`, compiled here, and starts this Python."""
    if not 0 < fraction < 0.9:
        sys.exit("ab_targets: --slowdown must be above 0 and below 90")
    library = tmp / "ab_slowdown.so"
    compiler = os.environ.get("CC", "cc")
    try:
        built = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(library),
                                str(SHIM)], capture_output=True, text=True, check=False)
        why = (built.stderr.strip().splitlines() or ["it failed"])[-1]
    except OSError as error:
        built, why = None, f"{compiler}: {error.strerror}"
    if built is None or built.returncode != 0:
        sys.exit(f"ab_targets: the power check compiles {SHIM.name} with a C compiler "
                 f"and could not: {why}")
    wrapper = tmp / "slow-python"
    wrapper.write_text(f"#!/bin/sh\nexport ACCELBENCH_SLOWDOWN={fraction:g}\n"
                       f"export LD_PRELOAD={shlex.quote(str(library))}"
                       '${LD_PRELOAD:+:$LD_PRELOAD}\n'
                       f'exec {shlex.quote(sys.executable)} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def _drift(budget: float) -> threading.Event:
    """Two spinning processes from a third of the budget to two thirds of it."""
    stop = threading.Event()

    def run() -> None:
        if stop.wait(budget / 3):
            return
        spinners = [_spinner() for _ in range(2)]
        print(f"drift: 2 spinning processes started at {budget / 3:.0f} s", flush=True)
        stop.wait(budget / 3)
        for spinner in spinners:
            spinner.terminate()
        print("drift: stopped", flush=True)

    threading.Thread(target=run, daemon=True).start()
    return stop


def _spinner() -> multiprocessing.Process:
    process = multiprocessing.Process(target=_spin, daemon=True)
    process.start()
    return process


def _spin() -> None:
    os.nice(0)
    while True:
        pass


if __name__ == "__main__":
    sys.exit(main())
