"""Host buffers on transparent huge pages (the memory benchmark's CPU buffers)."""

from __future__ import annotations

import gc
import mmap
from pathlib import Path

import pytest
import torch

from accelbench.benchmarks.micro import host_pages

MIB = 1 << 20
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def test_a_tensor_starts_on_a_huge_page_and_outlives_its_mapping_object() -> None:
    tensor = host_pages.huge_page_tensor(3 * MIB // 4, torch.float32)
    assert tensor.dtype == torch.float32 and tensor.shape == (3 * MIB // 4,)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        assert tensor.data_ptr() % host_pages.HUGE_PAGE == 0
        # A view into its mapping: a huge page larger, for the alignment.
        assert tensor.untyped_storage().nbytes() == 3 * MIB + host_pages.HUGE_PAGE
    gc.collect()  # the mapping is held by the tensor alone
    tensor.fill_(2.5)
    assert float(tensor.sum()) == pytest.approx(2.5 * tensor.numel())
    half = host_pages.huge_page_tensor(5, torch.float16)
    assert half.dtype == torch.float16 and half.numel() == 5


def test_without_the_advice_it_is_a_plain_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(mmap, "MADV_HUGEPAGE", raising=False)
    tensor = host_pages.huge_page_tensor(1000, torch.float32)
    assert tensor.numel() == 1000 and tensor.is_contiguous()
    # Its own storage, not a view into a mapping a huge page larger.
    assert tensor.untyped_storage().nbytes() == 4000


def _smaps(path: Path, regions: list[tuple[int, int, int]]) -> None:
    """An smaps file with one mapping per (start, end, AnonHugePages kB), and a mapping
    of a file between them."""
    lines = []
    for start, end, huge_kb in regions:
        lines += [f"{start:x}-{end:x} rw-p 00000000 00:00 0 ",
                  f"Size:            {(end - start) // 1024} kB",
                  f"AnonHugePages:   {huge_kb} kB",
                  "VmFlags: rd wr mr mw me ac hg"]
        lines += ["7f0000000000-7f0000001000 r--p 00000000 08:01 42    /usr/lib/libc.so.6",
                  "AnonHugePages:   999999 kB"]
    path.write_text("\n".join(lines) + "\n", encoding="ascii")


def test_the_share_is_read_from_the_mappings_that_hold_the_buffers(tmp_path: Path) -> None:
    a, b = torch.empty(MIB // 4), torch.empty(MIB // 4)  # 1 MiB each
    smaps = tmp_path / "smaps"
    pa, pb = a.data_ptr(), b.data_ptr()
    # a's mapping has 1 MiB on huge pages; b's none: half of the 2 MiB.
    _smaps(smaps, [(pa - 4096, pa + MIB, 1024), (pb, pb + MIB, 0)])
    assert host_pages.huge_page_share([a, b], str(smaps)) == pytest.approx(0.5)
    # One mapping holding both (the kernel merges neighbours) is counted once.
    low, high = min(pa, pb), max(pa, pb) + MIB
    _smaps(smaps, [(low, high, 2048)])
    assert host_pages.huge_page_share([a, b], str(smaps)) == pytest.approx(1.0)
    assert host_pages.huge_page_share([a], str(tmp_path / "missing")) is None
    assert host_pages.huge_page_share([torch.empty(0)], str(smaps)) is None
    smaps.write_text("not-hex-at-all rw-p\nAnonHugePages: x kB\n\n", encoding="ascii")
    assert host_pages.huge_page_share([a], str(smaps)) == 0.0


@pytest.mark.skipif(not THP.exists() or "[never]" in THP.read_text(),
                    reason="this kernel gives no transparent huge pages")
def test_written_buffers_are_backed_by_huge_pages_here() -> None:
    tensor = host_pages.huge_page_tensor(16 * MIB // 4, torch.float32)
    tensor.fill_(1.0)
    share = host_pages.huge_page_share([tensor])
    assert share is not None and share > 0.5
