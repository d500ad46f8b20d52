"""A conversation's repeated texts, scanned on from the last scan (summarize/repeats.py), are what a
scan of the whole history finds (``scaffolding.repeated_in``): on histories that grow, fork, are
edited, copied, interleaved with another conversation's, hold one message object twice or
something that is not a message, with ranges inside and outside the history, and a memo that
keeps nothing, a little or everything."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU
from ctxproxy.summarize.base import SummaryTask
from ctxproxy.summarize.extractive import ExtractiveSummarizer
from ctxproxy.summarize.repeats import RepeatScans
from ctxproxy.summarize.scaffolding import repeated_in, text_units
from ctxproxy.tokens import TokenCounter

# Long enough to count as repeated (MIN_REPEATED_CHARS), and short ones that never do.
LONG = [
    "Context for the assistant: the user works in the payments team and wants answers in plain English.",
    "Remember that the repository root is /srv/app and that every path you cite must be relative to it.",
    "We went camping with the kids last weekend near the lake and it rained for most of the second day.",
]
SHORT = ["yes", "go on", "What did we decide about the release date?"]
TEXTS = st.sampled_from(
    [
        *LONG,
        *SHORT,
        f"{LONG[0]}\n\n{SHORT[2]}",
        f"<note>\n{LONG[1]}\n</note>\n\n{SHORT[0]}",
        f"{LONG[2]}\n\n{LONG[0]}",
        f"<system-reminder>\n{LONG[1]}\n</system-reminder>",
    ]
)
ROLES = st.sampled_from(["user", "user", "system", "developer", "assistant", "tool"])
PARTS = st.one_of(
    TEXTS.map(lambda text: {"type": "text", "text": text}),
    st.just({"type": "image_url", "image_url": {"url": "data:,"}}),
    st.just({"type": "text", "text": 7}),  # hostile: not a string
)
CONTENT = st.one_of(TEXTS, st.lists(PARTS, max_size=3), st.none())


@st.composite
def messages(draw: st.DrawFn, max_size: int = 4) -> list[Any]:
    made = draw(
        st.lists(st.builds(lambda role, content: {"role": role, "content": content}, ROLES, CONTENT), max_size=max_size)
    )
    if draw(st.booleans()) and made:
        made.insert(draw(st.integers(0, len(made))), "not a message")
    return made


STEP = st.tuples(
    st.sampled_from(["grow", "grow", "fork", "copy", "alias", "edit", "other", "tuple"]),
    messages(),
    st.integers(0, 40),
    st.sampled_from(["inside", "outside", "both", "none", "twice"]),
)


def _range(kind: str, context: list[Any], extra: list[Any], at: int) -> list[Any]:
    if not context:
        return extra
    start = at % len(context)
    inside = context[start : start + 3]
    return {"inside": inside, "outside": extra, "both": [*inside, *extra], "none": [], "twice": [*inside, *inside]}[
        kind
    ]


def _next(kind: str, conv: list[Any], new: list[Any], at: int) -> list[Any]:
    if kind == "fork":
        return [*conv[: at % (len(conv) + 1)], *new]
    if kind == "copy":
        return [dict(m) if isinstance(m, dict) else m for m in conv]
    if kind == "alias" and conv:
        return [*conv, conv[at % len(conv)], *new]
    if kind == "edit" and conv:
        i = at % len(conv)
        return [*conv[:i], {"role": "user", "content": LONG[at % len(LONG)]}, *conv[i + 1 :]]
    return [*conv, *new]


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=12), messages(max_size=6), st.sampled_from([0, 1_500, 10**8]))
def test_scans_find_what_a_whole_scan_finds(steps: list[Any], other: list[Any], max_bytes: int) -> None:
    scans = RepeatScans(ByteLRU(max_bytes), text_units)
    conv: list[Any] = []
    for kind, new, at, range_kind in steps:
        conv = _next(kind, conv, new, at)
        context: Any = other if kind == "other" else conv
        context = tuple(context) if kind == "tuple" else context
        task = _range(range_kind, list(context), new, at)
        assert scans.repeated(task, context) == repeated_in(task, context, text_units)


@settings(max_examples=60, deadline=None)
@given(st.lists(messages(max_size=6), min_size=1, max_size=5))
def test_summaries_with_kept_scans_are_those_of_a_fresh_summariser(turns: list[list[Any]]) -> None:
    counter = TokenCounter()
    kept = ExtractiveSummarizer(counter, cache=ByteLRU(10**8))
    conv: list[Any] = [{"role": "system", "content": "Be brief."}]
    previous: str | None = None
    for turn in turns:
        conv = [*conv, *(m for m in turn if isinstance(m, dict))]
        task = SummaryTask("update" if previous else "fresh", conv[-4:], previous, 300, context=conv)
        text = kept.summarize_text(task)
        assert text == ExtractiveSummarizer(counter, cache=ByteLRU(10**8)).summarize_text(task)
        previous = text or None


def test_a_kept_scan_reads_only_the_messages_after_it_even_after_a_long_range_filled_the_memo() -> None:
    read: list[str] = []

    def units_of(text: str) -> frozenset[bytes]:
        read.append(text)
        return text_units(text)

    cache: ByteLRU[Any, Any] = ByteLRU(20_000)
    scans = RepeatScans(cache, units_of)
    history = [{"role": "user", "content": f"{LONG[i % 3]} ({i})"} for i in range(40)]
    scans.repeated(history[-4:], history)
    for i in range(200):  # a long range's analyses, put after the scan: it is the oldest entry
        cache.put(("analysis", str(i)), i, 100)
    scans.keep()
    read.clear()
    longer = [*history, {"role": "user", "content": LONG[0]}]
    assert scans.repeated(longer[-2:], longer) == repeated_in(longer[-2:], longer, text_units)
    assert read == [LONG[0]]  # the new message alone
