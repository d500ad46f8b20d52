"""One round of the Messages tool loop in content blocks (pure): what goes back upstream, what the
client is shown, how answers are withdrawn."""

from __future__ import annotations

from typing import Any

from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import ORDER
from ctxproxy.wire.anthropic.tool_blocks import final_message, sent_back, split_uses, tool_ids, with_answers
from ctxproxy.wire.anthropic.tools import offer_tools

TOOLS = offer_tools({"messages": []}, ORDER)
assert TOOLS is not None
RECALL = TOOLS.wire_names["recall_page"]
THINKING = {"type": "thinking", "thinking": "Archived.", "signature": "sig"}
OURS = {"type": "tool_use", "id": "toolu_1", "name": RECALL, "input": {"page_index": 1}}
THEIRS = {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {}}


def test_the_round_goes_back_as_the_model_made_it_with_the_ids_the_loop_gave() -> None:
    content: list[Any] = [THINKING, {"type": "text", "text": ""}, "garbage", OURS]
    calls, client_calls = split_uses(content, TOOLS)
    assert not client_calls and [c.id for c in calls] == ["toolu_1"]
    renamed = [ProxyCall("ctxproxy_call_0", c.name, c.wire_name, c.arguments) for c in calls]
    assert sent_back(content, renamed, TOOLS) == {
        "role": "assistant",
        "content": [THINKING, {**OURS, "id": "ctxproxy_call_0"}],  # no empty text, nothing but blocks
    }


def test_the_client_sees_earlier_blocks_then_the_answer_without_ours() -> None:
    answer = {"id": "msg_2", "content": [OURS, THEIRS], "stop_reason": "tool_use", "usage": {"output_tokens": 3}}
    earlier = [{"type": "text", "text": "Looking."}]
    final = final_message(answer, TOOLS, {"input_tokens": 9, "output_tokens": 7}, earlier)
    assert final["content"] == [*earlier, THEIRS] and final["stop_reason"] == "tool_use"
    assert final["usage"] == {"input_tokens": 9, "output_tokens": 7} and final["id"] == "msg_2"
    alone = final_message({**answer, "content": [OURS]}, TOOLS, None)
    assert alone["content"] == [] and alone["stop_reason"] == "end_turn" and alone["usage"] == answer["usage"]


def test_withdrawing_replaces_only_the_loops_answers() -> None:
    client_result = {"type": "tool_result", "tool_use_id": "toolu_0", "content": "the client's"}
    messages: list[Any] = [
        {"role": "user", "content": [client_result]},
        {"role": "assistant", "content": [OURS]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "page 1"}]},
    ]
    out = with_answers(messages, 1, "gone")
    assert out[:2] == messages[:2] and out[2]["content"][0]["content"] == "gone"
    assert tool_ids(messages) == {"toolu_0", "toolu_1"}
