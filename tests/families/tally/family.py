"""The declaration of the `tally` family."""

from accelbench.core.family import Family
from tally.bench import BENCHMARK

FAMILY = Family(__package__, (BENCHMARK,), summary="primes below n, counted with a sieve")
