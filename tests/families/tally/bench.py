"""The declaration and the measure function of `tally`."""

from __future__ import annotations

from typing import Any

from accelbench.core.measurement import CaseFailed, CaseResult, Figure, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

KNOWN = {1000: 168, 10_000: 1229, 100_000: 9592}  # pi(n), to check the sieve


def primes_below(n: int) -> int:
    sieve = bytearray([1]) * n
    sieve[:2] = b"\0\0"
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, n, i)))
    return sum(sieve)


def measure(ctx: Any, params: dict[str, Any]) -> CaseResult:
    n = params["n"]
    found = primes_below(n)
    if n in KNOWN and found != KNOWN[n]:
        raise CaseFailed(f"{found} primes below {n}, expected {KNOWN[n]}")
    timing = ctx.time(lambda: primes_below(n))
    return CaseResult(timing, rates=(Rate("numbers", float(n), "item/s"),),
                      figures=(Figure("primes", float(found), "", True),),
                      details={"primes": found})


BENCHMARK = Benchmark(
    name="tally",
    family="tally",
    summary="primes below n, counted with a sieve",
    entry="tally.bench:measure",
    params=(Param("n", "int", 10_000, minimum=2, help="count the primes below this"),),
    devices=("cpu", "cuda"),
    timeout_s=60.0,
    views=("tally.view:sections",),
)
