"""Charts drawn to SVG: parsed back and read for what a reader of the report would see."""

from __future__ import annotations

import math
import re
import warnings
import xml.etree.ElementTree as ET

import pytest

from accelbench.core.units import format_bytes
from accelbench.core.view import (
    Bars,
    BarSeries,
    Chart,
    HeatMap,
    Lines,
    LineSeries,
    Panel,
    TimeSeries,
)
from accelbench.report.charts import bar_chart, draw, line_chart

SVG_NS = "{http://www.w3.org/2000/svg}"
XLINK = "http://www.w3.org/1999/xlink"
BAR_FILLS = re.compile(r"fill:\s*(#[0-9a-f]{6})")


def parse_inline(svg: str) -> ET.Element:
    """The markup as an HTML page holds it: HTML declares the xlink prefix for inline SVG
    itself, so the markup leaves it out; XML needs it said."""
    assert svg.startswith("<svg "), svg[:80]
    wrapper = ET.fromstring(f'<html xmlns:xlink="{XLINK}">{svg}</html>')
    [root] = list(wrapper)
    assert root.tag == "svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [" ".join("".join(el.itertext()).split()) for el in root.iter()
            if el.tag.removeprefix(SVG_NS) == "text"]


def bars(root: ET.Element) -> list[tuple[str, float, float, float, float]]:
    """(fill, x0, y0, x1, y1) of each bar: the filled rectangles clipped to the plot area
    (the backgrounds and legend swatches are not clipped)."""
    found = []
    for el in root.iter():
        if el.tag.removeprefix(SVG_NS) != "path" or "clip-path" not in el.attrib:
            continue
        fill = BAR_FILLS.search(el.get("style", ""))
        numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", el.get("d", ""))]
        if not fill or fill.group(1) == "#ffffff" or len(numbers) != 8:
            continue
        xs, ys = numbers[0::2], numbers[1::2]
        found.append((fill.group(1), min(xs), min(ys), max(xs), max(ys)))
    return found


def ids(root: ET.Element) -> list[str]:
    return [found for el in root.iter() if (found := el.get("id"))]


def test_vertical_bars_one_per_value_with_lengths_in_proportion():
    svg = bar_chart("speed", ["a", "b", "c"], [BarSeries("run", [1.0, 2.0, 4.0])],
                    ylabel="TFLOP/s", title="GEMM throughput")
    root = parse_inline(svg)
    drawn = bars(root)
    assert len(drawn) == 3
    heights = [y1 - y0 for _, _, y0, _, y1 in drawn]
    widths = [x1 - x0 for _, x0, _, x1, _ in drawn]
    assert heights == pytest.approx([heights[0], 2 * heights[0], 4 * heights[0]], rel=1e-3)
    assert max(widths) == pytest.approx(min(widths))
    assert len({y1 for *_, y1 in drawn}) == 1  # all stand on the same baseline
    shown = texts(root)
    for label in ("a", "b", "c", "TFLOP/s", "GEMM throughput"):
        assert label in shown, label


def test_grouped_bars_skip_missing_values_and_name_each_series():
    svg = bar_chart("groups", ["x", "y", "z"],
                    [BarSeries("before", [1.0, None, 3.0]),
                     BarSeries("after", [2.0, 2.5, math.nan])], ylabel="s")
    root = parse_inline(svg)
    drawn = bars(root)
    assert len(drawn) == 4  # None and NaN draw nothing
    by_fill: dict[str, int] = {}
    for fill, *_ in drawn:
        by_fill[fill] = by_fill.get(fill, 0) + 1
    assert sorted(by_fill.values()) == [2, 2] and len(by_fill) == 2
    shown = texts(root)
    assert "before" in shown and "after" in shown  # a legend for more than one series


def test_long_labels_turn_the_bars_horizontal():
    long = ["resnet50.layer3.1.conv2", "resnet50.conv1 (stem)"]
    assert min(len(label) for label in long) > 12
    root = parse_inline(bar_chart("long", long, [BarSeries("run", [3.0, 6.0])], ylabel="s"))
    drawn = bars(root)
    assert len(drawn) == 2
    lengths = [x1 - x0 for _, x0, _, x1, _ in drawn]
    assert lengths[1] == pytest.approx(2 * lengths[0], rel=1e-3)
    assert len({x0 for _, x0, *_ in drawn}) == 1  # from the same axis on the left
    assert drawn[0][2] < drawn[1][2]  # the first category on top
    assert set(long) <= set(texts(root))
    short = bars(parse_inline(bar_chart("short", ["ab", "cd"], [BarSeries("run", [3.0, 6.0])],
                                        ylabel="s")))
    assert len({x0 for _, x0, *_ in short}) == 2  # side by side: vertical


def test_error_bars_and_the_reference_line_are_drawn():
    plain = parse_inline(bar_chart("plain", ["a", "b"], [BarSeries("r", [1.0, 2.0])],
                                   ylabel="x"))
    marked = parse_inline(bar_chart(
        "marked", ["a", "b"], [BarSeries("r", [1.0, 2.0], [(0.8, 1.3), (1.9, 2.2)])],
        ylabel="x", reference=1.5))
    assert any("LineCollection" in i for i in ids(marked))  # the error bars
    assert not any("LineCollection" in i for i in ids(plain))
    dashed = [el for el in marked.iter() if "stroke-dasharray" in el.get("style", "")]
    assert dashed and not [el for el in plain.iter()
                           if "stroke-dasharray" in el.get("style", "")]


def test_hostile_label_text_stays_text():
    hostile = '<script>alert("x")</script> & <img src=x onerror=1>'
    svg = bar_chart("hostile", [hostile[:12], "b"], [BarSeries(hostile, [1.0, 2.0]),
                                                    BarSeries("other", [1.5, 1.0])],
                    ylabel="a & b < c", title=hostile)
    root = parse_inline(svg)
    assert not [el for el in root.iter() if el.tag in ("script", "img", "foreignObject")]
    assert not [el for el in root.iter() for name in el.attrib if name.startswith("on")]
    shown = texts(root)
    assert "a & b < c" in shown
    assert any(t.startswith('<script>alert("x")</script> &') for t in shown)
    assert "<script" not in svg  # escaped in the markup itself


def test_control_characters_in_labels_are_shown_as_escapes():
    """Every label, legend entry and title is printable: ESC, BEL, CR and bidirectional
    overrides are drawn as their escapes, never reach the SVG, and make no warning."""
    hostile = "a\x1b[2J\x07\r\u202eb\u2028"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svgs = [bar_chart("ctl", [hostile, "b"], [BarSeries(hostile, [1.0, 2.0]),
                                                  BarSeries("o", [1.0, 1.0])],
                          ylabel=hostile, title=hostile),
                line_chart("ctl", [LineSeries(hostile, [1.0, 2.0], [1.0, 2.0])],
                           xlabel=hostile, ylabel=hostile, title=hostile)]
    assert not [str(w.message) for w in caught]
    for svg in svgs:
        assert not set(svg) & set("\x1b\x07\r\u202e\u2028")
        shown = texts(parse_inline(svg))
        escaped = "a\\x1b[2J\\x07 \\u202eb\\u2028"
        assert shown.count(escaped) == 4, shown  # category or x label, legend, y label, title


def test_a_character_the_font_lacks_is_drawn_without_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svg = bar_chart("glyph", ["\U0001f600 \u4e2d\u6587"], [BarSeries("r", [1.0])],
                        ylabel="y")
    assert not [str(w.message) for w in caught if "Glyph" in str(w.message)]
    assert "\U0001f600 \u4e2d\u6587" in texts(parse_inline(svg))


def test_dollar_signs_and_underscores_are_shown_as_written():
    root = parse_inline(bar_chart("money", ["$x^2$", "b"], [BarSeries("_hidden", [1.0, 2.0]),
                                                           BarSeries("b", [1.0, 1.0])],
                                  ylabel="$ per run"))
    shown = texts(root)
    assert "$x^2$" in shown and "$ per run" in shown  # no mathtext
    assert "_hidden" in shown  # a leading underscore would hide it from the legend


def test_long_labels_are_cut_with_an_ellipsis():
    label = "m" * 100
    shown = texts(parse_inline(bar_chart("cut", [label], [BarSeries("r", [1.0])], ylabel="x")))
    [cut] = [t for t in shown if t.startswith("mmm")]
    assert cut.endswith("…") and len(cut) < len(label)


def test_ids_are_the_chart_s_own_and_every_reference_resolves():
    first = parse_inline(bar_chart("one", ["a", "b"], [BarSeries("r", [1.0, 2.0])],
                                   ylabel="x"))
    second = parse_inline(bar_chart("two", ["a", "b"], [BarSeries("r", [1.0, 2.0])],
                                    ylabel="x"))
    for root, prefix in ((first, "one-"), (second, "two-")):
        own = ids(root)
        assert own and all(i.startswith(prefix) for i in own)
        assert len(own) == len(set(own))
        referenced = set()
        for el in root.iter():
            for name, value in el.attrib.items():
                referenced.update(re.findall(r"url\(#([^)]+)\)", value))
                if name == f"{{{XLINK}}}href" or name == "href":
                    referenced.add(value.removeprefix("#"))
        assert referenced and referenced <= set(own)
    assert not set(ids(first)) & set(ids(second))
    with pytest.raises(ValueError, match="chart id"):
        bar_chart("Bad id", ["a"], [BarSeries("r", [1.0])], ylabel="x")


def test_no_external_reference_prolog_or_metadata_inline():
    svg = bar_chart("clean", ["a"], [BarSeries("r", [1.0])], ylabel="x")
    assert "http" not in svg and "<?xml" not in svg and "<!DOCTYPE" not in svg
    assert "<metadata" not in svg
    root = parse_inline(svg)
    assert root.get("role") == "img" and root.get("data-chart") == "clean"


def test_a_standalone_chart_is_a_complete_svg_file():
    svg = bar_chart("file", ["a", "b"], [BarSeries("r", [1.0, 2.0])], ylabel="x",
                    standalone=True)
    root = ET.fromstring(svg.encode())
    assert root.tag == f"{SVG_NS}svg"
    assert len(bars(root)) == 2
    for el in root.iter():
        for name, value in el.attrib.items():
            if name.endswith("href"):
                assert value.startswith("#"), value  # nothing fetched from elsewhere


def test_line_chart_draws_each_point_and_names_each_series():
    series = [LineSeries("all-reduce", [8, 1024, 65536], [1e6, 1e8, 2e9]),
              LineSeries("all-gather", [8, 1024], [2e6, 5e7])]
    svg = line_chart("sweep", series, xlabel="message size", ylabel="B/s",
                     title="Bus bandwidth", logx=True, byte_ticks=True)
    root = parse_inline(svg)
    shown = texts(root)
    for label in ("all-reduce", "all-gather", "message size", "B/s", "Bus bandwidth"):
        assert label in shown, label
    assert "64 KiB" in shown and "1 KiB" in shown  # sizes on a base-2 axis
    markers = [el for el in root.iter() if el.tag == "use"
               and el.get(f"{{{XLINK}}}href", "").startswith("#sweep-m")
               and el.get("style", "").find("stroke: #000000") < 0]
    # One marker per point, and one beside each series' name in the legend.
    assert len(markers) == 3 + 2 + len(series)


@pytest.mark.parametrize(("n", "shown"), [
    (1, "1 B"), (1023, "1023 B"), (1024, "1 KiB"), (65536, "64 KiB"), (2**30, "1 GiB"),
    (2**40, "1 TiB"),
])
def test_byte_ticks_are_whole_binary_sizes(n, shown):
    # Byte axes put their ticks on powers of two, labelled as whole numbers of a unit.
    assert format_bytes(n, decimals=0) == shown


def test_every_kind_of_chart_a_view_makes_is_drawn() -> None:
    kinds: list[Chart] = [
        Bars("b", ["a", "b"], [BarSeries("s", [1.0, 2.0], [(0.5, 1.5), None])], "x",
             reference=1.0),
        Lines("l", [LineSeries("s", [8.0, 1024.0], [1.0, 3.0])], "size", "B/s", logx=True,
              byte_ticks=True),
        TimeSeries("t", [0.0, 1.0, 2.0], [Panel("W", [1.0, None, 3.0], from_zero=True)],
                   "s", window=(0.5, 1.5), window_label="timed"),
        HeatMap("h", ["n1", "n2"], [[None, 2.0], [2.0, None]], "GB/s",
                cells=[["", "2"], ["2", ""]], marked=["n2"]),
    ]
    for i, chart in enumerate(kinds):
        root = parse_inline(draw(chart, f"kind-{i}"))
        assert root.tag.endswith("svg")
    with pytest.raises(TypeError, match="not a chart"):
        draw("a chart", "x")  # type: ignore[arg-type]


# -- scale and marks ---------------------------------------------------------------------


def tick_values(root: ET.Element, axis: str) -> list[float]:
    """The numbers of the tick labels of `axis` ("x" or "y")."""
    found = []
    for el in root.iter():
        if el.tag.removeprefix(SVG_NS) == "g" and re.search(rf"-{axis}tick_\d+$",
                                                             el.get("id", "")):
            label = "".join("".join(t.itertext()) for t in el.iter()
                            if t.tag.removeprefix(SVG_NS) == "text").strip()
            found.append(float(label.replace("\u2212", "-")))
    return found


def marks(root: ET.Element, name: str) -> int:
    """How many markers the groups whose id starts `chart-name` draw."""
    return sum(1 for el in root.iter() if el.tag.removeprefix(SVG_NS) == "g"
               and re.match(rf"[a-z0-9-]+?-{name}\b", el.get("id", ""))
               for use in el.iter() if use.tag.removeprefix(SVG_NS) == "use")


GFLOPS = [22.0, 21.6, 22.3, 12.1, 12.0, 11.9]  # a series that halved


def test_a_wide_band_does_not_set_the_axis_and_is_marked_where_cut() -> None:
    """One point's interval of ±2,616% (×/÷ 52) once took the axis to 1.37 TFLOP/s and
    flattened a series that went from 22 to 12 GFLOP/s: the axis is the points', with a
    margin, and the band cut at its edge ends in a triangle named in the legend."""
    band = [(y * 0.97, y * 1.03) for y in GFLOPS]
    band[2] = (GFLOPS[2] / 52.3, GFLOPS[2] * 52.3)
    svg = line_chart("case", [LineSeries("node1", list(range(6)), GFLOPS, band=band)],
                     xlabel="run", ylabel="GFLOP/s")
    root = parse_inline(svg)
    top = max(tick_values(root, "y"))
    margin = 0.5 * (max(GFLOPS) - min(GFLOPS))
    assert max(GFLOPS) <= top <= max(GFLOPS) + margin, top  # not the band's 1166
    assert min(tick_values(root, "y")) >= min(GFLOPS) - margin
    assert marks(root, "clipped-0-1") == 1  # the band's top, cut
    assert marks(root, "clipped-0-0") == 1  # and its bottom (0.43), below the axis
    assert "interval runs past the axis" in texts(root)


def test_bands_that_fit_leave_the_axis_as_it_was() -> None:
    band = [(y * 0.9, y * 1.1) for y in GFLOPS]
    root = parse_inline(line_chart("fits", [LineSeries("n", list(range(6)), GFLOPS,
                                                       band=band)], xlabel="x", ylabel="y"))
    assert max(tick_values(root, "y")) >= max(GFLOPS) * 1.05  # the band's top is shown
    assert marks(root, "clipped") == 0
    assert "interval runs past the axis" not in texts(root)


def test_a_whisker_past_the_bars_is_cut_at_the_axis_and_marked() -> None:
    svg = bar_chart("gen", ["a", "b"], [BarSeries("2.9.1", [1.0, 1.0]),
                                        BarSeries("2.14.1", [2.0, 1.1],
                                                  [(0.04, 104.6), (1.0, 1.2)])],
                    ylabel="x baseline", reference=1.0)
    root = parse_inline(svg)
    top = max(tick_values(root, "y"))
    assert 2.0 <= top <= 3.0, top  # half the largest bar past it, not 104.6
    assert marks(root, "clipped") == 1
    assert "interval runs past the axis" in texts(root)
    horizontal = parse_inline(bar_chart(
        "h", ["a", "b"], [BarSeries("B/A", [1.2, 0.9], [(0.01, 80.0), (0.8, 1.0)])],
        ylabel="speed", reference=1.0, horizontal=True))
    assert max(tick_values(horizontal, "x")) <= 1.2 * 1.5 + 1e-9
    assert marks(horizontal, "clipped") == 1


def test_marked_bars_are_ringed_and_named_in_the_legend() -> None:
    svg = bar_chart("busy", ["a", "b", "c"], [BarSeries("r", [1.0, 2.0, 1.5], marked=[1])],
                    ylabel="x", marked_label="busy host or throttled")
    root = parse_inline(svg)
    assert marks(root, "marked") == 1
    assert "busy host or throttled" in texts(root)
    plain = parse_inline(bar_chart("calm", ["a"], [BarSeries("r", [1.0])], ylabel="x",
                                   marked_label="busy host or throttled"))
    assert marks(plain, "marked") == 0
    assert "busy host or throttled" not in texts(plain)
