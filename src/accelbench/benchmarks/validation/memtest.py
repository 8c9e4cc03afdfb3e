"""Device memory test: fill a share of the free memory with patterns, read them back,
count the wrong words (64-bit), in the spirit of the memory tests fleet operators run.

The memory is taken in chunks of 64 MiB, up to `fraction` of what is free (the device's
free memory on a GPU; the available memory on the CPU, at most 256 MiB unless `max_mib`
says otherwise), and fewer where an allocation fails. Each pattern is written to every
chunk, then every chunk is read back against it:

  zeros, ones, 0x5555... and 0xAAAA... (stuck and coupled bits), each word's own index
  and its complement (address lines), and seeded random words (data-dependent faults).

Any wrong word fails the check, with the first addresses (chunk and word) that held one.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.validation.verdict import conclude, exact_verdict
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, CaseSkipped, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor

MIB = 1 << 20
CHUNK_WORDS = 8 * MIB  # 64 MiB of 64-bit words
CPU_CAP_MIB = 256
PATTERNS = ("zeros", "ones", "0x5555", "0xaaaa", "address", "~address", "random")
_CONSTANTS = {"zeros": 0, "ones": -1, "0x5555": 0x5555555555555555,
              "0xaaaa": 0xAAAAAAAAAAAAAAAA - (1 << 64)}
SHOWN_ADDRESSES = 8


def _fraction(value: Any) -> str | None:
    return None if 0 < value < 1 else "must be a fraction between 0 and 1 (exclusive)"


@dataclass(frozen=True)
class MemtestParams:
    """The parameters of a memtest case (`BENCHMARK.params`)."""

    fraction: float
    max_mib: int


def measure(ctx: CaseContext, params: MemtestParams) -> CaseResult:
    import torch

    device = torch.device(ctx.device.torch_device)
    free = free_bytes(torch, device)
    cap = params.max_mib * MIB or (CPU_CAP_MIB * MIB if device.type == "cpu" else None)
    target = int(free * params.fraction)
    if cap is not None:
        target = min(target, cap)
    chunks = _allocate(torch, device, target)
    if not chunks:
        raise CaseSkipped(f"could not allocate even {CHUNK_WORDS * 8 // MIB} MiB of "
                          f"{free / MIB:.0f} MiB free")
    tested = sum(c.numel() for c in chunks) * 8
    wrong_by_pattern: dict[str, int] = {}
    where: list[dict[str, Any]] = []
    for pattern in PATTERNS:
        for index, chunk in enumerate(chunks):
            fill(torch, pattern, chunk, index)
        wrong = 0
        for index, chunk in enumerate(chunks):
            bad = _wrong_words(torch, pattern, chunk, index)
            wrong += int(bad.numel())
            for word in bad[:max(0, SHOWN_ADDRESSES - len(where))].tolist():
                where.append({"pattern": pattern, "chunk": index, "word": int(word),
                              "byte_offset": (index * CHUNK_WORDS + int(word)) * 8})
        wrong_by_pattern[pattern] = wrong
    del chunks
    total = sum(wrong_by_pattern.values())
    bad_patterns = [f"{p}: {n}" for p, n in wrong_by_pattern.items() if n]
    verdict = exact_verdict(
        total, "words",
        f"memory errors: {total} wrong words in {tested / MIB:.0f} MiB "
        f"({', '.join(bad_patterns)}); first at byte offset "
        f"{where[0]['byte_offset'] if where else '?'}",
        extra=(Figure("tested", float(tested), "B"),))
    return conclude(verdict, {
        "free_bytes": free, "fraction": params.fraction, "cap_bytes": cap,
        "tested_bytes": tested, "chunk_bytes": CHUNK_WORDS * 8, "patterns": list(PATTERNS),
        "wrong_words": wrong_by_pattern, "first_wrong": where,
        "free_is": "device memory free" if device.type != "cpu" else "available host memory",
    })


def free_bytes(torch: ModuleType, device: torch.device) -> int:
    """Free device memory; on the CPU, the host memory available to a new allocation."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def _allocate(torch: ModuleType, device: torch.device, target: int) -> list[Tensor]:
    """Chunks up to `target` bytes; one chunk is kept free for the expected values."""
    chunks: list[Tensor] = []
    while (len(chunks) + 2) * CHUNK_WORDS * 8 <= max(target, 2 * CHUNK_WORDS * 8):
        try:
            chunks.append(torch.empty(CHUNK_WORDS, dtype=torch.int64, device=device))
        except RuntimeError:  # out of memory: test what was had
            break
    return chunks


def fill(torch: ModuleType, pattern: str, chunk: Tensor, index: int) -> None:
    """Write `pattern` into the chunk of that index."""
    if pattern in _CONSTANTS:
        chunk.fill_(_CONSTANTS[pattern])
    else:
        chunk.copy_(expected(torch, pattern, chunk, index))


def expected(torch: ModuleType, pattern: str, chunk: Tensor, index: int) -> Tensor:
    """What the chunk must hold after `fill` (a new tensor for address and random
    patterns)."""
    n = chunk.numel()
    if pattern in ("address", "~address"):
        words = torch.arange(index * n, (index + 1) * n, dtype=torch.int64, device=chunk.device)
        return words.bitwise_not_() if pattern == "~address" else words
    if pattern == "random":
        generator = torch.Generator(device=chunk.device).manual_seed(1000 + index)
        return torch.randint(-(1 << 63), (1 << 63) - 1, (n,), generator=generator,
                             dtype=torch.int64, device=chunk.device)
    return torch.full_like(chunk, _CONSTANTS[pattern])


def _wrong_words(torch: ModuleType, pattern: str, chunk: Tensor, index: int) -> Tensor:
    """Indices (on the CPU) of the words that do not hold the pattern."""
    if pattern in _CONSTANTS:
        bad = chunk != _CONSTANTS[pattern]
    else:
        bad = chunk != expected(torch, pattern, chunk, index)
    return bad.nonzero().flatten().cpu()


BENCHMARK = Benchmark(
    name="memtest",
    family="validation",
    summary="Device memory test: a share of the free memory filled with patterns (stuck "
    "bits, address lines, random words) and read back; wrong words counted",
    entry="accelbench.benchmarks.validation.memtest:measure",
    sources=("accelbench.benchmarks.validation.verdict",),
    params=(
        Param("fraction", "float", 0.8, help="share of the free device memory to test, "
              "between 0 and 1", check=_fraction, quiet_default=True),
        Param("max_mib", "int", 0, help=f"at most this many MiB (0: {CPU_CAP_MIB} MiB on the "
              "CPU, no cap on GPUs)", minimum=0),
    ),
    devices=("cpu", "cuda"),
    timeout_s=600.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=MemtestParams,
)
