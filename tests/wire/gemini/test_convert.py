"""A Gemini body as canonical messages and back (pure): unchanged, it comes back exactly; calls
and responses pair by id or position; what compaction changes or adds is written as the API takes
it."""

from __future__ import annotations

from typing import Any

from ctxproxy.vocabulary import PART_TOKENS_HINT
from ctxproxy.wire.gemini.canonical import AT_KEY, IMAGE_TOKENS, to_messages
from ctxproxy.wire.gemini.forward import key_from_query
from ctxproxy.wire.gemini.render import render_body
from tests.gemini.contents import agent_turns, body, user

BODY = body(
    [
        {"role": "user", "parts": [{"text": "look"}, {"inline_data": {"mime_type": "image/png", "data": "YWJj"}}]},
        *agent_turns(2),
        {"role": "model", "parts": [{"functionCall": {"id": "own-1", "name": "read_log", "args": {}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "own-1", "name": "read_log", "response": {}}}, {"text": "and hurry"}],
        },  # fmt: skip
        {"parts": [{"text": "no role"}], "unknownField": 1},
    ],
    generation_config={"max_output_tokens": 9},
)


def test_an_unchanged_body_comes_back_exactly() -> None:
    assert render_body(BODY, to_messages(BODY)) == BODY


def test_calls_and_responses_pair_by_id_or_position() -> None:
    messages = to_messages(BODY)
    calls = [call["id"] for m in messages for call in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results == ["call_2_0", "call_2_1", "call_6_0", "call_6_1", "own-1"]
    assert [m["role"] for m in messages[-3:]] == ["tool", "user", "user"]
    image = messages[1]["content"][1]
    assert image["type"] == "inlineData" and image[PART_TOKENS_HINT] == IMAGE_TOKENS
    thought = messages[3]["content"][0]
    assert thought["type"] == "thought" and thought[PART_TOKENS_HINT] < 20


def test_what_compaction_changed_or_added_is_written_as_the_api_takes_it() -> None:
    messages: list[dict[str, Any]] = to_messages(BODY)
    system, first, *rest = messages
    summary = {"role": "assistant", "name": "summary", "content": "## Summary\nEarlier: two nights of logs."}
    tool = next(m for m in rest if m["role"] == "tool")
    shortened = [{**m, "content": "[cut]"} if m is tool else m for m in rest]
    out = render_body(BODY, [summary, *shortened])
    assert "systemInstruction" not in out  # its message was left out
    assert out["contents"][0] == {"role": "user", "parts": [{"text": summary["content"]}]}
    changed = out["contents"][3]
    assert changed["parts"][0] == {"functionResponse": {"name": "read_log", "response": {"output": "[cut]"}}}
    assert changed["parts"][1] == BODY["contents"][3]["parts"][1]  # the other response, as it came
    assert out["contents"][2] == BODY["contents"][2]  # the model turn: whole, thought and signature


def test_a_response_whose_call_was_left_out_becomes_text() -> None:
    messages = to_messages(BODY)
    at = {m[AT_KEY] for m in messages if m.get("tool_calls")}
    kept = [m for m in messages if m.get(AT_KEY) not in at or not m.get("tool_calls")]
    kept = [m for m in kept if m.get(AT_KEY) != 0]
    out = render_body(BODY, [user_message("start"), *kept])
    orphans = [p for c in out["contents"] for p in c["parts"] if "text" in p and p["text"].startswith("[Result")]
    assert len(orphans) == 5 and all("read_log" in p["text"] for p in orphans)
    assert not any("functionResponse" in p or "function_response" in p for c in out["contents"] for p in c["parts"])


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_the_key_leaves_the_query() -> None:
    assert key_from_query("alt=sse&key=abc%2Bd&x=1") == ("alt=sse&x=1", "abc+d")
    assert key_from_query("%6Bey=s&alt=sse") == ("alt=sse", "s")
    assert key_from_query("") == ("", None)
    assert user("x") == {"role": "user", "parts": [{"text": "x"}]}
