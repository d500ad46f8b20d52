"""A message that is a role and its text (and a name) is counted by a shorter path (``_message_tokens``): it
must count what the whole walk over a message's fields (``_any_message_tokens``) counts."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.tokens import TokenCounter, TokenSettings, _any_message_tokens, _message_tokens
from ctxproxy.vocabulary import ROLES

COUNTER = TokenCounter()
ENC = COUNTER.encoding_for(None)
SETTINGS = TokenSettings()

_VALUES = st.none() | st.integers() | st.text(max_size=40) | st.lists(st.text(max_size=8), max_size=2)
_ROLES = st.sampled_from(ROLES) | st.text(max_size=10) | _VALUES
_KEYS = st.sampled_from(["role", "content", "name", "tool_calls", "tool_call_id", "refusal"])


@given(_ROLES, st.text(max_size=300) | _VALUES)
def test_a_role_and_its_text_count_as_every_field_walked(role: Any, content: Any) -> None:
    message = {"role": role, "content": content}
    assert _message_tokens(ENC, message, SETTINGS) == _any_message_tokens(ENC, message, SETTINGS)


@given(_ROLES, st.text(max_size=300) | _VALUES, _VALUES)
def test_a_role_its_text_and_a_name_count_as_every_field_walked(role: Any, content: Any, name: Any) -> None:
    message = {"role": role, "content": content, "name": name}
    assert _message_tokens(ENC, message, SETTINGS) == _any_message_tokens(ENC, message, SETTINGS)


@given(st.dictionaries(_KEYS, _VALUES | _ROLES, max_size=3))
def test_any_two_fields_count_as_every_field_walked(message: dict[str, Any]) -> None:
    assert _message_tokens(ENC, message, SETTINGS) == _any_message_tokens(ENC, message, SETTINGS)


def test_special_token_text_is_plain_text_on_either_path() -> None:
    message = {"role": "user", "content": "<|endoftext|> and on"}
    assert _message_tokens(ENC, message, SETTINGS) == _any_message_tokens(ENC, message, SETTINGS) > 3
