"""Find the largest batch that fits: doubling, then bisecting.

On GPUs a batch fits when two training steps at that size run without an out-of-memory
error (the second allocates the optimizer's state); after an error the cached memory
is given back before the next try.

On the CPU running out of memory does not raise: the kernel kills the process. So the
CPU search never goes near the limit. It measures the peak resident memory of two
steps at two batch sizes, fits a line (fixed cost + cost per sample), and accepts a
batch when the line predicts at most half of the memory that was available when the
case began (shared evenly between the ranks on this node).

Either way the batch is at most MAX_BATCH, and the search stops once the gap between
the largest batch that fit and the smallest that did not is within 1/16 of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accelbench.benchmarks.models.trainer import Trainer

MAX_BATCH = 4096
CPU_MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class Found:
    batch: int
    tried: tuple[tuple[int, bool], ...]  # (batch, fitted), in order
    rule: str


def search(fits: Callable[[int], bool], start: int, limit: int = MAX_BATCH) -> Found:
    """The largest batch in [1, limit] for which `fits` holds, from `start` up or down.

    Assumes `fits` is monotonic (if a batch fits, every smaller one does). Returns
    batch 0 when not even a batch of one fits.
    """
    tried: list[tuple[int, bool]] = []

    def check(batch: int) -> bool:
        ok = fits(batch)
        tried.append((batch, ok))
        return ok

    start = max(1, min(start, limit))
    good, bad = 0, None
    batch = start
    while True:
        if check(batch):
            good = batch
            if batch >= limit:
                break
            batch = min(2 * batch, limit)
        else:
            bad = batch
            break
    if bad is not None and good == 0 and bad > 1:
        # Even the starting batch failed: halve down to one that fits.
        while bad > 1:
            batch = bad // 2
            if check(batch):
                good = batch
                break
            bad = batch
    while bad is not None and good and bad - good > max(1, good // 16):
        middle = (good + bad) // 2
        if check(middle):
            good = middle
        else:
            bad = middle
    return Found(good, tuple(tried), "")


def find_on_device(trainer: Trainer, start: int) -> Found:
    """Search by trying each batch on the GPU (see the module docstring)."""
    found = search(trainer.fits, start)
    return Found(found.batch, found.tried,
                 f"largest batch whose two training steps ran without running out of "
                 f"device memory (at most {MAX_BATCH})")


def find_on_cpu(trainer: Trainer, start: int, ranks_on_node: int = 1) -> Found:
    """Search by a memory model measured on two small batches (see the module docstring)."""
    import psutil

    from accelbench.benchmarks.models.memory import PeakMemory

    budget = psutil.Process().memory_info().rss + (
        CPU_MEMORY_SHARE * psutil.virtual_memory().available / max(1, ranks_on_node))
    small = max(1, start)
    peaks = []
    for batch in (small, 2 * small):
        meter = PeakMemory(trainer.torch, "cpu")
        trainer.fits(batch)
        peaks.append(meter.peak()[0])
    per_sample = max(0.0, (peaks[1] - peaks[0]) / small)
    fixed = peaks[0] - per_sample * small

    def predicted_to_fit(batch: int) -> bool:
        return fixed + per_sample * batch <= budget

    found = search(predicted_to_fit, start)
    return Found(found.batch, found.tried,
                 f"largest batch predicted to stay within {CPU_MEMORY_SHARE:.0%} of the "
                 f"available memory (measured: {fixed / 2**20:.0f} MiB + "
                 f"{per_sample / 2**20:.2f} MiB per sample; at most {MAX_BATCH})")
