"""How far can `accelbench explain` be trusted on this machine? Two checks, side by side
in one run of this script, each on two real runs of one case made here:

- `aa`: both runs of the same stack (nothing changed). It counts, over every operator of
  every explanation, how many are marked consistent (beyond every profile of the other
  side, in time and in share of the step) against the most expected by chance where
  nothing changed (`profile.diff.separation_chance`, 1 in 10 with three profiles a side),
  and how often the step itself is (by time alone: a host that drifts between profiles
  moves it). Target: operators at most at the chance rate.
- `planted`: run B with oneDNN held to SSE4.1 (`ONEDNN_MAX_CPU_ISA=SSE41`), which slows
  only the convolutions. Target: the largest mover is `aten::mkldnn_convolution`, marked
  consistent, in every repeat.

    python bench/explain_noise.py                 # both, three repeats each
    python bench/explain_noise.py --repeats 5 --busy 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _rounds import spinning

AA_CASE = ["--bench", "infer", "-p", "model=bert-tiny", "--device", "cpu"]
PLANTED_CASE = ["--bench", "infer", "-p", "model=resnet-tiny", "-p", "batch=1",
                "--device", "cpu"]
RUN = ["--max-time", "0.3", "--repeat", "1", "--no-report", "--quiet"]
PLANTED_ENV = {"ONEDNN_MAX_CPU_ISA": "SSE41"}
PLANTED_OPERATOR = "aten::mkldnn_convolution"


def accelbench(store: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "accelbench", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})}, check=False)
    if done.returncode != 0:
        raise SystemExit(f"accelbench {' '.join(args)}: exit {done.returncode}: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def newest(store: Path) -> str:
    data = json.loads(accelbench(store, "runs", "--json", "--limit", "1"))
    runs = data if isinstance(data, list) else data["runs"]
    return str(runs[0]["id"])


def explained(store: Path, case: list[str], rounds: int, env_b: dict[str, str] | None
              ) -> dict[str, Any]:
    accelbench(store, "run", *case, *RUN)
    a = newest(store)
    accelbench(store, "run", *case, *RUN, env=env_b)
    b = newest(store)
    return dict(json.loads(accelbench(store, "explain", a, b, "--rounds", str(rounds),
                                      "--json")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="profiles of each side")
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside")
    args = parser.parse_args()
    with spinning(args.busy), tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "results.sqlite"
        aa = [explained(store, AA_CASE, args.rounds, None) for _ in range(args.repeats)]
        planted = [explained(store, PLANTED_CASE, args.rounds, PLANTED_ENV)
                   for _ in range(args.repeats)]
    marked = sum(f["operators_consistent"] for f in aa)
    shown = sum(f["operators_total"] for f in aa)
    expected = aa[0]["separation_chance"]
    steps = sum(1 for f in aa if f["step"]["consistent"])
    print(f"A/A ({args.repeats} explanations of {' '.join(AA_CASE[1:4])}, {args.rounds} "
          f"profiles a side, {args.busy} spinning process(es) beside):")
    for f in aa:
        largest = f["largest"] or {}
        print(f"  step B/A {f['step']['ratio']:.3f}  largest mover {largest.get('name')} "
              f"B/A {largest.get('ratio') or float('nan'):.3f} "
              f"{'consistent' if largest.get('consistent') else 'within spread'}")
    print(f"  operators marked consistent: {marked} of {shown} = {marked / shown:.3f} "
          f"(at most by chance where nothing changed: {expected:.2f}; ratio "
          f"{marked / shown / expected:.2f}) -> "
          f"{'met' if marked / shown <= expected else 'NOT met'}")
    print(f"  step marked consistent: {steps} of {len(aa)} (by chance: {expected:.2f})")
    named = sum(1 for f in planted
                if (f["largest"] or {}).get("name") == PLANTED_OPERATOR
                and f["largest"]["consistent"])
    print(f"Planted (ONEDNN_MAX_CPU_ISA=SSE41 on B, {' '.join(PLANTED_CASE[1:6])}):")
    for f in planted:
        largest = f["largest"] or {}
        print(f"  step B/A {f['step']['ratio']:.3f}  largest mover {largest.get('name')} "
              f"B/A {largest.get('ratio') or float('nan'):.3f} "
              f"share {largest.get('share_of_change') or float('nan'):.2f}")
    print(f"  named {PLANTED_OPERATOR}, consistent: {named} of {len(planted)} "
          f"(target: all) -> {'met' if named == len(planted) else 'NOT met'}")


if __name__ == "__main__":
    main()
