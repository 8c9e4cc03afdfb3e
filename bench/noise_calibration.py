"""Is the noise accelbench states true? Runs a suite several times, back to back, each in
its own `accelbench run`, and prints:

  (a) coverage: over every case and every ordered pair of runs, the fraction of the other
      run's headline figures that fall inside this run's stated 95% interval, and the
      same with the intervals the processes alone give (no host-speed floor);
  (b) run-to-run spread: per case, max/min - 1 of its headline figure over the runs;
      the median and the worst, for the micro cases and for all;
  (c) the wall time of each run;
  (d) where the run-to-run spread comes from: each run's common factor (the median, over
      its cases, of how far each case's figure lies from that case's geometric mean over
      the runs) beside the host's speed on the reference work timed around every case
      (`env.host.reference`), the spread left once the common factor is taken out, and
      the spread of the CPU cases had each process run at one host speed (each process's
      value scaled by the reference speed timed beside it).

Goals on a 2-core machine that is otherwise idle, over 4 or more runs of the quick suite:
(a) at least 90%, (b) a median spread of at most 5% over all cases, (c) each run under 3
minutes. Figures flagged contended are counted apart: on a busy host the interval is not
expected to hold, and accelbench says so.

    python bench/noise_calibration.py --runs 4              # quick suite, 4 runs
    python bench/noise_calibration.py --runs 4 -- --device cpu
    python bench/noise_calibration.py --store S.sqlite      # analyse runs already stored
                                        # (only the A/A runs of bench/aa_compare.py's store)
    python bench/noise_calibration.py --accelbench "python -m accelbench"  # another build
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_COVERAGE = 0.90
GOAL_SPREAD = 0.05
GOAL_RUN_S = 180.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of the suite (default 3)")
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--store", help="analyse the runs in this store instead of running")
    parser.add_argument("--accelbench", default=f"{shlex.quote(sys.executable)} -m accelbench",
                        help="the command that runs accelbench (default: this Python's)")
    parser.add_argument("extra", nargs="*", help="more arguments for `accelbench run`")
    args = parser.parse_args(argv)
    if args.store:
        store = Path(args.store)
    else:
        store = Path(tempfile.mkdtemp(prefix="accelbench-noise-")) / "runs.sqlite"
        for i in range(args.runs):
            began = time.monotonic()
            command = [*shlex.split(args.accelbench), "run", "--suite", args.suite,
                       "--store", str(store), "--no-report", *args.extra]
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, check=False)
            print(f"run {i + 1}/{args.runs}: exit {done.returncode}, "
                  f"{time.monotonic() - began:.0f} s", flush=True)
            if done.returncode not in (0, 1):
                print(done.stderr[-2000:], file=sys.stderr)
                return 2
    return report(store)


def report(store_path: Path) -> int:
    from accelbench.store import Store

    roles = store_path.with_suffix(".roles.json")  # written by bench/aa_compare.py
    chosen = set(json.loads(roles.read_text())["aa"]) if roles.exists() else None
    with Store.open(store_path, create=False) as store:
        runs = [store.load_run(r.id) for r in reversed(store.list_runs())
                if chosen is None or r.id in chosen]
    print(f"{len(runs)} runs in {store_path}")
    series: dict[str, list[Any]] = {}
    for run in runs:
        for m in run.measurements:
            if m.ok and m.primary is not None:
                series.setdefault(m.case.key, []).append(m)
    covered = pairs = busy_pairs = busy_covered = 0
    spreads: dict[str, list[float]] = {"micro": [], "all": []}
    worst: tuple[float, str] = (0.0, "")
    for ms in series.values():
        if len(ms) < 2:
            continue
        for earlier, later in itertools.permutations(ms, 2):
            figure, value = earlier.primary, later.primary.value
            if figure.low is None or figure.high is None:
                continue
            inside = figure.low <= value <= figure.high
            if earlier.contended or later.contended:
                busy_pairs += 1
                busy_covered += inside
            else:
                pairs += 1
                covered += inside
        values = [m.primary.value for m in ms]
        spread = max(values) / min(values) - 1.0 if min(values) > 0 else float("inf")
        spreads["all"].append(spread)
        if ms[0].case.family == "micro":
            spreads["micro"].append(spread)
        worst = max(worst, (spread, ms[0].case.label))
    print()
    if pairs:
        print(f"(a) coverage: {covered} of {pairs} other runs' figures inside a run's "
              f"stated 95% interval = {covered / pairs:.0%} (goal >= {GOAL_COVERAGE:.0%})")
        bare = _coverage(series, _without_host_floor)
        print(f"    the same runs' intervals without the host-speed floor: {bare[0]} of "
              f"{bare[1]} = {bare[0] / max(1, bare[1]):.0%}")
    if busy_pairs:
        print(f"    with a contended figure: {busy_covered} of {busy_pairs} "
              f"= {busy_covered / busy_pairs:.0%} (not counted above)")
    for family, values in spreads.items():
        if values:
            print(f"(b) run-to-run spread, {family} cases ({len(values)}): median "
                  f"{statistics.median(values):.1%}, worst {max(values):.1%}"
                  + (f" (goal: median <= {GOAL_SPREAD:.0%})" if family == "all" else ""))
    if worst[1]:
        print(f"    the worst: {worst[1]}")
    durations = [r.record.finished_at - r.record.started_at for r in runs
                 if r.record.finished_at]
    if durations:
        print(f"(c) run wall time: {', '.join(f'{d:.0f} s' for d in durations)} "
              f"(goal: each under {GOAL_RUN_S:.0f} s)")
    _sources(runs)
    ok = (pairs and covered / pairs >= GOAL_COVERAGE
          and spreads["all"] and statistics.median(spreads["all"]) <= GOAL_SPREAD
          and all(d < GOAL_RUN_S for d in durations))
    return 0 if ok else 1


def _without_host_floor(m: Any) -> Any:
    """`m` as if no host-speed spread had been recorded beside it."""
    import dataclasses

    from accelbench.core.measurement import HOST_SPEED

    details = {k: v for k, v in m.details.items() if k != HOST_SPEED}
    return dataclasses.replace(m, details=details)


def _coverage(series: dict[str, list[Any]], view: Any) -> tuple[int, int]:
    """(a) over uncontended figures, each measurement seen through `view`."""
    covered = pairs = 0
    for ms in series.values():
        for earlier, later in itertools.permutations(ms, 2):
            if earlier.contended or later.contended:
                continue
            figure = view(earlier).primary
            if figure.low is None or figure.high is None:
                continue
            pairs += 1
            covered += figure.low <= later.primary.value <= figure.high
    return covered, pairs


def _sources(runs: list[Any]) -> None:
    """(d): the common factor of each run against the host's reference speed."""
    from accelbench.analysis.host_speed import readings

    logs: dict[str, dict[int, float]] = {}
    for i, run in enumerate(runs):
        for m in run.measurements:
            if m.ok and m.primary is not None and m.primary.value > 0:
                speed = m.primary.value if m.primary.higher_is_better else 1 / m.primary.value
                logs.setdefault(m.case.key, {})[i] = math.log(speed)
    full = [v for v in logs.values() if len(v) == len(runs)]
    if len(runs) < 2 or not full:
        return
    centred = [{i: x - statistics.fmean(v.values()) for i, x in v.items()} for v in full]
    factors = [statistics.median(c[i] for c in centred) for i in range(len(runs))]
    host = []
    for run in runs:
        speeds = [s for m in run.measurements if m.ok and m.case.device == "cpu"
                  for _, s in readings(m)]
        host.append(statistics.fmean(map(math.log, speeds)) if speeds else math.nan)
    known = [h for h in host if math.isfinite(h)]
    middle = statistics.fmean(known) if known else math.nan
    print("(d) run: common factor of its cases | host reference speed (both against the "
          "mean run)")
    for i, (factor, h) in enumerate(zip(factors, host, strict=True)):
        shown = f"{math.exp(h - middle) - 1:+.1%}" if math.isfinite(h) else "-"
        print(f"    run {i + 1}: {math.exp(factor) - 1:+.1%} | {shown}")
    residual = [math.exp(max(c[i] - factors[i] for i in c) - min(c[i] - factors[i] for i in c))
                - 1 for c in centred]
    print(f"    run-to-run spread with the common factor taken out: median "
          f"{statistics.median(residual):.1%} over {len(residual)} cases")
    adjusted = _host_adjusted(runs)
    if adjusted:
        print(f"    CPU cases, each process scaled by its own reference speed: median spread "
              f"{statistics.median(adjusted.values()):.1%} over {len(adjusted)} cases "
              f"(as measured: {statistics.median(_spreads(runs, adjusted)):.1%})")


def _host_adjusted(runs: list[Any]) -> dict[str, float]:
    """Per CPU case timed in several processes: the run-to-run spread of its figure once
    each process's value is scaled by the host's speed on the reference work beside it,
    i.e. what the spread would be if the host had held one speed."""
    from accelbench.analysis.host_speed import readings

    logs: dict[str, list[float]] = {}
    for run in runs:
        for m in run.measurements:
            timed = [t for t in m.timings if t.samples]
            speeds = [s for _, s in readings(m)]
            if (not m.ok or m.case.device != "cpu" or len(timed) < 2
                    or len(speeds) != len(timed)):
                continue
            per_process = [math.log(statistics.median(t.samples)) + math.log(s)
                           for t, s in zip(timed, speeds, strict=True)]
            logs.setdefault(m.case.key, []).append(statistics.fmean(per_process))
    return {key: math.exp(max(v) - min(v)) - 1 for key, v in logs.items()
            if len(v) == len(runs)}


def _spreads(runs: list[Any], keys: dict[str, float]) -> list[float]:
    """The run-to-run spread of the headline figures of the cases in `keys`."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for m in run.measurements:
            if m.case.key in keys and m.ok and m.primary is not None:
                values.setdefault(m.case.key, []).append(m.primary.value)
    return [max(v) / min(v) - 1 for v in values.values() if min(v) > 0]


if __name__ == "__main__":
    sys.exit(main())
