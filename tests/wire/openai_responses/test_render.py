"""Canonical messages back into a Responses body: the client's own items wherever a message is
unchanged, ctxproxy's messages in the API's shape, never an output without its call."""

from __future__ import annotations

from typing import Any

import orjson

from ctxproxy.wire.openai_responses.canonical import to_messages
from ctxproxy.wire.openai_responses.render import render_body, render_items
from tests.fakes.responses_checks import check_request
from tests.wire.openai_responses.items import call, codex_turns, developer, output, reasoning, said, user

CODEX_BODY: dict[str, Any] = {
    "model": "gpt-5.5",
    "stream": True,
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "01a2",
    "input": [developer("You are Codex."), developer("<skills/>", 1), user("<environment_context/>"), *codex_turns(3)],
    "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
    "client_metadata": {"x": "y"},
}


def test_an_unchanged_conversation_comes_back_item_for_item() -> None:
    odd = {
        "type": "future_item",
        "id": "f1",
        "payload": {"a": [1, 2]},
        "internal_chat_message_metadata_passthrough": {},
    }
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "b64"}
    body = {**CODEX_BODY, "instructions": "Be brief.", "input": [*CODEX_BODY["input"], odd, compaction, user("more")]}
    rendered = render_body(body, to_messages(body))
    assert orjson.dumps(rendered) == orjson.dumps(body)


def test_ctxproxys_own_messages_take_the_apis_shapes() -> None:
    messages = [
        {"role": "system", "content": "Rules."},
        {"role": "assistant", "name": "context_summary", "content": "## Context Summary\nearlier"},
        {"role": "user", "content": "Remember: PostgreSQL 16."},
        *to_messages({"input": [user("go")]}),
    ]
    assert render_items(messages) == [
        {"type": "message", "role": "system", "content": "Rules."},
        {"type": "message", "role": "assistant", "content": "## Context Summary\nearlier"},
        {"type": "message", "role": "user", "content": "Remember: PostgreSQL 16."},
        user("go"),
    ]


def test_instructions_go_back_to_instructions_and_are_dropped_with_their_message() -> None:
    body = {"model": "m", "instructions": "Be brief.", "input": [user("go")]}
    messages = to_messages(body)
    assert render_body(body, messages)["instructions"] == "Be brief."
    assert "instructions" not in render_body(body, messages[1:])
    empty = {"model": "m", "instructions": "", "input": [user("go")]}
    assert render_body(empty, to_messages(empty)) == empty  # nothing to move: the field stays as sent


def test_an_output_whose_call_was_left_out_becomes_a_user_message() -> None:
    items = [user("go"), reasoning(1), call("c1"), output("c1", "42 lines"), said("Done.")]
    messages = to_messages({"input": items})
    kept = [messages[0], messages[2], messages[3]]  # the call's message left out
    rendered = render_items(kept)
    assert rendered[1] == {
        "type": "message",
        "role": "user",
        "content": "[Result of an earlier tool call c1]\n42 lines",
    }
    assert check_request({"model": "m", "input": rendered}) is None


def test_a_changed_message_is_written_from_what_it_says_now() -> None:
    messages = to_messages({"input": [user("go"), reasoning(1), call("c1"), output("c1", "a" * 50)]})
    shortened = {**messages[2], "content": "a [cut]"}
    renamed = {**messages[1], "tool_calls": [{**messages[1]["tool_calls"][0], "id": "c9"}]}
    rendered = render_items([messages[0], renamed, {**shortened, "tool_call_id": "c9"}])
    assert rendered[1] == reasoning(1)
    assert rendered[2] == {
        "type": "function_call",
        "call_id": "c9",
        "name": "exec_command",
        "arguments": '{"cmd": "ls"}',
    }
    assert rendered[3] == {"type": "function_call_output", "call_id": "c9", "output": "a [cut]"}


def test_nothing_of_ctxproxys_own_reaches_the_wire() -> None:
    body = {**CODEX_BODY, "input": [*CODEX_BODY["input"], user("go")]}
    messages = to_messages(body)
    rendered = render_body(body, [*messages[:3], {"role": "assistant", "content": "summary"}, *messages[10:]])
    assert check_request(rendered) is None
