"""Reading a Responses body: a 400 only for what nothing can use; what ctxproxy cannot model is
forwarded as sent, naming the field; server-side state is never compacted."""

from __future__ import annotations

import orjson
import pytest

from ctxproxy.errors import BadRequest
from ctxproxy.wire.openai_responses.body import parse_turn
from tests.wire.openai_responses.items import call, user


def parse(body: object) -> object:
    return parse_turn(orjson.dumps(body))


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b'"input"'])
def test_a_body_that_is_no_json_object_is_refused(raw: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_turn(raw)


def test_a_readable_body_is_a_turn() -> None:
    turn = parse({"model": "m", "input": [user("hi")], "stream": True, "safety_identifier": "u1", "user": "old"})
    assert (turn.model, turn.stream, turn.user, turn.as_sent) == ("m", True, "u1", None)
    assert [m["role"] for m in turn.messages] == ["user"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"model": "m", "input": [user("hi")], "conversation": "conv_1"}, "conversation"),
        ({"model": "m", "prompt": {"id": "pmpt_1"}}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": [user("hi"), {"type": "compaction_trigger"}]}, "input[1]"),
        ({"model": "m", "input": [{"type": "compaction_trigger"}, user("hi")]}, "input[0]"),
        ({"model": "m", "input": [user("hi"), 7]}, "input[1]"),
        ({"model": "m", "input": [{"type": 3}]}, "input[0].type"),
        ({"model": "m", "input": [{"role": "critic", "content": "x"}]}, "input[0].role"),
        ({"model": "m", "input": [{"role": "user", "content": 5}]}, "input[0].content"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": 1}]}]},
            "input[0].content[0].text",
        ),
        ({"model": "m", "input": [{**call("c1"), "arguments": {"cmd": "ls"}}]}, "input[0].arguments"),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c1", "output": 3}]}, "input[0].output"),
        ({"model": "m", "input": [{"type": "function_call", "name": "x", "arguments": "{}"}]}, "input[0].call_id"),
        ({"model": "m", "input": "hi", "tools": ["exec"]}, "tools[0]"),
        ({"model": 4, "input": "hi"}, "model"),
        ({"model": "m", "input": "hi", "instructions": ["a"]}, "instructions"),
        ({"model": "m", "input": "hi", "max_output_tokens": "9"}, "max_output_tokens"),
    ],
)
def test_what_ctxproxy_cannot_model_goes_as_sent(body: dict[str, object], param: str) -> None:
    turn = parse(body)
    assert turn.as_sent is not None and turn.as_sent.param == param
    assert turn.messages == [] and turn.raw == orjson.dumps(body)


def test_unknown_fields_and_items_are_not_checked() -> None:
    body = {"model": "m", "input": [user("hi"), {"type": "from_the_future", "x": [1]}], "new_field": {"a": 1}}
    assert parse(body).as_sent is None  # type: ignore[attr-defined]
