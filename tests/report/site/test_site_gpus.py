"""The site's GPU pages: an index of every GPU, linked from every page's navigation, and a
page per GPU with the nodes it has been in, its figures over time and its change points;
written again only when what they are made from changed."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

from markupsafe import escape
from site_fleet import HOSTILE

from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.site import publish
from accelbench.report.site.model import gpu_href
from accelbench.store import Store
from fakes import stored_measurement

MOVER, STAYER = "1654923001005", "1654923001001"
DAY = 86400.0
START = 1.79e9


def _run(store: Store, host: str, serials: list[str], index: int, started: float,
         value: float, gate: list[float] | None = None) -> str:
    """A run with a kernel's figure `value` on device `index`; with `gate`, a gate case of
    the qualify family on cuda:0 instead, measuring `gate[N]` on each device N."""
    fingerprint = {"format_version": 1, "platform": "cuda", "host": {"hostname": host},
                   "device": {"name": "NVIDIA H100 80GB HBM3", "type": "cuda"},
                   "gpus": [{"index": i, "key": s, "uuid": f"GPU-{s}", "serial": s,
                             "product": "NVIDIA H100 80GB HBM3"}
                            for i, s in enumerate(serials)]}
    run_id = store.begin_run(fingerprint=fingerprint,
                             fingerprint_id=f"fp-{host}-{'-'.join(serials)[:40]}",
                             generation_key="NVIDIA H100 | CUDA 12.4 | PyTorch 2.5.1",
                             device=f"cuda:{index}", suite="quick", argv=["run"], host=host,
                             accelbench_version="0.1.0", started_at=started)
    figure = Figure("throughput", value, "FLOP/s", True, None, value * 0.995, value * 1.005)
    if gate is not None:
        store.add_measurement(run_id, stored_measurement(
            Case.make("gate", "1", "qualify", {"figure": "gemm-bf16", "level": 2}, "cuda:0"),
            "ok", figures=tuple(Figure(f"gpu{i}", v, "TFLOP/s") for i, v in enumerate(gate)),
            started_at=started))
    else:
        store.add_measurement(run_id, stored_measurement(
            Case.make("kern", "k1", "synthetic", {"shape": 1024, "dtype": "bf16"},
                      f"cuda:{index}"),
            "ok", samples=(0.001,) * 5, figures=(figure,), started_at=started))
    store.finish_run(run_id, "complete", finished_at=started + 60)
    return run_id


def _fill(path: Path, nights: int = 16) -> None:
    """MOVER in node-a (device 1) for 8 nights, then in node-b (device 0), 20% slower from
    night 10; STAYER in node-a (device 0) throughout; a GPU with a hostile serial once."""
    with Store.open(path) as store:
        for i in range(nights):
            at = START + i * DAY
            wobble = 1 + 0.002 * ((i * 5) % 3 - 1)
            _run(store, "node-a", [STAYER, MOVER if i < 8 else "X"], 0, at, 1e12 * wobble)
            host, index = ("node-a", 1) if i < 8 else ("node-b", 0)
            serials = [STAYER, MOVER] if i < 8 else [MOVER]
            _run(store, host, serials, index, at + 60,
                 1e12 * wobble * (0.8 if i >= 10 else 1.0))
        _run(store, "node-c", [HOSTILE], 0, START - DAY, 1e12)


def _cells(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_site_has_a_page_per_gpu_linked_from_the_overview(tmp_path) -> None:
    store_path = tmp_path / "results.sqlite"
    _fill(store_path)
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        publish(store, out)
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    gpu_pages = {p for p in pages if p.startswith("gpus/")}
    assert gpu_pages == {gpu_href(k) for k in (MOVER, STAYER, "X", HOSTILE)}
    hostile = gpu_href(HOSTILE)
    assert re.fullmatch(r"gpus/[A-Za-z0-9._-]+\.html", hostile) and "<" not in hostile
    overview = (out / "index.html").read_text()
    assert 'href="gpus.html"' in overview
    index = (out / "gpus.html").read_text()
    for key in (MOVER, STAYER):
        assert f'href="{gpu_href(key)}"' in index
    assert HOSTILE not in index and str(escape(HOSTILE)) in index

    mover = (out / gpu_href(MOVER)).read_text()
    text = _cells(mover)
    assert "node-a" in text and "node-b" in text
    assert f"GPU {MOVER} (now in node-b, before in node-a): kern" in text
    assert "fell 20.0% from" in text and "<svg" in mover
    # Each run's point links to the run's page, which the site holds.
    for href in re.findall(r'href="\.\./(runs/[^"]+)"', mover):
        assert (out / html.unescape(href)).is_file()
    assert "fell" not in _cells((out / gpu_href(STAYER)).read_text())


def test_publishing_again_rewrites_only_the_gpu_pages_that_changed(tmp_path) -> None:
    store_path = tmp_path / "results.sqlite"
    _fill(store_path)
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        publish(store, out)
    with Store.open(store_path, create=False) as store:
        again = publish(store, out)
    assert again.written == 0
    stayer, mover = out / gpu_href(STAYER), out / gpu_href(MOVER)
    stayer_before, mover_before = stayer.stat().st_mtime_ns, mover.read_text()
    time.sleep(0.01)
    with Store.open(store_path) as store:
        _run(store, "node-b", [MOVER], 0, START + 30 * DAY, 0.8e12)
    with Store.open(store_path, create=False) as store:
        publish(store, out)
    assert stayer.stat().st_mtime_ns == stayer_before
    assert mover.read_text() != mover_before


def test_a_gpu_page_shows_its_own_figure_of_a_gate_over_every_gpu(tmp_path) -> None:
    """A gate measures every GPU of its node from cuda:0: MOVER's page has its own figure,
    as device 1 of node-a and then device 3 of node-b, and its fall."""
    store_path = tmp_path / "results.sqlite"
    node_b = ["B0", "B1", "B2", MOVER]
    with Store.open(store_path) as store:
        for i in range(16):
            wobble = 1 + 0.002 * ((i * 5) % 3 - 1)
            mine = 700.0 * wobble * (0.8 if i >= 10 else 1.0)
            if i < 8:
                _run(store, "node-a", [STAYER, MOVER], 0, START + i * DAY, 0.0,
                     gate=[650.0 * wobble, mine])
            else:
                _run(store, "node-b", node_b, 0, START + i * DAY, 0.0,
                     gate=[650.0 * wobble] * 3 + [mine])
    out = tmp_path / "site"
    with Store.open(store_path, create=False) as store:
        publish(store, out)
    text = _cells((out / gpu_href(MOVER)).read_text())
    assert (f"GPU {MOVER} (now in node-b, before in node-a): gate figure=gemm-bf16 level=2 "
            "fell 20.0% from") in text
    assert "700 TFLOP/s" in text and "560 TFLOP/s" in text and "650 TFLOP/s" not in text
    assert "fell" not in _cells((out / gpu_href(STAYER)).read_text())
