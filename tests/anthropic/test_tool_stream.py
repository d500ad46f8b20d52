"""The per-round filter of a streamed Messages tool loop (pure): our ``tool_use`` blocks are taken out,
the client's blocks are numbered across rounds, the round is rebuilt from its events, and events it
cannot judge pass as they came."""

from __future__ import annotations

from typing import Any

import orjson

from ctxproxy.tools.definitions import ORDER
from ctxproxy.wire.anthropic.sse import parse_events
from ctxproxy.wire.anthropic.tool_stream import RoundEvents, closing_events, event_bytes
from ctxproxy.wire.anthropic.tools import offer_tools
from tests.fakes.anthropic_wire import Answer, sse_bytes, stream_events

TOOLS = offer_tools({"messages": []}, ORDER)
assert TOOLS is not None
RECALL = TOOLS.wire_names["recall_page"]


def answer(*blocks: dict[str, Any], stop_reason: str = "end_turn") -> bytes:
    made = Answer("claude-test-1", list(blocks), stop_reason, usage={"input_tokens": 10, "output_tokens": 5})
    return b"".join(sse_bytes(event) for event in stream_events(made, "msg_1"))


def relayed(out: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(event.data) for event in parse_events(out)]


TEXT = {"type": "text", "text": "Checking the archive."}
OURS = {"type": "tool_use", "id": "toolu_1", "name": RECALL, "input": {"page_index": 2}}
THEIRS = {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {"q": "x"}}


def test_our_block_is_taken_out_and_the_clients_renumbered() -> None:
    events = RoundEvents(TOOLS, offset=3, first=False)
    out = relayed(events.feed_events(answer(TEXT, OURS, THEIRS, stop_reason="tool_use")))
    assert "message_start" not in [e["type"] for e in out]  # a later round: the client has one already
    starts = [e["content_block"] for e in out if e["type"] == "content_block_start"]
    assert [s.get("name") or s["type"] for s in starts] == ["text", "lookup"]
    assert sorted({e["index"] for e in out if "index" in e}) == [3, 4]
    assert [e["type"] for e in out if e["type"].startswith("message")] == []  # delta and stop are held
    end = events.result()
    assert end.done and end.client_calls and end.shown == 5 and end.stop_reason == "tool_use"
    assert [(c.id, c.name, c.parsed_arguments()) for c in end.calls] == [("toolu_1", "recall_page", {"page_index": 2})]
    assert end.content == [TEXT, OURS, THEIRS]  # rebuilt as the model made it


def test_round_one_passes_as_the_upstream_sent_it() -> None:
    events = RoundEvents(TOOLS, offset=0, first=True)
    raw = answer(TEXT)
    out = events.feed_events(raw)
    end = events.result()
    assert out + closing_events(end, {"input_tokens": 10, "output_tokens": 5}, pristine=True) == raw


def test_closing_sums_usage_and_ends_a_turn_that_called_only_ours() -> None:
    events = RoundEvents(TOOLS, offset=0, first=True)
    events.feed_events(answer(OURS, stop_reason="tool_use"))
    closing = relayed(closing_events(events.result(), {"input_tokens": 30, "output_tokens": 9}, pristine=False))
    assert closing[0]["delta"]["stop_reason"] == "end_turn"
    assert closing[0]["usage"] == {"input_tokens": 30, "output_tokens": 9}
    assert closing[1] == {"type": "message_stop"}


def test_arguments_that_are_not_json_reach_the_executor_as_they_came() -> None:
    events = RoundEvents(TOOLS, offset=0, first=True)
    start = {"type": "content_block_start", "index": 0, "content_block": {**OURS, "input": {}}}
    deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in ('{"page_', "index: 2")]
    feed = [start, *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas)]
    feed.append({"type": "content_block_stop", "index": 0})
    assert events.feed_events(b"".join(sse_bytes((e["type"], e)) for e in feed)) == b""
    (call,) = events.result().calls
    assert call.arguments == '{"page_index: 2' and call.parsed_arguments() is None
    assert events.result().content[0]["input"] == {}


def test_events_it_cannot_judge_pass_unchanged() -> None:
    events = RoundEvents(TOOLS, offset=2, first=False)
    odd = [
        event_bytes("content_block_delta", b'{"type":"content_block_delta","index":7,"delta":{}}'),  # never started
        event_bytes("content_block_delta", b'{"type":"content_block_delta","index":"0"}'),  # not a number
        event_bytes("mystery", b"not json"),
        event_bytes("ping", b'{"type": "ping"}'),
        event_bytes("error", b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'),
    ]
    assert [events.feed_events(event) for event in odd] == odd
    assert events.result().error and not events.result().done
