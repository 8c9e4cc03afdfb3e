"""Is `accelbench qualify --prologue` fit for a job prologue on this machine? Two targets,
measured in one run of this script:

- time: level 1 finishes in under 30 s on a healthy node (wall time of the whole command,
  start-up, fingerprint and store included);
- headroom: each gate the prologue judges leaves a healthy node room, so the noise of a
  busy host does not fail it: the measured figure over its gate (the gate over the figure
  for a lower-is-better one) is at least 3.

Each repeat runs the command as a scheduler would, into a fresh store, and reads back
what it judged.

    python bench/qualify_prologue.py                 # three repeats, idle
    python bench/qualify_prologue.py --busy 2        # beside two spinning processes
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _rounds import spinning

TARGET_S = 30.0
TARGET_HEADROOM = 3.0


def prologue(store: Path) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "accelbench", "qualify", "--prologue",
                           "--device", "cpu", "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, "ACCELBENCH_STORE": str(store)}, check=False)
    return time.perf_counter() - started, done.returncode, done.stdout.strip()


def headrooms(store: Path) -> dict[str, float]:
    """Each judged subject's figure against its gate, from the stored run."""
    from accelbench.store import Store

    out: dict[str, float] = {}
    with Store.open(store, create=False) as opened:
        run = opened.load_run("latest")
    for m in run.measurements:
        for finding in m.details.get("findings") or []:
            reading = finding.get("reading") or {}
            value, gate = reading.get("value"), reading.get("threshold")
            if not isinstance(value, (int, float)) or not isinstance(gate, (int, float)):
                continue
            if not value or not gate:
                continue
            lower_is_better = "≤" in str(finding.get("rule", "")).split(" (")[0]
            figure = m.case.param_dict.get("figure")
            out[f"{figure} {finding['subject']}"] = gate / value if lower_is_better \
                else value / gate
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside")
    args = parser.parse_args()
    results = []
    with spinning(args.busy):
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as folder:
                store = Path(folder) / "results.sqlite"
                seconds, code, line = prologue(store)
                results.append((seconds, code, line, headrooms(store) if code in (0, 1)
                                else {}))
    print(f"qualify --prologue on the CPU, {args.repeats} repeats, {args.busy} spinning "
          "process(es) beside:")
    for seconds, code, line, rooms in results:
        least = min(rooms.items(), key=lambda kv: kv[1]) if rooms else ("-", float("nan"))
        print(f"  {seconds:5.1f} s  exit {code}  least headroom {least[1]:.1f}x ({least[0]})")
        print(f"    {line}")
    worst = max(r[0] for r in results)
    print(f"  slowest {worst:.1f} s of a {TARGET_S:g} s target (ratio {worst / TARGET_S:.2f}) "
          f"-> {'met' if worst < TARGET_S else 'NOT met'}")
    every = [v for r in results for v in r[3].values()]
    if every:
        print(f"  least headroom {min(every):.1f}x of a {TARGET_HEADROOM:g}x target -> "
              f"{'met' if min(every) >= TARGET_HEADROOM else 'NOT met'}")
    if any(r[1] != 0 for r in results):
        print("  a repeat did not pass: see its line")


if __name__ == "__main__":
    main()
