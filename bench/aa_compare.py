"""Does `compare` cry wolf on the same build, and does it see a real change?

A/A: runs a suite N times into one store, each in its own `accelbench run` (same build,
same command), then `accelbench compare` every ordered pair of runs with
`--fail-on-regression 5`, and prints how many case comparisons were called faster or
slower, how many were inconclusive, and how many pairs the gate failed.

The A/A pairs are compared twice: as `compare` does by default (contended figures are
inconclusive), and judging contended figures too (`--judge-contended`), for a host whose
steal time marks most figures contended.

Power (`--power`): then runs the GEMM cases N times on every CPU and N times with the CPU
set halved (`taskset`, the same explicit `--threads`, so the cases keep their identity and
really run about half as fast), and compares every (unchanged, halved) pair, judging
contended figures too: the halved cases must be called slower in every pair. It prints
the smallest change called in every pair. The run ids of each part are kept beside the
store (`runs.roles.json`), so `--store` analyses them again.

Agreement: for every A/A run and case, the figure and interval `accelbench show`,
`accelbench history` and `accelbench compare` print for that run must be the same.

Targets: at most 5% of A/A case comparisons called faster or slower on an idle machine,
none on a busy one (they must be inconclusive), no pair failed by the gate; every halved
case called slower in every pair; show, history and compare agree on every interval.

    python bench/aa_compare.py                          # quick suite, 4 runs, A/A only
    python bench/aa_compare.py --runs 4 --power         # and the power check
    python bench/aa_compare.py --store S.sqlite         # the A/A of runs already stored
    python bench/aa_compare.py --busy 2                 # with 2 spinning processes beside
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GOAL_AA_CALLED = 0.05
GATE_PCT = "5"
POWER_CASES = ["--bench", "gemm", "-p", "shape=512,1024", "-p", "dtype=fp32,fp64"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs a side (default 4)")
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--store", help="analyse the runs in this store instead of running")
    parser.add_argument("--power", action="store_true",
                        help="also run the GEMM cases on half the CPUs and compare")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N processes spinning beside the runs (a busy host)")
    parser.add_argument("--accelbench", default=f"{shlex.quote(sys.executable)} -m accelbench",
                        help="the command that runs accelbench (default: this Python's)")
    args = parser.parse_args(argv)
    cli = shlex.split(args.accelbench)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    try:
        return _main(args, cli)
    finally:
        for spinner in spinners:
            spinner.terminate()


def _main(args: argparse.Namespace, cli: list[str]) -> int:
    if args.store:
        store = Path(args.store)
        roles = _roles(store) or {"aa": _run_ids(cli, store)}
    else:
        store = Path(tempfile.mkdtemp(prefix="accelbench-aa-")) / "runs.sqlite"
        roles = {"aa": [_run(cli, ["--suite", args.suite], store,
                             f"A/A run {i + 1}/{args.runs}") for i in range(args.runs)]}
        _save_roles(store, roles)
    print(f"store: {store}")
    ok = True
    for judge in (False, True):
        ok = _aa(cli, store, roles["aa"], busy=args.busy > 0, judge=judge) and ok
    ok = _agreement(cli, store, roles["aa"]) and ok
    if args.power:
        if "full" not in roles:
            roles.update(_power_runs(cli, store, args.runs))
            _save_roles(store, roles)
        ok = _power(cli, store, roles["full"], roles["halved"]) and ok
    return 0 if ok else 1


def _roles(store: Path) -> dict[str, list[str]]:
    """The run ids of each part (aa, full, halved), as a run of this script saved them."""
    path = store.with_suffix(".roles.json")
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _save_roles(store: Path, roles: dict[str, list[str]]) -> None:
    store.with_suffix(".roles.json").write_text(json.dumps(roles))


def _aa(cli: list[str], store: Path, ids: Sequence[str], *, busy: bool, judge: bool) -> bool:
    """Every ordered pair of the same build; `judge` judges contended figures too (the
    default leaves them inconclusive)."""
    verdicts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    failed_pairs = undecided_pairs = 0
    called: list[str] = []
    for a, b in itertools.permutations(ids, 2):
        code, data = _compare(cli, store, a, b, judge=judge)
        failed_pairs += code == 1
        undecided_pairs += code == 9
        for case in data["cases"]:
            verdicts[case["verdict"]] += 1
            if case["verdict"] in ("faster", "slower"):
                called.append(f"{case['label']}: {case['verdict']} {case['change_pct']:+.1f}%")
            if case["reason"]:
                reasons[case["reason"].split(" (")[0].split(":")[0]] += 1
    total = sum(verdicts.values())
    n_called = verdicts["faster"] + verdicts["slower"]
    pairs = len(ids) * (len(ids) - 1)
    print(f"\nA/A: {len(ids)} runs, {pairs} ordered pairs, {total} case comparisons"
          f"{' (host kept busy)' if busy else ''}"
          f"{', contended figures judged anyway (--judge-contended)' if judge else ''}")
    for name in ("faster", "slower", "same", "inconclusive"):
        print(f"  {name:>12}: {verdicts[name]:4d} ({_share(verdicts[name], total)})")
    for reason, n in reasons.most_common():
        print(f"      inconclusive because {reason}: {n}")
    goal = 0.0 if busy else GOAL_AA_CALLED
    print(f"  called faster or slower: {n_called} = {_share(n_called, total)} "
          f"(target <= {goal:.0%})")
    print(f"  pairs failed by --fail-on-regression {GATE_PCT}: {failed_pairs} of {pairs} "
          f"(target 0); inconclusive (exit 9): {undecided_pairs}")
    for line in sorted(set(called))[:20]:
        print(f"    {line}")
    return total > 0 and n_called <= goal * total and failed_pairs == 0


def _agreement(cli: list[str], store: Path, ids: Sequence[str]) -> bool:
    """The figure and interval of each run's every case, as show, history and compare
    print them: they must be the same."""
    said: dict[tuple[str, str], dict[str, tuple[float | None, float | None, float | None]]] = {}
    for run in ids:
        shown = _json(cli, ["show", run, "--store", str(store), "--json"])
        for m in shown["runs"][0]["measurements"]:
            if m["status"] == "ok" and m["figures"]:
                f = m["figures"][0]
                said.setdefault((run, m["case"]["key"]), {})["show"] = (
                    f["value"], f["low"], f["high"])
    for key in sorted({key for _, key in said}):
        history = _json(cli, ["history", key, "--store", str(store), "--json"])
        for series in history["series"]:
            for point in series["points"]:
                if (point["run"], key) in said:
                    said[(point["run"], key)]["history"] = (point["value"],
                                                            *(point["ci"] or (None, None)))
    for a, b in itertools.permutations(ids, 2):
        _, data = _compare(cli, store, a, b)
        for case in data["cases"]:
            for run, side in ((a, case["a"]), (b, case["b"])):
                if (run, case["key"]) in said:
                    said[(run, case["key"])][f"compare {a} {b}"] = (
                        side["value"], *(side["ci"] or (None, None)))
    differ = [(run, key, got) for (run, key), got in said.items()
              if not _same(list(got.values())) or {"show", "history"} - set(got)]
    print(f"\nAgreement: {len(said)} (run, case) figures with their intervals as show, "
          f"history and compare print them: {len(said) - len(differ)} the same everywhere, "
          f"{len(differ)} not (target 0)")
    for run, key, got in differ[:10]:
        print(f"    {run} {key}: {got}")
    return not differ


def _same(intervals: list[tuple[float | None, float | None, float | None]]) -> bool:
    """The same figure and interval ends (None where a figure states no interval)."""
    first = intervals[0]
    return all(x == y if x is None or y is None else math.isclose(x, y, rel_tol=1e-9)
               for other in intervals[1:] for x, y in zip(first, other, strict=True))


def _json(cli: list[str], args: list[str]) -> Any:
    done = subprocess.run([*cli, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"accelbench {args[0]} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _power_runs(cli: list[str], store: Path, runs: int) -> dict[str, list[str]]:
    """The GEMM cases `runs` times on every CPU, then `runs` times on half of them, with
    as many threads as there are CPUs either way (so the cases keep their identity)."""
    cpus, half = _cpu_sets()
    extra = [*POWER_CASES, "--threads", str(len(cpus))]
    full = [_run(cli, extra, store, f"power: all CPUs, run {i + 1}/{runs}")
            for i in range(runs)]
    halved = [_run(["taskset", "-c", half, *cli], extra, store,
                   f"power: CPUs {half}, run {i + 1}/{runs}") for i in range(runs)]
    return {"full": full, "halved": halved}


def _cpu_sets() -> tuple[list[int], str]:
    cpus = sorted(os.sched_getaffinity(0))
    return cpus, ",".join(str(c) for c in cpus[: max(1, len(cpus) // 2)])


def _power(cli: list[str], store: Path, full: Sequence[str], halved: Sequence[str]) -> bool:
    """Every (all CPUs, half the CPUs) pair, contended figures judged too: a host whose
    steal time marks most figures contended would otherwise leave every pair
    inconclusive, which says nothing about the test's power."""
    cpus, half = _cpu_sets()
    changes: dict[str, list[tuple[str, float]]] = {}
    for a, b in itertools.product(full, halved):
        _, data = _compare(cli, store, a, b, judge=True)
        for case in data["cases"]:
            changes.setdefault(case["label"], []).append((case["verdict"],
                                                          case["change_pct"]))
    print(f"\nPower: {len(full)} runs on all {len(cpus)} CPUs against {len(halved)} on CPUs "
          f"{half}, {len(cpus)} threads each, {len(full) * len(halved)} pairs "
          "(--judge-contended)")
    every_pair = []
    for label, results in sorted(changes.items()):
        slower = sum(v == "slower" for v, _ in results)
        mean = sum(c for _, c in results) / len(results)
        print(f"  {label}: called slower in {slower} of {len(results)}, change {mean:+.0f}%")
        if slower == len(results):
            every_pair.append(abs(max(c for _, c in results)))
    if every_pair:
        print(f"  smallest change called slower in every pair: {min(every_pair):.0f}%")
    big = [label for label, results in changes.items()
           if all(c <= -40 for _, c in results)]
    missed = [label for label in big
              if not all(v == "slower" for v, _ in changes[label])]
    print(f"  cases halved (-40% or more in every pair): {len(big)}; "
          f"not called slower in every pair: {len(missed)} (target 0)")
    return bool(big) and not missed


def _run(cli: list[str], extra: list[str], store: Path, what: str) -> str:
    began = time.monotonic()
    command = [*cli, "run", *extra, "--store", str(store), "--no-report", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    print(f"{what}: exit {done.returncode}, {time.monotonic() - began:.0f} s", flush=True)
    if done.returncode not in (0, 1):
        sys.exit(f"accelbench run failed: {done.stderr[-2000:]}")
    return str(json.loads(done.stdout)["run_id"])


def _run_ids(cli: list[str], store: Path) -> list[str]:
    done = subprocess.run([*cli, "runs", "--store", str(store), "--json"], capture_output=True,
                          text=True, check=True)
    return [r["id"] for r in reversed(json.loads(done.stdout))]


def _compare(cli: list[str], store: Path, a: str, b: str, *, judge: bool = False
             ) -> tuple[int, dict[str, Any]]:
    command = [*cli, "compare", a, b, "--store", str(store), "--json",
               "--fail-on-regression", GATE_PCT, *(["--judge-contended"] if judge else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1, 9):
        sys.exit(f"accelbench compare failed: {done.stderr[-2000:]}")
    return done.returncode, json.loads(done.stdout)


def _share(n: int, total: int) -> str:
    return f"{n / total:.1%}" if total else "-"


def _spin() -> None:
    while True:
        pass


if __name__ == "__main__":
    sys.exit(main())
