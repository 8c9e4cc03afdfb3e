"""The declaration and the measure function of `checksum`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

ALGORITHMS = ("sha256", "blake2b", "md5")
# The digests of b"abc" (FIPS 180-2, RFC 7693, RFC 1321): a wrong hash never scores.
KNOWN = {
    "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    "blake2b": "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
               "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
    "md5": "900150983cd24fb0d6963f7d28e17f72",
}


@dataclass(frozen=True)
class ChecksumParams:
    """The parameters of a checksum case (`BENCHMARK.params`)."""

    algorithm: str
    bytes: int


def measure(ctx: CaseContext, params: ChecksumParams) -> CaseResult:
    found = hashlib.new(params.algorithm, b"abc").hexdigest()
    if found != KNOWN[params.algorithm]:
        raise CaseFailed(f"{params.algorithm}(b'abc') is {found}, not {KNOWN[params.algorithm]}")
    data = bytes(range(256)) * (params.bytes // 256)
    timing = ctx.time(lambda: hashlib.new(params.algorithm, data).digest())
    return CaseResult(timing, rates=(Rate("hashed", float(len(data)), "B/s"),),
                      details={"vector": "abc"})


BENCHMARK = Benchmark(
    name="checksum",
    family="checksum",
    summary="hashlib checked on a published vector, then timed on a buffer",
    entry="checksum.bench:measure",
    params=(Param("algorithm", "str", "sha256", choices=ALGORITHMS, help="the hash"),
            Param("bytes", "int", 1 << 16, minimum=256, help="bytes hashed per call")),
    devices=("cpu", "cuda"),
    timeout_s=60.0,
    typed=ChecksumParams,
)
