"""Chat streams are relayed event by event as they arrive, and failures end them cleanly."""

from __future__ import annotations

import time

import aiohttp
import openai
import orjson
import pytest

from tests.conftest import Proxy, Upstream

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "stream please"}], "stream": True}


async def read_events(resp: aiohttp.ClientResponse) -> list[tuple[float, bytes]]:
    """(arrival time, data payload) per SSE event."""
    events, buffer = [], b""
    async for chunk in resp.content.iter_any():
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            events.append((time.monotonic(), event.removeprefix(b"data: ")))
    return events


async def test_events_arrive_as_upstream_sends_them(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["one ", "two ", "three"], delay=0.4)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            assert resp.status == 200
            assert resp.content_type == "text/event-stream"
            assert resp.headers["X-Ctx-Strategy"] == "none"
            events = await read_events(resp)
    payloads = [e for _, e in events]
    assert payloads[-1] == b"[DONE]"
    contents = [
        orjson.loads(p)["choices"][0]["delta"].get("content") for p in payloads[:-1] if orjson.loads(p)["choices"]
    ]
    assert "".join(c for c in contents if c) == "one two three"
    # A buffering proxy would deliver everything at once; relayed events keep the upstream's pacing.
    content_times = [t for t, p in events if b'"content":"t' in p or b'"content":"one' in p]
    assert content_times[-1] - content_times[0] >= 0.6


async def test_mid_stream_failure_becomes_error_event_then_done(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["partial ", "answer ", "never ", "finished"], cut_after=3)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            assert resp.status == 200
            events = [p for _, p in await read_events(resp)]  # the client's stream ends cleanly
    assert events[-1] == b"[DONE]"
    error = orjson.loads(events[-2])["error"]
    assert error["type"] == "upstream_error"
    assert error["code"] == "upstream_connection_error"
    # Everything before the failure got through, and only whole events did.
    assert all(orjson.loads(p).get("object") == "chat.completion.chunk" for p in events[:-2])
    assert len(events) == 3 + 2


async def test_sdk_raises_on_mid_stream_failure(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["a ", "b ", "c"], cut_after=2)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    received = []
    with pytest.raises(openai.APIError) as caught:
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=BODY["messages"], stream=True)
        async for chunk in stream:
            received.append(chunk)
    assert "closed the connection" in str(caught.value)
    assert len(received) == 2
    await client.close()


async def test_upstream_error_on_stream_request_relayed_as_json(proxy: Proxy, upstream: Upstream) -> None:
    error = {
        "error": {
            "message": "model not found",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    upstream.fake.reply_error(404, error)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            assert resp.status == 404
            assert await resp.json() == error


async def test_provider_sse_error_event_relayed(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_sse_error(
        {"message": "overloaded", "type": "server_error", "code": "overloaded"}, after_pieces=["x"]
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            events = [p for _, p in await read_events(resp)]
    assert orjson.loads(events[-2])["error"]["code"] == "overloaded"
    assert events[-1] == b"[DONE]"


async def test_client_disconnect_mid_stream_closes_upstream(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream([f"w{i} " for i in range(50)], delay=0.1)
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy.url("/v1/chat/completions"), json=BODY)
        await resp.content.readuntil(b"\n\n")
        resp.close()  # drop the connection mid-stream
    await asyncio_wait_for(upstream.fake.cancelled.wait(), 5)
    assert upstream.fake.cancellations == 1


async def asyncio_wait_for(aw, timeout: float):
    import asyncio

    return await asyncio.wait_for(aw, timeout)
