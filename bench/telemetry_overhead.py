"""Does sampling telemetry beside a case slow down what the case measures?

Measures accelbench's GEMM figure (a mid-size fp32 GEMM on the CPU by default, as
bench/harness_overhead.py does) with telemetry on (`--telemetry-interval 0.05`, the
sampler thread reading power, energy counters, clocks and load every 50 ms) against
telemetry off (`--no-telemetry`), each an `accelbench run` of its own, alternating rounds
in one run of this script so that drift of the machine hits both alike. Prints the ratio
on / off per round, its median (goal: at least 0.99) and the spread of each method across
rounds.

    python bench/telemetry_overhead.py [--device cpu] [--shape 1024] [--rounds 7]

Why 0.99. The sampler sleeps between readings and reads a handful of small files or
driver counters each time, so beside a case it should cost well under 1% of one core;
a per-call cost or a lock taken inside the timed region would show up as more. Exits
0 when the goal is met and 1 when it is not; on a host busy with other work, where the
rounds spread more than the goal allows, a miss is inconclusive (exit 2): when half the
rounds or more were measured on a busy host (accelbench's own contention check), or when
the runs with telemetry on stored no series at all (nothing on this host could be read,
so its cost was not measured).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _rounds import alternate, verdict

GOAL = 0.99
INTERVAL_S = 0.05
EXIT_INCONCLUSIVE = 2


@dataclass
class Tally:
    """What the rounds saw beside the figures."""

    busy: int = 0  # runs whose case was measured on a busy host
    busy_because: str = ""
    sampled: int = 0  # runs with telemetry on whose record holds a series


def measure(command: list[str], telemetry: bool, tally: Tally) -> float:
    """One `accelbench run` of the GEMM case; its throughput (FLOP/s)."""
    flags = ["--telemetry-interval", str(INTERVAL_S)] if telemetry else ["--no-telemetry"]
    done = subprocess.run([*command, *flags], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"accelbench run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    (m,) = json.loads(done.stdout)["measurements"]
    if m["status"] != "ok":
        sys.exit(f"accelbench's gemm case was {m['status']}: {m.get('reason')}")
    if m.get("contended"):
        tally.busy += 1
        reasons = [r for h in m.get("hosts", ()) for r in h.get("reasons", ())]
        tally.busy_because = "; ".join(reasons[:2]) or "contended"
    if telemetry and m.get("telemetry"):
        tally.sampled += 1
    return float(next(f["value"] for f in m["figures"] if f["name"] == "throughput"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", default="1024")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="sampling time of the case per method per round")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads per case (default: accelbench's choice)")
    parser.add_argument("--accelbench", default=f"{shlex.quote(sys.executable)} -m accelbench",
                        help="the command that runs accelbench (default: this Python's)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="accelbench-telemetry-") as tmp:
        command = [*shlex.split(args.accelbench), "run", "--bench", "gemm",
                   "-p", f"shape={args.shape}", "--dtype", args.dtype,
                   "--device", args.device, "--max-time", str(args.seconds),
                   "--store", str(Path(tmp) / "runs.sqlite"), "--no-report", "--json"]
        if args.threads:
            command += ["--threads", str(args.threads)]
        print(f"gemm {args.shape} {args.dtype} on {args.device}, {args.rounds} rounds, "
              f"telemetry every {INTERVAL_S:g} s against none")
        print(f"{'round':>5} {'telemetry GFLOP/s':>20} {'none GFLOP/s':>20} {'ratio':>7}")
        on, off = Tally(), Tally()
        with_telemetry, without = alternate(
            args.rounds,
            lambda: measure(command, True, on),
            lambda: measure(command, False, off),
            scale=1e9,
        )
    code = verdict(with_telemetry, without, GOAL, names=("telemetry on", "off"))
    busy = on.busy + off.busy
    if busy:
        print(f"{busy} of {2 * args.rounds} runs were measured on a busy host, e.g.: "
              f"{on.busy_because or off.busy_because}")
    if code == 0:
        return 0
    if not on.sampled:
        print("inconclusive: the runs with telemetry on stored no series (no source could be "
              "read on this host), so its cost was not measured")
        return EXIT_INCONCLUSIVE
    if busy >= args.rounds:  # half of the 2 * rounds runs, or more
        print("inconclusive: half the runs or more were measured on a busy host, where the "
              "rounds spread more than the goal allows; run it on an idle one")
        return EXIT_INCONCLUSIVE
    return code


if __name__ == "__main__":
    sys.exit(main())
