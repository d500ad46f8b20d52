"""A Messages request body is hostile input: a body nothing can use is a 400; what ctxproxy cannot
model is refused by the parser (``Uncompactable``, naming the field: the pipeline forwards it as
sent); anything the API may accept (unknown fields, block types, system messages inside
``messages``, forms of fields ctxproxy does not read) passes untouched."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.errors import BadRequest
from ctxproxy.wire.anthropic.blocks import check_messages
from ctxproxy.wire.anthropic.body import parse_body, parse_messages_body

USER = {"role": "user", "content": "hi"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "42"}]}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [USER], **fields}


def raw(value: Any) -> bytes:
    return json.dumps(value).encode()


def refused(value: Any) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_messages_body(value if isinstance(value, bytes) else raw(value))
    assert caught.value.status == 400
    return caught.value


def test_a_full_request_parses() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}}, IMAGE]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"}, CALL]},
        {"role": "user", "content": [RESULT, {"type": "search_result", "anything": [1, 2]}]},  # unknown: opaque
    ]
    value = body(
        messages=messages,
        system=[{"type": "text", "text": "be brief"}],
        stream=True,
        metadata={"user_id": "u-1"},
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web"}],
        tool_choice={"type": "tool", "name": "lookup", "disable_parallel_tool_use": True},
        stop_sequences=["END"],
        temperature=0.2,
        top_k=5,
        thinking={"type": "enabled", "budget_tokens": 2048},
        future_field={"kept": True},
    )
    data = orjson.dumps(value)
    request = parse_messages_body(data)
    assert request.raw is data and request.body == value
    assert (request.model, request.stream, request.user, request.max_tokens) == ("claude-sonnet-4-6", True, "u-1", 64)
    assert request.messages == messages


def test_optional_fields_may_be_null_or_absent() -> None:
    request = parse_messages_body(raw({"model": "m", "messages": [USER], "stream": None, "metadata": None}))
    assert (request.stream, request.user, request.max_tokens) == (False, None, None)
    assert parse_messages_body(raw(body(max_tokens=0))).max_tokens == 0  # 0: only warm the prompt cache


@pytest.mark.parametrize(
    ("value", "param", "says"),
    [
        (b"", None, "empty"),
        (b"{nope", None, "not valid JSON"),
        (raw([USER]), None, "must be a JSON object, got a list"),
        (raw({"messages": [USER]}), "model", "`model` is required"),
        (raw(body(model=7)), "model", "`model` must be a string, got a number"),
        (raw(body(max_tokens=True)), "max_tokens", "must be an integer, got a boolean"),
        (raw(body(stream="yes")), "stream", "true or false"),
        (raw(body(messages=None)), "messages", "must be a list, got null"),
        (raw({"model": "m"}), "messages", "`messages` is required"),
        (raw(body(messages={})), "messages", "must be a list, got an object"),
        (raw(body(messages=[])), "messages", "at least one message"),
        (raw(body(system=[{"text": "x"}])), "system[0]", "string `type`"),
        (raw(body(metadata={"user_id": 5})), "metadata.user_id", "must be a string"),
        (raw(body(tools=[{"input_schema": {}}])), "tools[0].name", "must be a string"),
        (raw(body(tools=["t"])), "tools[0]", "tool object"),
    ],
)
def test_bad_fields_are_named(value: bytes, param: str | None, says: str) -> None:
    error = refused(value)
    assert error.param == param
    assert says in error.message


@pytest.mark.parametrize(
    ("message", "param", "says"),
    [
        ("hi", "messages[0]", "must be an object with `role` and `content`, got a string"),
        ({"role": "tool", "content": "x"}, "messages[0].role", "another role"),
        ({"content": "x"}, "messages[0].role", "nothing (it is missing)"),
        ({"role": "user"}, "messages[0].content", "got nothing"),
        ({"role": "user", "content": 3}, "messages[0].content", "got a number"),
        ({"role": "user", "content": [{"text": "x"}]}, "messages[0].content[0]", "string `type`"),
        ({"role": "user", "content": [{"type": "text", "text": None}]}, "messages[0].content[0].text", "got null"),
        ({"role": "user", "content": [CALL]}, "messages[0].content[0]", "only valid in assistant messages"),
        ({"role": "assistant", "content": [RESULT]}, "messages[0].content[0]", "only valid in user messages"),
        ({"role": "assistant", "content": [{**CALL, "input": "{}"}]}, "messages[0].content[0].input", "an object"),
        ({"role": "assistant", "content": [{**CALL, "id": 1}]}, "messages[0].content[0].id", "a string"),
        (
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]},
            "messages[0].content[0].signature",
            "missing",
        ),
        ({"role": "assistant", "content": [{"type": "redacted_thinking"}]}, "messages[0].content[0].data", "missing"),
        ({"role": "user", "content": [{**RESULT, "tool_use_id": None}]}, "messages[0].content[0].tool_use_id", "null"),
        ({"role": "user", "content": [{**RESULT, "content": 42}]}, "messages[0].content[0].content", "a number"),
        (
            {"role": "user", "content": [{**RESULT, "content": [{"type": "text"}]}]},
            "messages[0].content[0].content[0].text",
            "missing",
        ),
        (
            {"role": "user", "content": [{**RESULT, "is_error": "no"}]},
            "messages[0].content[0].is_error",
            "true or false",
        ),
        ({"role": "user", "content": [{"type": "image"}]}, "messages[0].content[0].source", "string `type`"),
        (
            {"role": "user", "content": [{"type": "image", "source": {"type": "url"}}]},
            "messages[0].content[0].source.url",
            "missing",
        ),
        (
            {"role": "user", "content": [{"type": "document", "source": {"type": "base64", "data": 1}}]},
            "messages[0].content[0].source.data",
            "a number",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "document", "source": {"type": "content", "content": [{"type": 1}]}}],
            },
            "messages[0].content[0].source.content[0]",
            "string `type`",
        ),
    ],
)
def test_bad_messages_name_the_field(message: Any, param: str, says: str) -> None:
    error = refused(body(messages=[message]))
    assert error.param == param
    assert says in error.message


@pytest.mark.parametrize(
    "fields",
    [
        # Fields ctxproxy does not read are the upstream's to judge, in forms newer than this code.
        {"max_tokens": -1},
        {"temperature": "hot"},
        {"system": [{"type": "image", "source": {"type": "url", "url": "u"}}]},
        {"stop_sequences": ["a", 1]},
        {"tools": [{"name": "t"}]},
        {"tools": [{"name": "web_search", "type": "web_search_20250305", "max_uses": 5}]},
        {"tool_choice": {"type": "required"}},
        {"thinking": {"type": "adaptive"}},
        {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
        {"output_config": {"effort": "high"}},
        {"messages": [USER, {"role": "system", "content": "Agents: ..."}]},
        {"messages": [{"role": "system", "content": [{"type": "text", "text": "rules"}]}, USER]},
        {"messages": [{"role": "user", "content": [{"type": "container_upload", "file_id": "f"}]}]},
    ],
)
def test_what_the_api_may_accept_is_not_refused(fields: dict[str, Any]) -> None:
    request = parse_messages_body(raw(body(**fields)))
    assert request.body == body(**fields)


def test_tool_blocks_inside_tool_results_are_not_bound_to_a_role() -> None:
    nested = {**RESULT, "content": [{"type": "text", "text": "a"}, IMAGE, {"type": "unknown_kind"}]}
    assert parse_messages_body(raw(body(messages=[{"role": "user", "content": [nested]}]))).messages


def test_a_known_prefix_can_be_skipped() -> None:
    messages = [{"role": "user", "content": 5}, USER, {"role": "assistant", "content": [{"type": "text"}]}]
    request = parse_body(raw(body(messages=messages)))  # the messages themselves are not checked here
    check_messages(request.messages, start=1, end=2)
    with pytest.raises(BadRequest) as caught:
        check_messages(request.messages, start=1)
    assert caught.value.param == "messages[2].content[0].text"


_KEYS = ["model", "max_tokens", "messages", "role", "content", "type", "text", "source", "data", "tool_use_id"]
_KEYS += ["id", "name", "input", "tools", "system", "metadata", "user_id", "tool_choice", "stream", "is_error"]
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["user", "assistant", "text", "tool_use", "tool_result", "image", "document", "base64", "auto"]),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_any_json_is_parsed_or_refused_with_bad_request(value: Any) -> None:
    try:
        parse_messages_body(orjson.dumps(value))
    except BadRequest as error:
        assert error.status == 400 and error.message
