"""ctxproxy's tools for Messages clients, streamed: every round reaches the client as it is generated,
our ``tool_use`` blocks never do, and the content blocks the client sees are numbered 0, 1, 2 …
across the rounds, so the ``anthropic`` SDK's ``messages.stream`` (sync and async) builds the final
message from them."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from ctxproxy.wire.anthropic.sse import parse_events
from tests.anthropic.conftest import CLIENT_KEY, MODEL, Claude, MakeProxy, check_shape
from tests.anthropic.paged import RECALL, SYSTEM, WEATHER, history, paged_client, recall, results, sync_client

LOOK = ["Let ", "me ", "look."]
ANSWER = ["Your ", "locker ", "code ", "is ", "4417."]


def indices(events: list[Any]) -> list[int]:
    return [e.index for e in events if e.type in ("content_block_start", "content_block_delta", "content_block_stop")]


def contiguous(numbers: list[int]) -> bool:
    """Each block is numbered one more than the one before, from 0, and never again after it ended."""
    seen: list[int] = []
    for number in numbers:
        if not seen or seen[-1] != number:
            seen.append(number)
    return seen == list(range(len(seen)))


async def test_an_async_stream_of_two_rounds_reads_as_one_message(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(LOOK, tool_uses=[recall(1, id="toolu_r1")])
    claude.fake.reply_stream(ANSWER)
    async with client.messages.stream(model=MODEL, max_tokens=200, system=SYSTEM, messages=history()) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_message()
    text = "".join(e.text for e in events if e.type == "text")
    assert text == "Let me look.Your locker code is 4417."
    assert [(b.type, getattr(b, "text", None)) for b in final.content] == [
        ("text", "Let me look."),
        ("text", "Your locker code is 4417."),
    ]
    assert final.stop_reason == "end_turn" and contiguous(indices(events))
    assert not any(e.type == "content_block_start" and e.content_block.type == "tool_use" for e in events)
    first, second = (claude.fake.message_requests()[i].json() for i in (0, 1))
    assert final.usage.input_tokens == sum(claude.fake.meter.usage(body)["input_tokens"] for body in (first, second))
    assert final.usage.output_tokens > 1
    check_shape(second)
    # The round as the model made it, rebuilt from its events: its text, our call with its input.
    assert second["stream"] is True and second["messages"][-2]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_r1", "name": RECALL, "input": {"page_index": 1}},
    ]
    (answer,) = results(second["messages"][-1])
    assert answer["tool_use_id"] == "toolu_r1" and "My locker code is 4417" in answer["content"]


async def test_a_sync_stream_gets_the_final_message(make_proxy: MakeProxy, claude: Claude) -> None:
    _, url = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(tool_uses=[recall(2)])
    claude.fake.reply_stream(["The standup ", "is at 9:30."])

    def ask() -> tuple[str, Any]:
        with sync_client(url) as client:
            with client.messages.stream(model=MODEL, max_tokens=200, messages=history()) as stream:
                return "".join(stream.text_stream), stream.get_final_message()

    text, final = await asyncio.to_thread(ask)
    assert text == "The standup is at 9:30." and [b.type for b in final.content] == ["text"]
    assert final.stop_reason == "end_turn"


async def test_the_wire_holds_one_message(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(LOOK, tool_uses=[recall(1)], usage={"input_tokens": 100, "output_tokens": 10})
    claude.fake.reply_stream(ANSWER, usage={"input_tokens": 150, "output_tokens": 7, "cache_read_input_tokens": 90})
    body = {"model": MODEL, "max_tokens": 200, "messages": history(), "stream": True}
    headers = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
    async with aiohttp.ClientSession() as http, http.post(f"{url}/v1/messages", json=body, headers=headers) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        events = parse_events(await resp.read())
    kinds = [e.kind for e in events]
    assert kinds.count("message_start") == kinds.count("message_delta") == kinds.count("message_stop") == 1
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    data = [orjson.loads(e.data) for e in events]
    starts = [d["content_block"] for d in data if d["type"] == "content_block_start"]
    assert [s["type"] for s in starts] == ["text", "text"]
    assert [d["index"] for d in data if "index" in d] == [0] * 5 + [1] * 7  # start, 3 deltas, stop; then 5 deltas
    assert data[-2]["usage"] == {"input_tokens": 250, "output_tokens": 17, "cache_read_input_tokens": 90}
    assert data[-2]["delta"]["stop_reason"] == "end_turn"


async def test_a_mixed_turn_streams_the_clients_call_renumbered(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    weather = {"id": "toolu_w", "name": "get_weather", "input": {"city": "Oslo"}}
    claude.fake.reply_stream(["Checking."], tool_uses=[recall(1), weather])
    async with client.messages.stream(model=MODEL, max_tokens=200, messages=history(), tools=[WEATHER]) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].name == "get_weather" and final.content[1].input == {"city": "Oslo"}
    assert final.stop_reason == "tool_use" and contiguous(indices(events))
    assert len(claude.fake.message_requests()) == 1


async def test_thinking_streams_and_goes_back_whole(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(thinking="The code is on an archived page.", tool_uses=[recall(1)])
    claude.fake.reply_stream(ANSWER)
    async with client.messages.stream(
        model=MODEL, max_tokens=2000, messages=history(), thinking={"type": "enabled", "budget_tokens": 1024}
    ) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"] and contiguous(indices(events))
    assert final.content[0].thinking == "The code is on an archived page."
    sent_back = claude.fake.message_requests()[1].json()["messages"][-2]["content"]
    assert [b["type"] for b in sent_back] == ["thinking", "tool_use"]
    assert sent_back[0]["thinking"] == "The code is on an archived page." and sent_back[0]["signature"]
    assert sent_back[1]["input"] == {"page_index": 1}
