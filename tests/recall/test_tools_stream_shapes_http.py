"""Through the real proxy: upstreams that stream tool calls differently from OpenAI (no ``index``,
the name in a later fragment) still never hand the client a call to ctxproxy's tools."""

from __future__ import annotations

import aiohttp
import orjson

from tests.conftest import MakeProxy, Upstream
from tests.recall.paged import PAGED_TENANT, RECALL, WEATHER, paged_history
from tests.tools.wire import (
    SSE_HEADERS,
    chunks,
    raw_chunk,
    sse,
    sse_body,
    streamed_text,
)


def tool_fragments(payloads: list[bytes]) -> list[dict[str, object]]:
    return [tc for c in chunks(payloads) if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or []]


async def test_calls_without_index_each_in_its_own_delta(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    weather = {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    ours = {"id": "call_r", "type": "function", "function": {"name": RECALL, "arguments": '{"page_index": 1}'}}
    body = sse_body(
        [
            raw_chunk({"role": "assistant", "content": ""}),
            raw_chunk({"tool_calls": [weather]}),
            raw_chunk({"tool_calls": [ours]}),
            raw_chunk({}, "tool_calls"),
        ]
    )
    upstream.fake.reply_raw(200, body, headers=SSE_HEADERS)
    request = {"model": "m", "messages": paged_history(), "tools": [WEATHER], "stream": True}
    async with aiohttp.ClientSession() as http, http.post(proxy.url("/v1/chat/completions"), json=request) as resp:
        assert resp.status == 200
        payloads = await sse(resp)
    assert all(RECALL.encode() not in p and b"call_r" not in p for p in payloads)
    assert tool_fragments(payloads) == [{**weather, "index": 0}]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks(payloads) if c["choices"]]
    assert [f for f in finishes if f] == ["tool_calls"] and payloads[-1] == b"[DONE]"
    assert len(upstream.fake.chat_requests()) == 1  # a mixed turn: ours is dropped, the client answers its own


async def test_our_name_in_a_later_fragment_is_answered_not_relayed(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    body = sse_body(
        [
            raw_chunk({"role": "assistant", "content": ""}),
            raw_chunk({"tool_calls": [{"index": 0, "id": "call_late", "type": "function"}]}),
            raw_chunk({"tool_calls": [{"index": 0, "function": {"name": RECALL, "arguments": '{"page_'}}]}),
            raw_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'index": 1}'}}]}),
            raw_chunk({}, "tool_calls"),
        ]
    )
    upstream.fake.reply_raw(200, body, headers=SSE_HEADERS)
    upstream.fake.reply_stream(["Your locker ", "code is 4417."])
    request = {"model": "m", "messages": paged_history(), "stream": True}
    async with aiohttp.ClientSession() as http, http.post(proxy.url("/v1/chat/completions"), json=request) as resp:
        payloads = await sse(resp)
    assert streamed_text(payloads) == "Your locker code is 4417."
    assert all(b'tool_calls":[' not in p and b"call_late" not in p for p in payloads)
    second = upstream.fake.chat_requests()[1].json()["messages"]
    assert second[-2]["tool_calls"] == [
        {"id": "call_late", "type": "function", "function": {"name": RECALL, "arguments": '{"page_index": 1}'}}
    ]
    assert second[-1]["tool_call_id"] == "call_late" and "My locker code is 4417" in second[-1]["content"]
    final = [orjson.loads(p) for p in payloads[:-1]][-1]
    assert final["choices"][0]["finish_reason"] == "stop"
