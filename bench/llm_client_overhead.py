"""How fast is the LLM load generator, and how much error does it add to the times it
records?

Against the null engine (accelbench.benchmarks.llm.nullserver, in its own process, pinned
to another core than the client where there is one), with the load generator pinned to
one core, each through `client.run_load` as a run drives it:

1. Request rate: 1-token requests, all at once, at most `--concurrency` in flight:
   requests completed per second, and per CPU second of the client (its ceiling on a
   whole core, whatever the server's speed).
2. Token rate: 256-token streams, 8 in flight: output tokens per second, and per client
   CPU second.
3. Timestamp error: a server that waits `--delay` before each token, a Poisson load well
   below the ceiling: the client's TTFT p50 and p99 minus the server's own (from the
   request's arrival in its handler to the first chunk's write). Target: p99 < 1 ms.
   Beside it, the same for a plain client written here (raw asyncio streams, a request
   written by hand on a fresh connection, timed from its write to the first `data:`
   line): what the machine itself adds (scheduling, loopback, the server's parsing),
   which no client in Python avoids.

Each is measured idle and with every core busy (a spinning process per core), in
alternating rounds; prints each round's figures and the ratio busy/idle of the medians.
A client whose CPU time is close to its wall time was saturated; a server at a whole core
means the rates are the server's, and the per-CPU-second figures are the client's.

    python bench/llm_client_overhead.py [--rounds 2] [--requests 2000] [--error-tokens 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator

import numpy as np
import psutil

from _rounds import spinning
from accelbench.benchmarks.llm.client import LoadOutcome, LoadPlan, run_load
from accelbench.benchmarks.llm.workload import Arrivals, arrival_offsets

TARGET_P99_ERROR_S = 1e-3


@contextlib.contextmanager
def null_server(delay: float, cpu: int | None) -> Iterator[tuple[str, psutil.Process]]:
    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    with subprocess.Popen([sys.executable, "-m", "accelbench.benchmarks.llm.nullserver",
                           "--delay", str(delay)], stdout=subprocess.PIPE, text=True,
                          preexec_fn=pin) as process:
        try:
            assert process.stdout is not None
            yield process.stdout.readline().strip(), psutil.Process(process.pid)
        finally:
            process.terminate()
            process.wait(10)


def server_ttft(url: str) -> list[float]:
    with urllib.request.urlopen(f"{url}/null/stats", timeout=10) as answer:
        return [float(t) for t in json.load(answer)["ttft"]]


def reset(url: str) -> None:
    request = urllib.request.Request(f"{url}/null/reset", method="POST", data=b"")
    urllib.request.urlopen(request, timeout=10).close()


def plan(url: str, n: int, max_tokens: int, concurrency: int,
         offsets: list[float] | None = None) -> LoadPlan:
    return LoadPlan(url, "completions", "null", tuple(f"w1 w2 w{i % 500}" for i in range(n)),
                    (max_tokens,) * n, (False,) * n,
                    tuple(offsets) if offsets is not None else (0.0,) * n,
                    concurrency=concurrency, request_timeout=60, stall_timeout=30)


def loaded(url: str, server: psutil.Process, the_plan: LoadPlan, cpu: int
           ) -> tuple[LoadOutcome, float, float]:
    """The outcome, the client's CPU share and the server's over the load."""
    before = server.cpu_times()
    started = time.perf_counter()
    outcome = run_load(the_plan, deadline=300, cpu=cpu)
    wall = time.perf_counter() - started
    after = server.cpu_times()
    failed = [r.error for r in outcome.records if not r.ok]
    if outcome.error or failed:
        raise SystemExit(f"the load failed: {outcome.error or failed[0]}")
    client_share = (outcome.client_cpu_s or 0.0) / (outcome.client_wall_s or 1.0)
    server_share = (after.user + after.system - before.user - before.system) / wall
    return outcome, client_share, server_share


def request_rate(args: argparse.Namespace, cpus: tuple[int, int | None]) -> dict[str, float]:
    with null_server(0.0, cpus[1]) as (url, server):
        outcome, client, busy_server = loaded(
            url, server, plan(url, args.requests, 1, args.concurrency), cpus[0])
    n = len(outcome.records)
    return {"request/s": n / outcome.duration,
            "request/client-cpu-s": n / (outcome.client_cpu_s or float("nan")),
            "client cpu share": client, "server cpu share": busy_server}


def token_rate(args: argparse.Namespace, cpus: tuple[int, int | None]) -> dict[str, float]:
    with null_server(0.0, cpus[1]) as (url, server):
        outcome, client, busy_server = loaded(url, server, plan(url, 64, 256, 8), cpus[0])
    tokens = sum(r.output_tokens or 0 for r in outcome.records)
    return {"token/s": tokens / outcome.duration,
            "token/client-cpu-s": tokens / (outcome.client_cpu_s or float("nan")),
            "client cpu share": client, "server cpu share": busy_server}


def timestamp_error(args: argparse.Namespace, cpus: tuple[int, int | None]
                    ) -> dict[str, float]:
    offsets = arrival_offsets(args.error_requests, Arrivals(args.rate), seed=0)
    with null_server(args.delay, cpus[1]) as (url, server):
        reset(url)
        outcome, client, _ = loaded(url, server, plan(url, len(offsets), args.error_tokens, 0,
                                                      offsets), cpus[0])
        theirs = np.array(server_ttft(url))
    ours = np.array([r.ttft for r in outcome.records if r.ttft is not None])
    late = np.array([r.sent - r.scheduled for r in outcome.records])
    return {"ttft p50 error ms": 1e3 * (np.percentile(ours, 50) - np.percentile(theirs, 50)),
            "ttft p99 error ms": 1e3 * (np.percentile(ours, 99) - np.percentile(theirs, 99)),
            "server ttft p50 ms": 1e3 * float(np.percentile(theirs, 50)),
            "send lag p99 ms": 1e3 * float(np.percentile(late, 99)),
            "client cpu share": client}


def _plain_client(url: str, offsets: list[float], tokens: int) -> list[float]:
    """TTFTs of a minimal client: the floor of the timestamp error on this machine."""
    import asyncio

    host, port = url.split("//")[1].split(":")
    body = json.dumps({"model": "null", "prompt": "w1 w2 w3", "max_tokens": tokens,
                       "stream": True}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: "
               f"application/json\r\nConnection: close\r\nContent-Length: {len(body)}"
               "\r\n\r\n").encode() + body
    ttfts: list[float] = []

    async def one() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        sent = time.perf_counter()
        writer.write(request)
        while not (await reader.readline()).startswith(b"data:"):
            pass
        ttfts.append(time.perf_counter() - sent)
        await reader.read()  # to the stream's end
        writer.close()

    async def load() -> None:
        t0, tasks = time.perf_counter(), []
        for offset in offsets:
            if (wait := t0 + offset - time.perf_counter()) > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.ensure_future(one()))
        await asyncio.gather(*tasks)

    asyncio.run(load())
    return ttfts


def plain_error(args: argparse.Namespace, cpus: tuple[int, int | None]) -> dict[str, float]:
    offsets = arrival_offsets(args.error_requests, Arrivals(args.rate), seed=0)
    with null_server(args.delay, cpus[1]) as (url, _):
        reset(url)
        done = subprocess.run([sys.executable, __file__, "--plain-client", url,
                               json.dumps(offsets), "--cpu", str(cpus[0]),
                               "--error-tokens", str(args.error_tokens)],
                              capture_output=True, text=True, timeout=120, check=True)
        theirs = np.array(server_ttft(url))
    ours = np.array(json.loads(done.stdout))
    return {"ttft p50 error ms": 1e3 * (np.percentile(ours, 50) - np.percentile(theirs, 50)),
            "ttft p99 error ms": 1e3 * (np.percentile(ours, 99) - np.percentile(theirs, 99))}


def measure(what: Callable[..., dict[str, float]], busy: bool, args: argparse.Namespace,
            cpus: tuple[int, int | None]) -> dict[str, float]:
    if not busy:
        return what(args, cpus)
    with spinning(os.cpu_count() or 1):
        return what(args, cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=2000, help="for the request rate")
    parser.add_argument("--concurrency", type=int, default=32, help="for the request rate")
    parser.add_argument("--rate", type=float, default=50.0, help="request/s, timing error")
    parser.add_argument("--error-requests", type=int, default=200)
    parser.add_argument("--error-tokens", type=int, default=4,
                        help="tokens per request, timing error (more: more streams at once)")
    parser.add_argument("--delay", type=float, default=0.01, help="s per token, timing error")
    parser.add_argument("--plain-client", nargs=2, metavar=("URL", "OFFSETS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_client:
        if args.cpu is not None:
            os.sched_setaffinity(0, {args.cpu})
        print(json.dumps(_plain_client(args.plain_client[0], json.loads(args.plain_client[1]),
                                       args.error_tokens)))
        return 0

    cores = sorted(os.sched_getaffinity(0))
    cpus = (cores[0], cores[1] if len(cores) > 1 else None)
    print(f"load generator on CPU {cpus[0]}, null server on "
          f"{'CPU ' + str(cpus[1]) if cpus[1] is not None else 'the same CPU'}; "
          f"{len(cores)} CPUs; busy = {os.cpu_count()} spinning processes; "
          f"{args.rounds} rounds")
    code = 0
    for name, what in (("request rate", request_rate), ("token rate", token_rate),
                       ("timestamp error", timestamp_error),
                       ("timestamp error of a plain asyncio client", plain_error)):
        results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for i in range(args.rounds):
            for busy in ((False, True) if i % 2 == 0 else (True, False)):
                figures = measure(what, busy, args, cpus)
                results[busy].append(figures)
                print(f"{name}, round {i + 1}, {'busy' if busy else 'idle'}: " + ", ".join(
                    f"{k} {v:.3g}" for k, v in figures.items()))
        print(f"{name}: median over rounds")
        print(f"{'':>26} {'idle':>10} {'busy':>10} {'busy/idle':>10}")
        for key in results[False][0]:
            idle = statistics.median(f[key] for f in results[False])
            busy_ = statistics.median(f[key] for f in results[True])
            ratio = busy_ / idle if idle else float("nan")
            print(f"{key:>26} {idle:>10.3g} {busy_:>10.3g} {ratio:>10.3f}")
            if key == "ttft p99 error ms" and what is timestamp_error:
                met = idle < TARGET_P99_ERROR_S * 1e3
                print(f"idle p99 error {idle:.3f} ms (target < {TARGET_P99_ERROR_S * 1e3:g} ms)"
                      f": {'met' if met else 'NOT met'}")
                code = 0 if met else 1
    return code


if __name__ == "__main__":
    sys.exit(main())
