"""Through the real proxy, streamed: one turn calls a client tool and ``ctxproxy_recall_page``. The
client gets only its own call, renumbered from 0, ``finish_reason`` ``tool_calls``; its next request
(its call and its result) is accepted and forwarded as a valid conversation."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai

from tests.conftest import MakeProxy, Upstream
from tests.recall.paged import PAGED_TENANT, RECALL, SEARCH, WEATHER, paged_history
from tests.tools.wire import chunks, recall, sse

WEATHER_CALL = {"id": "call_w", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}


def assistant_message(calls: dict[int, dict[str, str]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ],
    }


def accumulate(fragments: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    built: dict[int, dict[str, str]] = {}
    for tc in fragments:
        seen = built.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
        seen["id"] += tc.get("id") or ""
        seen["name"] += (tc.get("function") or {}).get("name") or ""
        seen["arguments"] += (tc.get("function") or {}).get("arguments") or ""
    return built


async def follow_up(
    http: aiohttp.ClientSession, url: str, upstream: Upstream, calls: dict[int, dict[str, str]]
) -> None:
    """The client's next request, with its own call and result, goes through as a valid conversation."""
    messages = [
        *paged_history(),
        assistant_message(calls),
        {"role": "tool", "tool_call_id": "call_w", "content": "Sunny, 21 °C."},
    ]
    upstream.fake.reply_stream(["Sunny ", "in Oslo."])
    request = {"model": "m", "messages": messages, "tools": [WEATHER], "stream": True}
    async with http.post(url, json=request) as resp:
        assert resp.status == 200
        assert b"Sunny " in await resp.read()
    forwarded = upstream.fake.chat_requests()[-1].json()["messages"]
    assistant = next(m for m in forwarded if m.get("tool_calls"))
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_w"]
    assert forwarded[forwarded.index(assistant) + 1] == messages[-1]  # its result answers its call
    assert all(c["function"]["name"] not in (RECALL, SEARCH) for m in forwarded for c in m.get("tool_calls") or [])
    assert not any(m["role"] == "tool" and m["tool_call_id"] != "call_w" for m in forwarded)


async def test_mixed_stream_over_http(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    url = proxy.url("/v1/chat/completions")
    upstream.fake.reply_stream(["Checking. "], tool_calls=[recall(1), WEATHER_CALL])  # ours first: theirs is index 1
    request = {"model": "m", "messages": paged_history(), "tools": [WEATHER], "stream": True}
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=request) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            payloads = await sse(resp)
        received = chunks(payloads)
        fragments = [tc for c in received if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or []]
        calls = accumulate(fragments)
        assert calls == {0: {"id": "call_w", "name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        assert all(RECALL.encode() not in p for p in payloads)
        finishes = [c["choices"][0]["finish_reason"] for c in received if c["choices"]]
        assert [f for f in finishes if f] == ["tool_calls"] and payloads[-1] == b"[DONE]"
        assert len(upstream.fake.chat_requests()) == 1  # ours was dropped unanswered
        await follow_up(http, url, upstream, calls)


async def test_mixed_stream_through_the_openai_sdk(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_stream(tool_calls=[recall(2), WEATHER_CALL, recall(1)])
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    stream = await client.chat.completions.create(
        model="m",
        messages=paged_history(),
        tools=[WEATHER],
        stream=True,  # type: ignore[arg-type, list-item]
    )
    calls: dict[int, dict[str, str]] = {}
    finishes = []
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                seen = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                seen["id"] += delta.id or ""
                if delta.function:
                    seen["name"] += delta.function.name or ""
                    seen["arguments"] += delta.function.arguments or ""
            if choice.finish_reason:
                finishes.append(choice.finish_reason)
    await client.close()
    assert calls == {0: {"id": "call_w", "name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    assert finishes == ["tool_calls"]
    async with aiohttp.ClientSession() as http:
        await follow_up(http, proxy.url("/v1/chat/completions"), upstream, calls)
