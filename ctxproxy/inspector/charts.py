"""Inline SVG charts, built from numbers alone (pure; no script, no external file).

* ``tokens_chart``: a session's requests, left to right — the full history the client sent and
  what was forwarded, as two lines; a request that made a checkpoint is marked by a dashed
  vertical line with a circle (``class="marker compaction"``), one retried after an overflow by
  a triangle (``class="marker retry"``). Each mark has a ``<title>`` a browser shows on hover.
  A compaction's mark also says why it ran (its ``kind``: planned, emergency, recovery).
* ``usage_chart``: a tenant's traffic per time slot, a pair of bars each (sent, forwarded),
  centred in its slot, the slots' labels (dates and times) every ``AXIS_EVERY`` slots.

Every label goes through ``markup.tag``, so it is escaped like everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxproxy.inspector.markup import Child, Html, tag

__all__ = ["BEFORE_COLOUR", "AFTER_COLOUR", "ChartPoint", "Slot", "nice_ceiling", "tokens_chart", "usage_chart"]

BEFORE_COLOUR = "#9aa5b1"
AFTER_COLOUR = "#1f6feb"
COMPACTION_COLOUR = "#d9480f"
RETRY_COLOUR = "#a61e4d"
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 16, 40
AXIS_EVERY = 6  # usage_chart: a slot label every this many slots


@dataclass(frozen=True)
class ChartPoint:
    """One request: tokens the client sent, tokens forwarded, and what happened."""

    before: int
    after: int
    compacted: bool = False
    retried: bool = False
    label: str = ""  # on the x axis (first and last point)
    detail: str = ""  # added to the label in the hover titles
    kind: str = ""  # why it compacted: planned, emergency, recovery (empty: not recorded)

    @property
    def name(self) -> str:
        return f"{self.label} {self.detail}".strip()


@dataclass(frozen=True)
class Slot:
    """One time slot of a tenant's traffic."""

    label: str
    before: int
    after: int


def nice_ceiling(value: float) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def _frame(width: int, height: int, top: int, label: str, *body: Child) -> Html:
    """The chart's ``<svg>``, its y axis from 0 to ``top`` tokens and a base line."""
    plot_h = height - _TOP - _BOTTOM
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        y = _TOP + plot_h * (1 - fraction)
        ticks.append(tag("line", x1=_LEFT, x2=width - _RIGHT, y1=_fmt(y), y2=_fmt(y), stroke="#e5e7eb"))
        ticks.append(
            tag("text", f"{round(top * fraction):,}", x=_LEFT - 6, y=_fmt(y + 4), text_anchor="end", font_size=11)
        )
    return tag(
        "svg",
        tag("title", label),
        ticks,
        body,
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        role="img",
        aria_label=label,
        class_="chart",
        font_family="sans-serif",
    )


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _legend(x: int, y: int, items: Sequence[tuple[str, str]]) -> list[Html]:
    out: list[Html] = []
    for colour, text in items:
        out.append(tag("rect", x=x, y=y - 9, width=10, height=10, fill=colour))
        out.append(tag("text", text, x=x + 14, y=y, font_size=11))
        x += 14 + 7 * len(text) + 18
    return out


def tokens_chart(points: Sequence[ChartPoint], width: int = 760, height: int = 260) -> Html:
    """A session's requests (oldest first): see the module docstring."""
    label = f"Prompt tokens of the last {len(points)} requests: full history and forwarded"
    if not points:
        return _frame(width, height, 1, label, tag("text", "No requests recorded yet.", x=_LEFT + 8, y=height // 2))
    top = nice_ceiling(max(max(p.before, p.after) for p in points))
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    step = plot_w / max(len(points) - 1, 1)

    def x(i: int) -> float:
        return _LEFT + (i * step if len(points) > 1 else plot_w / 2)

    def y(tokens: int) -> float:
        return _TOP + plot_h * (1 - tokens / top)

    lines = [
        tag(
            "polyline",
            points=" ".join(f"{_fmt(x(i))},{_fmt(y(getattr(p, field)))}" for i, p in enumerate(points)),
            fill="none",
            stroke=colour,
            stroke_width=2,
            class_=f"series {field}",
        )
        for field, colour in (("before", BEFORE_COLOUR), ("after", AFTER_COLOUR))
    ]
    dots = [
        tag("circle", tag("title", _point_title(p)), cx=_fmt(x(i)), cy=_fmt(y(p.after)), r=3, fill=AFTER_COLOUR)
        for i, p in enumerate(points)
    ]
    marks = [_marks(p, x(i), y(p.after), _TOP, _TOP + plot_h) for i, p in enumerate(points)]
    axis = [
        tag("text", points[0].label, x=_LEFT, y=height - _BOTTOM + 16, font_size=11),
        tag("text", points[-1].label, x=width - _RIGHT, y=height - _BOTTOM + 16, font_size=11, text_anchor="end"),
    ]
    legend = _legend(
        _LEFT,
        height - 6,
        [
            (BEFORE_COLOUR, "full history"),
            (AFTER_COLOUR, "forwarded"),
            (COMPACTION_COLOUR, "compaction"),
            (RETRY_COLOUR, "retry"),
        ],
    )
    return _frame(width, height, top, label, lines, marks, dots, axis, legend)


def _point_title(p: ChartPoint) -> str:
    return f"{p.name}: {p.before:,} tokens sent, {p.after:,} forwarded"


def _marks(p: ChartPoint, x: float, y: float, top: float, bottom: float) -> list[Html]:
    out: list[Html] = []
    if p.compacted:
        why = f"{p.kind} compaction" if p.kind else "compaction"
        title = tag("title", f"{p.name}: {why} (a new checkpoint)")
        out.append(
            tag(
                "g",
                title,
                tag("line", x1=_fmt(x), x2=_fmt(x), y1=_fmt(top), y2=_fmt(bottom), stroke_dasharray="4 3"),
                tag("circle", cx=_fmt(x), cy=_fmt(y), r=6, fill="none", stroke_width=2),
                class_=f"marker compaction {p.kind}".strip(),
                stroke=COMPACTION_COLOUR,
            )
        )
    if p.retried:
        path = f"M{_fmt(x)},{_fmt(y - 14)} l6,10 h-12 z"
        out.append(
            tag(
                "path",
                tag("title", f"{p.name}: retried after an overflow"),
                d=path,
                fill=RETRY_COLOUR,
                class_="marker retry",
            )
        )
    return out


def usage_chart(slots: Sequence[Slot], width: int = 1000, height: int = 180) -> Html:
    """A tenant's prompt tokens per time slot (oldest first), sent and forwarded side by side."""
    label = f"Prompt tokens per slot over the last {len(slots)} slots: sent and forwarded"
    top = nice_ceiling(max((max(s.before, s.after) for s in slots), default=1))
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    slot_w = plot_w / max(len(slots), 1)
    bar_w = max(slot_w * 0.3, 1.0)
    bars: list[Html] = []
    for i, slot in enumerate(slots):
        first = _LEFT + i * slot_w + (slot_w - 2 * bar_w) / 2  # the pair centred in its slot
        for j, (tokens, colour) in enumerate(((slot.before, BEFORE_COLOUR), (slot.after, AFTER_COLOUR))):
            h = plot_h * tokens / top
            bars.append(
                tag(
                    "rect",
                    tag("title", f"{slot.label}: {tokens:,} tokens {'sent' if j == 0 else 'forwarded'}"),
                    x=_fmt(first + j * bar_w),
                    y=_fmt(_TOP + plot_h - h),
                    width=_fmt(bar_w),
                    height=_fmt(h),
                    fill=colour,
                    class_="bar before" if j == 0 else "bar after",
                )
            )
    labelled = sorted({*range(0, len(slots), AXIS_EVERY), len(slots) - 1} - {-1})
    axis = [
        tag(
            "text",
            slots[i].label,
            x=_fmt(_LEFT + (i + 0.5) * slot_w),
            y=height - _BOTTOM + 16,
            font_size=11,
            text_anchor="middle" if 0 < i < len(slots) - 1 else ("start" if i == 0 else "end"),
            class_="axis-label",
        )
        for i in labelled
    ]
    legend = _legend(_LEFT, height - 6, [(BEFORE_COLOUR, "sent"), (AFTER_COLOUR, "forwarded")])
    return _frame(width, height, top, label, bars, axis, legend)
