"""Checking tool pairs request after request scans only what the previous request's lists did not
hold (``ctxproxy.compaction.pairs_memo``): on any sequence of forwarded and client lists — ones
that go on, are edited (an equal message as a new object too), cut, or belong to another session —
it says what ``assemble.breaks_tool_pairs`` says."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.assemble import breaks_tool_pairs
from ctxproxy.compaction.pairs_memo import ToolPairsMemo

IDS = ["a", "b", "c"]
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": "x"},
    {"role": "system", "content": "s"},
    *({"role": "assistant", "tool_calls": [{"id": i, "type": "function"}]} for i in IDS),
    {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}, "junk", {"id": 3}]},
    *({"role": "tool", "tool_call_id": i, "content": "r"} for i in [*IDS, None]),
]
MESSAGE = st.sampled_from(MESSAGES).map(lambda m: m if len(m) % 2 else dict(m))  # the same object, or an equal one


@st.composite
def lists(draw: st.DrawFn) -> list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """Requests of two sessions: (session, client's list, forwarded list), each list going on from
    the session's previous one, or cut first, or edited at one place."""
    out: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
    held: dict[str, list[list[dict[str, Any]]]] = {"s1": [[], []], "s2": [[], []]}
    for _ in range(draw(st.integers(1, 10))):
        session = draw(st.sampled_from(["s1", "s1", "s2"]))
        pair = []
        for previous in held[session]:
            now = previous[: draw(st.integers(0, len(previous)))] if draw(st.integers(0, 3)) == 0 else list(previous)
            if now and draw(st.integers(0, 4)) == 0:
                now[draw(st.integers(0, len(now) - 1))] = draw(MESSAGE)
            pair.append(now + draw(st.lists(MESSAGE, max_size=4)))
        held[session] = pair
        out.append((session, pair[0], pair[1]))
    return out


@settings(max_examples=400, deadline=None)
@given(lists())
def test_it_says_what_a_whole_scan_says(sent: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]) -> None:
    memo = ToolPairsMemo(ByteLRU(1 << 20))
    for session, original, forwarded in sent:
        assert memo.breaks(session, original, forwarded) == breaks_tool_pairs(original, forwarded)


def test_a_list_that_goes_on_is_scanned_from_where_the_last_one_ended() -> None:
    memo = ToolPairsMemo(ByteLRU(1 << 20))
    call = {"role": "assistant", "tool_calls": [{"id": "a"}]}
    answer = {"role": "tool", "tool_call_id": "a", "content": "r"}
    assert memo.breaks("s", [call, answer], [call])  # a call the client answered, forwarded without its answer
    sent = [call, answer]
    assert not memo.breaks("s", [call, answer], sent)
    sent.append({"role": "tool", "tool_call_id": "b", "content": "r"})  # an orphan the client did not send
    assert memo.breaks("s", [call, answer], sent)
    assert not memo.breaks("s", sent, sent)  # the client sent it so
