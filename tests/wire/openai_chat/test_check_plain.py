"""``check_messages`` passes a message that is a role and its text (and a name) without the whole check
(``_check_message``): it must accept and refuse exactly what that check does, naming the same
parameter."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.errors import Uncompactable
from ctxproxy.vocabulary import ROLES
from ctxproxy.wire.openai_chat.body import _check_message, check_messages

_VALUES = st.none() | st.integers() | st.text(max_size=5) | st.lists(st.text(max_size=3), max_size=2)
_ROLES = st.sampled_from(ROLES) | st.text(max_size=6) | _VALUES
_KEYS = st.sampled_from(["role", "content", "name", "tool_call_id", "other"])
_MESSAGES = (
    st.fixed_dictionaries({"role": _ROLES, "content": st.text(max_size=5) | _VALUES})
    | st.fixed_dictionaries({"role": _ROLES, "content": st.text(max_size=5), "name": _VALUES})
    | st.dictionaries(_KEYS, _VALUES | _ROLES, max_size=3)
    | _VALUES
)


def _refusal(check: Any) -> str | None:
    try:
        check()
    except Uncompactable as reason:
        return f"{reason.param}: {reason}"
    return None


@given(st.lists(_MESSAGES, min_size=1, max_size=4))
def test_the_short_check_refuses_what_the_whole_check_refuses(messages: list[Any]) -> None:
    def whole() -> None:
        for i, message in enumerate(messages):
            _check_message(message, f"messages[{i}]")

    assert _refusal(lambda: check_messages(messages)) == _refusal(whole)


def test_a_tool_result_without_its_call_id_is_refused() -> None:
    assert _refusal(lambda: check_messages([{"role": "tool", "content": "42"}])) is not None
