"""``may_be_error_event``: the substring test that spares an ordinary event its parse never
turns away an error-shaped one, however its JSON is spelt (``\\u`` escapes, spacing, nesting).

The property: whenever the pre-check says no, the full reading (parse, then look for an error
mark) says no too; so ``sse_error_is_overflow`` and ``ChatEvents.overflow`` answer what they
answered without it. Each overflow event of the detection table, escaped or not, still counts.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.upstream import overflow
from ctxproxy.upstream.overflow import may_be_error_event, sse_error_is_overflow
from ctxproxy.upstream.sse import CHAT_EVENTS, sse_event
from tests.upstream.test_overflow_detection import SSE_OVERFLOWS

WORDS = ["error", "response.failed", "failed", "type", "object", "message", "code", "ok", "", "e", "rror", "fail"]
SCALARS = st.one_of(st.sampled_from(WORDS), st.integers(-2, 2), st.booleans(), st.none(), st.text(max_size=6))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def _spelt(value: Any, escape: list[bool]) -> str:
    """``value`` as JSON, each string character escaped as ``\\uXXXX`` by the next flag of ``escape``."""
    if isinstance(value, str):
        return '"' + "".join(_char(c, escape) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_spelt(v, escape) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_spelt(k, escape)} : {_spelt(v, escape)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _char(c: str, escape: list[bool]) -> str:
    flag = escape.pop() if escape else False
    if flag and ord(c) <= 0xFFFF:
        return f"\\u{ord(c):04x}"
    return json.dumps(c)[1:-1]  # as it is, or JSON's own escape (quote, backslash, control, astral)


def _error_shaped(data: bytes) -> bool:
    """The full reading, without the pre-check."""
    return any(overflow._is_error_event(item) for item in overflow._objects(overflow._parse(data)))


@given(VALUES, st.lists(st.booleans(), max_size=40))
def test_the_precheck_never_turns_away_an_error_shaped_event(value: Any, escape: list[bool]) -> None:
    data = _spelt(value, escape).encode()
    assert json.loads(data) == value
    if not may_be_error_event(data):
        assert not _error_shaped(data)
        assert not sse_error_is_overflow(data) and CHAT_EVENTS.overflow(sse_event(data)) is None


@given(st.sampled_from([payload for _, payload in SSE_OVERFLOWS]), st.lists(st.booleans(), max_size=400))
def test_every_overflow_event_counts_however_it_is_escaped(payload: bytes, escape: list[bool]) -> None:
    spelt = _spelt(json.loads(payload), escape).encode()
    assert sse_error_is_overflow(spelt)
    assert CHAT_EVENTS.overflow(sse_event(spelt)) == spelt
