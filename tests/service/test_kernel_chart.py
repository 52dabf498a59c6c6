"""The kernel time-series chart drawn on the server: a point per sample, a line through them, each change
point marked between the last old and the first new sample, labels escaped, nothing that CSP would block."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from service.dashboard.chart import ChangeMark, ChartPoint, series_svg
from service.dashboard.render import nanoseconds

SVG = "{http://www.w3.org/2000/svg}"


def points(values: list[float]) -> list[ChartPoint]:
    return [ChartPoint(f"c{i:03d}", v, f"commit c{i:03d}: {nanoseconds(v)}") for i, v in enumerate(values)]


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))


def test_a_point_per_sample_higher_times_drawn_higher_up() -> None:
    svg = parse(series_svg(points([1000.0, 1010.0, 2000.0])))
    circles = svg.findall(f"{SVG}circle")
    assert len(circles) == 3
    ys = [float(c.get("cy", "nan")) for c in circles]
    assert ys[2] < ys[1] < ys[0]  # SVG's y grows downwards: the slowest sample is drawn highest
    xs = [float(c.get("cx", "nan")) for c in circles]
    assert xs == sorted(xs) and len(set(xs)) == 3
    (line,) = svg.findall(f"{SVG}polyline")
    assert len(line.get("points", "").split()) == 3
    assert [c.find(f"{SVG}title").text for c in circles][2] == "commit c002: 2 µs"  # type: ignore[union-attr]


def test_a_change_is_marked_between_the_last_old_and_the_first_new_sample() -> None:
    svg = parse(series_svg(points([1000.0] * 5 + [1200.0] * 5), [ChangeMark(5, "+20% (18% to 22%)")]))
    xs = [float(c.get("cx", "nan")) for c in svg.findall(f"{SVG}circle")]
    (mark,) = [line for line in svg.findall(f"{SVG}line") if line.get("class") == "change"]
    assert xs[4] < float(mark.get("x1", "nan")) < xs[5]
    labels = [t.text for t in svg.findall(f"{SVG}text") if t.get("class") == "change-label"]
    assert labels == ["+20% (18% to 22%)"]


def test_a_change_outside_the_series_is_not_drawn() -> None:
    svg = parse(series_svg(points([1.0, 2.0]), [ChangeMark(0, "x"), ChangeMark(2, "y")]))
    assert not [line for line in svg.findall(f"{SVG}line") if line.get("class") == "change"]


def test_labels_are_escaped_and_nothing_runs_or_styles_inline() -> None:
    hostile = [
        ChartPoint("<script>alert(1)</script>", 5.0, '"><img src=x onerror=alert(1)>'),
        ChartPoint("c1", 6.0, "fine"),
    ]
    markup = str(series_svg(hostile, [ChangeMark(1, "<b>")]))
    assert "<script" not in markup and "<img" not in markup and "<b>" not in markup
    assert "&lt;script&gt;" in markup and "&lt;img" in markup and "&lt;b&gt;" in markup
    assert "style=" not in markup
    parse(markup)  # still well-formed


def test_axis_ticks_span_the_values_and_an_empty_series_says_so() -> None:
    svg = parse(series_svg(points([2_000_000.0, 3_000_000.0])))
    ticks = [t.text for t in svg.findall(f"{SVG}text") if t.get("class") == "tick"]
    assert len(ticks) == 5 and ticks[0] == "1.95 ms" and ticks[-1] == "3.05 ms"
    assert "No samples yet" in str(series_svg([]))
    assert len(parse(series_svg(points([7.0]))).findall(f"{SVG}circle")) == 1


def test_time_labels() -> None:
    assert [nanoseconds(v) for v in (850, 12_345, 4_560_000, 1.2e9, 250_000)] == [
        "850 ns",
        "12.3 µs",
        "4.56 ms",
        "1.2 s",
        "250 µs",
    ]
