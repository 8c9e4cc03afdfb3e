"""The declaration of the `tally` family."""

from tally.bench import BENCHMARK

from accelbench.core.family import Family

FAMILY = Family(__package__, (BENCHMARK,), summary="primes below n, counted with a sieve")
