"""Property tests: no body, however malformed, makes parsing or counting fail with anything
but a BadRequest; every accepted body can be counted and digested."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.server.chat_body import parse_chat_body
from proxy.session import PrefixChain
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-10, 10)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)

roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot", None, 3])
parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url", "input_audio", "refusal", 1])},
    optional={"text": json_values, "image_url": st.fixed_dictionaries({"url": json_values}), "refusal": json_values},
)
contents = st.none() | st.text(max_size=30) | st.lists(parts, max_size=3) | json_values
tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": json_values,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": json_values, "arguments": json_values}),
        }
    ),
    max_size=2,
)
messages = st.fixed_dictionaries(
    {"role": roles},
    optional={"content": contents, "name": json_values, "tool_call_id": json_values, "tool_calls": tool_calls},
)
bodies = (
    st.fixed_dictionaries(
        {},
        optional={
            "model": json_values,
            "stream": json_values,
            "user": json_values,
            "messages": st.lists(messages, max_size=5) | json_values,
            "tools": st.lists(st.fixed_dictionaries({"type": json_values}, optional={"function": json_values}))
            | json_values,
            "tool_choice": json_values,
            "n": json_values,
            "max_tokens": json_values,
            "stream_options": json_values,
        },
    )
    | json_values
)


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_any_body_is_accepted_or_refused_with_bad_request(body: object) -> None:
    raw = orjson.dumps(body)
    try:
        chat = parse_chat_body(raw)
    except BadRequest as exc:
        assert exc.status == 400 and exc.message
        return
    # Accepted: the rest of the request path must be able to handle it.
    chain = PrefixChain.of(chat.messages)
    assert COUNTER.count_messages(chat.messages, chain.digests, chat.model) >= 3 + 3 * len(chat.messages)
    assert COUNTER.count_tools(chat.body.get("tools"), chat.model) >= 0
    assert chat.raw == raw


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_parser(raw: bytes) -> None:
    try:
        parse_chat_body(raw)
    except BadRequest:
        pass
