"""Reading Messages streams: events by name and data, the end, errors, and usage."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from ctxproxy.upstream.sse import EventFramer
from ctxproxy.wire.anthropic.sse import StreamEvent, StreamState, Usage, error_of, parse_events, usage_of
from tests.fakes.anthropic_upstream import MESSAGES_PATH, start_fake_anthropic

# Anthropic's documented example stream, byte for byte in its framing (a cache read added to the usage).
DOC_STREAM = (
    b"event: message_start\n"
    b'data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", '
    b'"role": "assistant", "content": [], "model": "claude-opus-4-7", "stop_reason": null, "stop_sequence": null, '
    b'"usage": {"input_tokens": 25, "cache_read_input_tokens": 100, "output_tokens": 1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}\n\n'
    b"event: ping\n"
    b'data: {"type": "ping"}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type": "content_block_stop", "index": 0}\n\n'
    b"event: message_delta\n"
    b'data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, '
    b'"usage": {"output_tokens": 15}}\n\n'
    b"event: message_stop\n"
    b'data: {"type": "message_stop"}\n\n'
)
OVERLOADED = (
    b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
)


def test_the_documented_stream() -> None:
    state = StreamState()
    events = state.see_all(DOC_STREAM)
    assert [e.name for e in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert state.started and state.complete and state.error is None
    assert state.stop_reason == "end_turn"
    assert state.usage == Usage(input_tokens=25, cache_read_input_tokens=100, output_tokens=15)
    assert state.usage.prompt_tokens == 125


def test_an_error_event_cuts_the_stream_short() -> None:
    state = StreamState()
    state.see_all(DOC_STREAM.split(b"event: content_block_stop")[0] + OVERLOADED)
    assert state.started and not state.complete
    assert state.error is not None and (state.error.type, state.error.message) == ("overloaded_error", "Overloaded")
    [event] = parse_events(OVERLOADED)
    assert error_of(event) == state.error
    assert error_of(parse_events(DOC_STREAM)[0]) is None


def test_message_delta_counts_are_cumulative_and_replace() -> None:
    state = StreamState()
    state.see(StreamEvent("message_start", b'{"message": {"usage": {"input_tokens": 10, "output_tokens": 1}}}'))
    state.see(StreamEvent("message_delta", b'{"usage": {"output_tokens": 7}}'))
    assert state.usage == Usage(input_tokens=10, output_tokens=7)
    delta = b'{"usage": {"input_tokens": 12, "cache_creation_input_tokens": 50, "output_tokens": 9}}'
    state.see(StreamEvent("message_delta", delta))
    assert state.usage == Usage(input_tokens=12, cache_creation_input_tokens=50, output_tokens=9)
    assert state.usage.prompt_tokens == 62


def test_framing_rules() -> None:
    chunk = (
        b": a comment\r\n"
        b"event:custom\r\n"
        b"id: 7\r\n"
        b'data: {"a":\r\n'
        b"data:  1}\r\n\r\n"
        b"event: lonely\n\n"  # no data: not an event
        b'data: {"type": "message_stop"}\n\n'
        b"event: message_start\ndata: {"  # unterminated: not yet an event
    )
    events = parse_events(chunk)
    assert events == [StreamEvent("custom", b'{"a":\n 1}'), StreamEvent(None, b'{"type": "message_stop"}')]
    assert events[0].payload() == {"a": 1}
    assert [e.kind for e in events] == ["custom", "message_stop"]  # the name, else the data's type
    assert StreamEvent(None, b"[DONE]").payload() is None and StreamEvent(None, b"[1]").kind is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"input_tokens": 3, "output_tokens": 2}, Usage(input_tokens=3, output_tokens=2)),
        ({"input_tokens": True, "output_tokens": -1, "cache_read_input_tokens": "9"}, Usage()),
        ({"input_tokens": 3.0}, Usage()),
        ("usage", None),
        (None, None),
    ],
)
def test_usage_of_counts_only_non_negative_integers(value: Any, expected: Usage | None) -> None:
    assert usage_of(value) == expected


def test_prompt_tokens_needs_input_tokens() -> None:
    assert Usage(cache_read_input_tokens=5).prompt_tokens is None
    assert Usage(input_tokens=5, cache_read_input_tokens=0).prompt_tokens == 5


async def test_a_fake_upstream_stream_read_in_small_pieces(aiohttp_server: Any) -> None:
    fake, server = await start_fake_anthropic(aiohttp_server)
    fake.reply_stream(["one ", "two"], thinking="first", tool_uses=[{"name": "t", "input": {"k": "v"}}])
    body = {"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": [{"role": "user", "content": "go"}]}
    async with aiohttp.ClientSession() as http:
        headers = {"anthropic-version": "2023-06-01"}
        async with http.post(server.make_url(MESSAGES_PATH), json=body, headers=headers) as resp:
            data = await resp.read()
    framer, state, kinds = EventFramer(), StreamState(), []
    for at in range(0, len(data), 7):  # events split across reads, as a socket delivers them
        kinds += [event.kind for event in state.see_all(framer.feed(data[at : at + 7]))]
    assert state.complete and state.stop_reason == "tool_use"
    assert kinds.count("content_block_start") == 3 and kinds[-1] == "message_stop"
    usage = fake.meter.usage(body)  # what the fake reported (its cache is not involved here)
    assert state.usage.input_tokens == usage["input_tokens"] and state.usage.output_tokens
