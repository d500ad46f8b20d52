"""The SVG builders: well-formed SVG, the numbers where they belong, marks on the right requests,
every label escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ctxproxy.inspector.charts import ChartPoint, Slot, nice_ceiling, tokens_chart, usage_chart

NS = {"s": "http://www.w3.org/2000/svg"}
EVIL = "<script>alert('x')</script>"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 1), (1, 1), (3, 5), (7, 10), (10, 10), (11, 20), (480, 500), (501, 1000)]
)
def test_nice_ceiling(value: float, expected: int) -> None:
    assert nice_ceiling(value) == expected


def points(n: int) -> list[ChartPoint]:
    return [
        ChartPoint(before=100 * (i + 1), after=50 * (i + 1), compacted=i in (2, 5), retried=i == 4, label=f"#{i + 1}")
        for i in range(n)
    ]


def test_tokens_chart_draws_both_series_and_marks_compactions_and_retries() -> None:
    root = parse(tokens_chart(points(8), width=700, height=300))
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox") == "0 0 700 300"
    lines = {p.get("class"): p.get("points", "").split() for p in root.iter("{http://www.w3.org/2000/svg}polyline")}
    assert set(lines) == {"series before", "series after"}
    assert len(lines["series before"]) == len(lines["series after"]) == 8
    # y grows downwards: every forwarded point lies below (greater y) its full-history point.
    for before, after in zip(lines["series before"], lines["series after"], strict=True):
        assert float(before.split(",")[0]) == float(after.split(",")[0])
        assert float(after.split(",")[1]) > float(before.split(",")[1])
    compactions = root.findall(".//s:g[@class='marker compaction']", NS)
    retries = root.findall(".//s:path[@class='marker retry']", NS)
    assert [m.find("s:title", NS).text for m in compactions] == [
        "#3: compaction (a new checkpoint)",
        "#6: compaction (a new checkpoint)",
    ]
    assert [m.find("s:title", NS).text for m in retries] == ["#5: retried after an overflow"]
    # The y axis ends at the nice ceiling of the largest value (800 -> 1000).
    assert "1,000" in [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_a_compaction_mark_sits_on_its_request() -> None:
    root = parse(tokens_chart(points(8)))
    after = root.find(".//s:polyline[@class='series after']", NS).get("points").split()
    mark = root.find(".//s:g[@class='marker compaction']/s:circle", NS)
    assert f"{mark.get('cx')},{mark.get('cy')}" == after[2]


def test_labels_are_escaped_and_no_script_element_exists() -> None:
    svg = tokens_chart([ChartPoint(10, 5, compacted=True, label=EVIL, detail="&")])
    assert "<script" not in svg
    root = parse(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert f"{EVIL} &: compaction (a new checkpoint)" in titles
    assert not list(root.iter("{http://www.w3.org/2000/svg}script"))


def test_empty_and_single_point_charts() -> None:
    empty = parse(tokens_chart([]))
    assert "No requests recorded yet." in [t.text for t in empty.iter("{http://www.w3.org/2000/svg}text")]
    single = parse(tokens_chart([ChartPoint(10, 10, label="#1")]))
    assert len(single.findall(".//s:circle", NS)) == 1


def test_usage_chart_bars_are_proportional() -> None:
    slots = [Slot("a", 1000, 250), Slot("b", 0, 0), Slot(EVIL, 500, 500)]
    svg = usage_chart(slots, width=400, height=200)
    assert "<script" not in svg
    root = parse(svg)
    before = [float(r.get("height")) for r in root.findall(".//s:rect[@class='bar before']", NS)]
    after = [float(r.get("height")) for r in root.findall(".//s:rect[@class='bar after']", NS)]
    assert len(before) == len(after) == 3
    assert before[0] == pytest.approx(4 * after[0]) and before[1] == after[1] == 0
    assert before[2] == after[2] == pytest.approx(before[0] / 2)
    assert EVIL + ": 500 tokens sent" in [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]


def test_usage_chart_centres_each_pair_in_its_slot_and_labels_slots_with_their_dates() -> None:
    slots = [Slot(f"27 Nov {h:02d}:00 UTC", 10 * h, 5 * h) for h in range(24)]
    root = parse(usage_chart(slots))
    assert root.get("width") == "1000"  # the card's width, not half of it
    before = root.findall(".//s:rect[@class='bar before']", NS)
    after = root.findall(".//s:rect[@class='bar after']", NS)
    slot_w = (1000 - 64 - 16) / 24
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        left, right = float(b.get("x")), float(a.get("x")) + float(a.get("width"))
        assert (left + right) / 2 == pytest.approx(64 + (i + 0.5) * slot_w, abs=0.11)  # centred, not at the slot's edge
    labels = [t.text for t in root.findall(".//s:text[@class='axis-label']", NS)]
    assert labels == [f"27 Nov {h:02d}:00 UTC" for h in (0, 6, 12, 18, 23)]


def test_a_compaction_mark_says_why_it_ran() -> None:
    marked = [ChartPoint(100, 50, compacted=True, label="#1", kind="emergency"), ChartPoint(120, 60, label="#2")]
    root = parse(tokens_chart(marked))
    [mark] = root.findall(".//s:g[@class='marker compaction emergency']", NS)
    assert mark.find("s:title", NS).text == "#1: emergency compaction (a new checkpoint)"
